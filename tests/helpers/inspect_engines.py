"""Engines the inspect tests read: resnet18 --small built by `trtbuild build` on the reference (fp32 with a dynamic
batch 1,2,4; fp16 static) and on TensorRT-RTX for `rtx_targets` (built without a GPU, so never loaded here); and the
two-layer reference plan (conv "stem", relu "act") the inspector tests read field by field."""

from __future__ import annotations

from pathlib import Path

import numpy as np

import trtbuild.reference as trt

from helpers.cli_run import main_in


def build_inspect_engines(root: Path, rtx_targets: str) -> Path:
    """fp32.engine, fp16.engine and rtx.engine (with their sidecars) in `root`, which is returned."""
    common = ["build", "resnet18", "--small", "--no-progress"]
    main_in(root, [*common, "--backend", "reference", "--batch", "1,2,4", "-o", "fp32.engine"],
            [*common, "--backend", "reference", "--precision", "fp16", "-o", "fp16.engine"],
            [*common, "--backend", "tensorrt-rtx", "--target", rtx_targets, "-o", "rtx.engine"])
    return root


def conv_relu_plan(logger, verbosity, *, flags=(), stride=None, name_bias=False, dynamic=False):
    """The plan of a two-layer reference network built with `logger`, `verbosity` and builder `flags`: input "x"
    (2, 3, 5, 5), or (-1, 3, 5, 5) with the profile (1|2|4, 3, 5, 5) if `dynamic`; conv "stem" (8 filters 3x3 of
    ones, zero bias, kernel named "stem.weight", the bias "stem.bias" if `name_bias`, stride `stride` if given);
    relu "act" whose output "y" is the network's."""
    builder = trt.Builder(logger)
    network = builder.create_network(1 << int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED))
    x = network.add_input("x", trt.float32, (-1 if dynamic else 2, 3, 5, 5))
    kernel = trt.Weights(np.ones((8, 3, 3, 3), np.float32))
    bias = trt.Weights(np.zeros(8, np.float32))
    conv = network.add_convolution_nd(x, 8, (3, 3), kernel, bias)
    conv.name = "stem"
    if stride is not None:
        conv.stride_nd = stride
    assert network.set_weights_name(kernel, "stem.weight")
    if name_bias:
        assert network.set_weights_name(bias, "stem.bias")
    relu = network.add_activation(conv.get_output(0), trt.ActivationType.RELU)
    relu.name = "act"
    relu.get_output(0).name = "y"
    network.mark_output(relu.get_output(0))
    config = builder.create_builder_config()
    config.profiling_verbosity = verbosity
    for flag in flags:
        config.set_flag(flag)
    if dynamic:
        profile = builder.create_optimization_profile()
        profile.set_shape("x", (1, 3, 5, 5), (2, 3, 5, 5), (4, 3, 5, 5))
        config.add_optimization_profile(profile)
    return builder.build_serialized_network(network, config)
