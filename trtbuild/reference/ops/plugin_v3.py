"""IPluginV3Layer: a plugin's own shape, type and execution functions (see trtbuild/reference/plugins.py)."""

from __future__ import annotations

from ..enums import LayerType
from .base import ILayer
from .registry import register


class IPluginV3Layer(ILayer):
    _TYPE = LayerType.PLUGIN_V3

    def __init__(self, network, inputs, plugin, num_outputs):
        self._plugin = plugin
        super().__init__(network, inputs, {}, num_outputs=num_outputs)

    @property
    def plugin(self):
        return self._plugin


def infer(p, w, shapes, dtypes, name, plugin):
    out_shapes = plugin._output_shapes([tuple(s) for s in shapes])
    return [tuple(s) for s in out_shapes], list(plugin._output_dtypes(list(dtypes)))


def run(p, w, inputs, plugin):
    return list(plugin._execute(list(inputs)))


register(IPluginV3Layer, infer, run)  # no pessimistic model: a plugin computes as it does
