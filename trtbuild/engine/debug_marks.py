"""Debug-tensor marks of a network defined by build_plan (layerwise parity through debug tensors,
trtbuild.parity.debug_tensors)."""

from __future__ import annotations

from trtbuild.backend import backend_name

from .errors import BuildError


def mark_debug_tensors(trt, network, tensors: dict, unfused: bool = False) -> None:
    """mark_debug each tensor (layerwise parity through debug tensors), or with `unfused`
    mark_unfused_tensors_as_debug_tensors() instead (fusions untouched; `tensors` only named);
    BuildError if the backend refuses."""
    if unfused:
        if not network.mark_unfused_tensors_as_debug_tensors():
            raise BuildError(f"{backend_name(trt)} refused mark_unfused_tensors_as_debug_tensors on network "
                             f"'{network.name}'")
        return
    for name, t in tensors.items():
        if not network.mark_debug(t):
            raise BuildError(f"{backend_name(trt)} refused to mark tensor '{name}' of network '{network.name}' "
                             "as a debug tensor (mark_debug returned False)")
