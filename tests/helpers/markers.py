"""The markers that follow from the fixtures a test uses (applied by tests/conftest.py before -m selects), so
that a new test asking for such a fixture is in its tier without anyone remembering to mark it."""

from __future__ import annotations

#: fixture -> marker: NVIDIA's TensorRT-RTX (`rtx`), a download from the package index (`network`)
FIXTURE_MARKERS = {"rtx": "rtx", "rtxnet": "rtx", "wheel_api": "network"}


def markers_for(fixturenames) -> list[str]:
    """The markers a test using `fixturenames` gets, sorted."""
    return sorted({FIXTURE_MARKERS[f] for f in fixturenames if f in FIXTURE_MARKERS})
