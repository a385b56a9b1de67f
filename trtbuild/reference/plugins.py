"""Plugin API of the reference backend: IPluginV3, creators, fields and the registry.

A reference plugin implements TensorRT's IPluginV3 contract through three private hooks
(_output_shapes, _output_dtypes, _execute) and keeps the fields it was created with in `_fields`,
which the plan serializes so the runtime can re-create it from the registry.
"""

from __future__ import annotations

import numpy as np

from .core import NetworkError
from .enums import PluginFieldType, TensorRTPhase


class PluginField:
    def __init__(self, name: str = "", data=None, type: PluginFieldType = PluginFieldType.UNKNOWN):
        self.name = str(name)
        self.data = np.asarray(data) if data is not None else np.zeros(0)
        self.type = PluginFieldType(type)

    @property
    def size(self) -> int:
        return int(self.data.size)


class PluginFieldCollection(list):
    """A list of PluginField, as tensorrt.PluginFieldCollection is."""


class IPluginV3:
    """Base class of reference plugins."""

    def __init__(self):
        self._name = ""
        self._fields: dict[str, np.ndarray] = {}
        self._creator = None

    def _setup(self, name: str, fields: dict, creator: "IPluginCreatorV3One") -> None:
        """Record what the plan serializes: the plugin name, its fields and its creator."""
        self._name = name
        self._fields = {k: np.asarray(v) for k, v in fields.items()}
        self._creator = creator

    def _output_shapes(self, input_shapes):  # pragma: no cover - abstract
        raise NotImplementedError

    def _output_dtypes(self, input_dtypes):  # pragma: no cover - abstract
        raise NotImplementedError

    def _execute(self, inputs):  # pragma: no cover - abstract
        raise NotImplementedError


class IPluginCreatorV3One:
    """Base class of reference plugin creators; subclasses set the four attributes and
    implement create_plugin(name, field_collection, phase)."""

    name: str = ""
    plugin_version: str = "1"
    plugin_namespace: str = ""
    field_names: PluginFieldCollection = PluginFieldCollection()

    def create_plugin(self, name: str, field_collection, phase: TensorRTPhase):  # pragma: no cover - abstract
        raise NotImplementedError


class IPluginRegistry:
    def __init__(self):
        self._creators: dict[tuple[str, str, str], IPluginCreatorV3One] = {}
        self.parent_search_enabled = True

    def register_creator(self, creator: IPluginCreatorV3One, plugin_namespace: str = "") -> bool:
        key = (creator.name, str(creator.plugin_version), plugin_namespace)
        if key in self._creators:
            return False
        creator.plugin_namespace = plugin_namespace
        self._creators[key] = creator
        return True

    def deregister_creator(self, creator: IPluginCreatorV3One) -> bool:
        key = (creator.name, str(creator.plugin_version), creator.plugin_namespace)
        return self._creators.pop(key, None) is not None

    def get_creator(self, type: str, version: str, plugin_namespace: str = ""):
        return self._creators.get((type, str(version), plugin_namespace))

    @property
    def all_creators(self) -> list:
        return list(self._creators.values())

    def load_library(self, plugin_path: str):
        raise NetworkError(
            f"load_library('{plugin_path}'): the reference backend cannot load compiled TensorRT plugin libraries; "
            "register a reference creator instead (see trtbuild.ops)")


_REGISTRY = IPluginRegistry()


def get_plugin_registry() -> IPluginRegistry:
    return _REGISTRY


def fields_to_dict(field_collection) -> dict[str, np.ndarray]:
    return {f.name: np.asarray(f.data) for f in field_collection}
