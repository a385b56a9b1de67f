"""Set one attribute of a freshly added layer (LRN, pooling or activation) on a backend and read it
back, so the reference and TensorRT-RTX can be compared on what each setter accepts."""

from __future__ import annotations

from trtbuild.engine.build import new_network

ATTRIBUTES = [("lrn", "window_size"), ("lrn", "alpha"), ("pool", "average_count_excludes_padding"),
              ("pool", "pre_padding"), ("pool", "stride_nd"), ("pool", "padding_nd"), ("act", "type"),
              ("act", "alpha")]


def set_attribute(trt, owner: str, attribute: str, value):
    _, network, _ = new_network(trt)
    x = network.add_input("x", trt.float32, (1, 4, 6, 6))
    layer = {"lrn": lambda: network.add_lrn(x, 5, 1e-4, 0.75, 2.0),
             "pool": lambda: network.add_pooling_nd(x, trt.PoolingType.AVERAGE, trt.Dims((3, 3))),
             "act": lambda: network.add_activation(x, trt.ActivationType.RELU)}[owner]()
    try:
        setattr(layer, attribute, value)
    except TypeError:
        return "TypeError"
    got = getattr(layer, attribute)
    if attribute in ("pre_padding", "stride_nd", "padding_nd"):
        return tuple(got)
    return got.name if hasattr(got, "name") else got

