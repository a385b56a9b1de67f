"""Exhaustive dtype tables for the sweep (see tests/helpers/rtx_sweep.py): every operation of every layer the
reference implements, on every input type, on a shape every layer takes (rank 4, NCHW), so that each
(layer, operation, dtype) cell is judged at least once whatever the random draws."""

from __future__ import annotations

import random

from helpers.rtx_sweep import ACTIVATIONS, CAST_TARGETS, DTYPES, EW_OPS, UNARY_OPS, W, dt, enum, single

SHAPE = (2, 4, 3, 5)


def dtype_table_cases() -> list:
    rng = random.Random("tables")
    cases = []

    def add(family, what, dtype, layer_fn, shape=SHAPE):
        def build(trt, net, dtype=dtype, layer_fn=layer_fn, shape=shape):
            x = net.add_input("x", dt(trt, dtype), shape)
            return [layer_fn(trt, net, x).get_output(0)]
        cases.append(single(family, f"{family} {what} x={shape} {dtype} (dtype table)", build))

    for dtype in DTYPES:
        for op in UNARY_OPS:
            add("unary", op, dtype, lambda trt, net, x, op=op: net.add_unary(x, enum(trt, "UnaryOperation", op)))
        for kind in ACTIVATIONS:
            add("activation", kind, dtype,
                lambda trt, net, x, kind=kind: net.add_activation(x, enum(trt, "ActivationType", kind)))
        for op in ("SUM", "PROD", "MAX", "MIN", "AVG"):
            add("reduce", op, dtype, lambda trt, net, x, op=op: net.add_reduce(x, enum(trt, "ReduceOperation", op),
                                                                               0b110, True))
        for op in EW_OPS:
            def build(trt, net, dtype=dtype, op=op):
                a = net.add_input("a", dt(trt, dtype), SHAPE)
                b = net.add_input("b", dt(trt, dtype), (1, 4, 1, 5))
                return [net.add_elementwise(a, b, enum(trt, "ElementWiseOperation", op)).get_output(0)]
            cases.append(single("elementwise", f"elementwise {op} a={SHAPE} b=(1, 4, 1, 5) {dtype} (dtype table)",
                                build))
        for ptype in ("MAX", "AVERAGE", "MAX_AVERAGE_BLEND"):
            add("pooling", ptype, dtype,
                lambda trt, net, x, p=ptype: net.add_pooling_nd(x, enum(trt, "PoolingType", p), (2, 2)))
        wtype = dtype
        kernel, bias = W(rng, 6 * 4 * 4, wtype), W(rng, 6, wtype)
        add("convolution", "2x2 maps=6", dtype,
            lambda trt, net, x, k=kernel, b=bias: net.add_convolution_nd(x, 6, (2, 2), k(trt), b(trt)))
        add("deconvolution", "2x2 maps=6", dtype,
            lambda trt, net, x, k=kernel, b=bias: net.add_deconvolution_nd(x, 6, (2, 2), k(trt), b(trt)))
        for mode, count in (("UNIFORM", 1), ("CHANNEL", 4), ("ELEMENTWISE", 60)):
            w = W(rng, count, wtype)
            add("scale", mode, dtype, lambda trt, net, x, m=mode, w=w: net.add_scale(
                x, enum(trt, "ScaleMode", m), w(trt), w(trt), None))
        add("lrn", "window=3", dtype, lambda trt, net, x: net.add_lrn(x, 3, 1e-4, 0.75, 2.0))
        add("softmax", "default axes", dtype, lambda trt, net, x: net.add_softmax(x))
        add("padding", "(1, 0)/(0, 2)", dtype, lambda trt, net, x: net.add_padding_nd(x, (1, 0), (0, 2)))
        add("shuffle", "reshape (0, -1)", dtype, lambda trt, net, x: _reshape(net.add_shuffle(x), (0, -1)))
        add("slice", "start (0,1,0,1) stride 1", dtype,
            lambda trt, net, x: net.add_slice(x, (0, 1, 0, 1), (2, 2, 3, 3), (1, 1, 1, 1)))
        add("concatenation", "x twice", dtype, lambda trt, net, x: net.add_concatenation([x, x]))
        add("matrix_multiply", "NONE, TRANSPOSE", dtype, lambda trt, net, x: net.add_matrix_multiply(
            x, enum(trt, "MatrixOperation", "NONE"), x, enum(trt, "MatrixOperation", "TRANSPOSE")))

        def norm(trt, net, dtype=dtype, v2=False):
            x = net.add_input("x", dt(trt, dtype), SHAPE)
            s = net.add_input("scale", dt(trt, dtype), (1, 4, 1, 1))
            b = net.add_input("bias", dt(trt, dtype), (1, 4, 1, 1))
            return [(net.add_normalization_v2 if v2 else net.add_normalization)(x, s, b, 0b1100).get_output(0)]
        cases.append(single("normalization", f"add_normalization x={SHAPE} {dtype} (dtype table)", norm))
        cases.append(single("normalization", f"add_normalization_v2 x={SHAPE} {dtype} (dtype table)",
                            lambda trt, net, dtype=dtype: norm(trt, net, dtype, True)))
        count = 2 * 4 * 3 * 5
        w = W(rng, count, dtype)

        def const(trt, net, w=w):
            return [net.add_constant(SHAPE, w(trt)).get_output(0)]
        cases.append(single("constant", f"constant {SHAPE} weights={w} (dtype table)", const))
    for dtype in CAST_TARGETS:  # network inputs of every type, through an identity
        add("identity", "", dtype, lambda trt, net, x: net.add_identity(x))
    return cases


def _reshape(layer, dims):
    layer.reshape_dims = dims
    return layer
