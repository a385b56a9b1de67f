"""Which plugins a network uses, for the sidecar (``"plugins"``), so that whoever deploys the engine
(``trtbuild export-triton``, a Triton server) knows which plugin library must be loaded with it.

    plugins_used(trt, network)
    # [{"plugin": "trtbuild::Involution", "version": "1", "layers": 3,
    #   "library": "/abs/plugins/build/libtrtbuild_involution_plugin.so"}]

``library`` is the shared library real TensorRT loaded the creator from (None on the reference
backend, whose plugins are PyTorch twins registered in-process, and where it is unknown).
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

from trtbuild.backend import is_reference


def _identity(layer) -> tuple[str, str, str]:
    """(name, version, namespace) of a plugin layer's plugin, on the reference or real TensorRT."""
    plugin = getattr(layer, "plugin", None)
    if plugin is None and hasattr(layer, "get_plugin"):
        plugin = layer.get_plugin()
    creator = getattr(plugin, "_creator", None)  # reference plugins keep their creator
    if creator is not None:
        return creator.name, str(creator.plugin_version), creator.plugin_namespace or ""
    core = plugin
    try:  # TensorRT's IPluginV3: identity on its core capability interface
        trt = __import__(type(layer).__module__.split(".")[0])
        core = plugin.get_capability_interface(trt.PluginCapabilityType.CORE)
    except Exception:  # noqa: BLE001 - another plugin kind or binding version: keep what the plugin says
        pass
    return (str(getattr(core, "plugin_name", "unknown")), str(getattr(core, "plugin_version", "")),
            str(getattr(core, "plugin_namespace", "") or ""))


def _library(trt: ModuleType, name: str, namespace: str) -> str | None:
    """The library real TensorRT loaded the creator of trtbuild's Involution from, else None."""
    if is_reference(trt):
        return None
    from trtbuild.layers import involution

    if (name, namespace) != (involution.PLUGIN_NAME, involution.PLUGIN_NAMESPACE):
        return None
    loaded = list(involution._loaded_handles)
    path = Path(loaded[-1]) if loaded else involution.default_plugin_library_path()
    return str(path.resolve()) if path.is_file() else None


def plugins_used(trt: ModuleType, network) -> list[dict]:
    """One entry per distinct plugin the network's plugin layers use (see the module docstring)."""
    kinds = {getattr(trt.LayerType, n) for n in ("PLUGIN", "PLUGIN_V2", "PLUGIN_V3") if hasattr(trt.LayerType, n)}
    found: dict[tuple, dict] = {}
    for i in range(network.num_layers):
        layer = network.get_layer(i)
        if layer.type not in kinds:
            continue
        if layer.type == getattr(trt.LayerType, "PLUGIN_V3", None) and hasattr(trt, "IPluginV3Layer"):
            layer.__class__ = trt.IPluginV3Layer  # get_layer gives an ILayer: downcast, as TensorRT's bindings need
        name, version, namespace = _identity(layer)
        key = (name, version, namespace)
        if key not in found:
            found[key] = {"plugin": f"{namespace}::{name}" if namespace else name, "version": version,
                          "layers": 0, "library": _library(trt, name, namespace)}
        found[key]["layers"] += 1
    return list(found.values())
