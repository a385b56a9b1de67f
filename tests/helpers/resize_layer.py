"""One IResizeLayer added and configured the way the resize tests describe it: an output `shape` or `scales`,
then any attributes by name (resize_mode, coordinate_transformation, nearest_rounding, ...)."""

from __future__ import annotations


def add_resize(net, x, shape=None, scales=None, **attrs):
    """The resize layer of `x` on `net`, with `scales`, `shape` and `attrs` set in that order."""
    layer = net.add_resize(x)
    if scales is not None:
        layer.scales = scales
    if shape is not None:
        layer.shape = shape
    for key, value in attrs.items():
        setattr(layer, key, value)
    return layer
