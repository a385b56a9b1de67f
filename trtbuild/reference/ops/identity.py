"""IIdentityLayer: its input, unchanged (in a strongly typed network it converts nothing)."""

from __future__ import annotations

from ..enums import LayerType
from .base import ILayer
from .common import same_shape_and_type
from .registry import register


class IIdentityLayer(ILayer):
    _TYPE = LayerType.IDENTITY


def run(p, w, inputs, plugin):
    return [inputs[0]]


register(IIdentityLayer, same_shape_and_type, run)
