"""Backend capabilities: callers ask for a feature (plugins, a timing cache, target GPUs), and the
answer for each backend is what its documentation says."""

from __future__ import annotations

import trtbuild.reference as ref
from trtbuild.backend import Capabilities, capabilities


def test_the_reference_has_plugins_and_a_timing_cache_and_builds_for_its_own_device():
    assert capabilities(ref) == Capabilities(has_plugins=True, has_timing_cache=True, needs_targets=False)


def test_tensorrt_rtx_has_no_plugins_and_no_timing_cache_and_needs_targets(rtx):
    assert capabilities(rtx) == Capabilities(has_plugins=False, has_timing_cache=False, needs_targets=True)
