"""Involution builders: the "Involution" IPluginV3 plugin layer and the full RedNet block.

On the real ``tensorrt`` module the plugin is the C++ library built from ``plugins/involution``
(``libtrtbuild_involution_plugin.so``), loaded once with :func:`load_plugin_library`. On
``trtbuild.reference`` it is the reference plugin of :mod:`trtbuild.ops.involution_reference_plugin`,
registered automatically. Both take the same fields and give the same results.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from trtbuild.backend import is_reference, trt_of

from .basic import avg_pool, conv, conv_bn_relu
from .common import BuilderError, out

__all__ = ["PLUGIN_NAME", "PLUGIN_VERSION", "PLUGIN_NAMESPACE", "PLUGIN_LIBRARY", "default_plugin_library_path",
           "load_plugin_library", "involution_plugin", "involution_block"]

PLUGIN_NAME = "Involution"
PLUGIN_VERSION = "1"
PLUGIN_NAMESPACE = "trtbuild"
#: The dynamic plugin library (getCreators entry point) that IPluginRegistry.load_library loads.
PLUGIN_LIBRARY = "libtrtbuild_involution_plugin.so"
#: Environment variable naming the library's path, read by default_plugin_library_path().
PLUGIN_LIBRARY_ENV = "TRTBUILD_INVOLUTION_PLUGIN"

_loaded_handles: dict[str, object] = {}


def default_plugin_library_path() -> Path:
    """$TRTBUILD_INVOLUTION_PLUGIN, else plugins/build/libtrtbuild_involution_plugin.so in the source tree."""
    env = os.environ.get(PLUGIN_LIBRARY_ENV)
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[2] / "plugins" / "build" / PLUGIN_LIBRARY


def _find_creator(trt):
    return trt.get_plugin_registry().get_creator(PLUGIN_NAME, PLUGIN_VERSION, PLUGIN_NAMESPACE)


def load_plugin_library(trt, path: str | os.PathLike | None = None):
    """Make the Involution plugin creator available in ``trt``'s plugin registry.

    Real TensorRT: loads ``path`` (default :func:`default_plugin_library_path`) with
    ``trt.get_plugin_registry().load_library`` unless the creator is already registered, and
    returns the library handle (None when nothing had to be loaded). Reference backend: registers
    the reference plugin and returns None. Raises FileNotFoundError / RuntimeError saying what to do.
    """
    if is_reference(trt):
        from trtbuild.ops.involution_reference_plugin import register_reference_involution

        register_reference_involution(trt)
        return None
    if _find_creator(trt) is not None:
        return None
    lib = Path(path) if path is not None else default_plugin_library_path()
    if not lib.is_file():
        raise FileNotFoundError(
            f"Involution plugin library not found at '{lib}': build it with `scripts/build_plugins.sh --plugin` "
            f"(or CMake, see plugins/involution/README.md) and pass its path or set ${PLUGIN_LIBRARY_ENV}")
    handle = trt.get_plugin_registry().load_library(str(lib))
    if _find_creator(trt) is None:
        raise RuntimeError(
            f"loading '{lib}' did not register {PLUGIN_NAMESPACE}::{PLUGIN_NAME} v{PLUGIN_VERSION} (see the TensorRT "
            f"log); load_library needs the dynamic library {PLUGIN_LIBRARY} (TensorRT >= 10.0), not the "
            "_static variant")
    _loaded_handles[str(lib)] = handle
    return handle


def _check_int(value, low: int, what: str, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or int(value) < low:
        raise BuilderError(f"layer '{name}': {what} must be an int >= {low}, got {value!r}")
    return int(value)


def _check_shapes(x, w, k: int, s: int, p: int, d: int, g: int, name: str) -> None:
    """Fail early (with the layer name) on shapes the plugin would reject; -1 dims are skipped."""
    xs = tuple(int(v) for v in x.shape)
    ws = tuple(int(v) for v in w.shape)
    kk = k * k
    if len(xs) != 4:
        raise BuilderError(f"layer '{name}': involution input '{x.name}' must be 4-D (N, C, H, W), got {xs}")
    if len(ws) not in (4, 5):
        raise BuilderError(f"layer '{name}': kernels '{w.name}' must be (N, {g}, {kk}, Ho, Wo) or (N, {g * kk}, Ho, Wo), "
                           f"got {ws}")
    if xs[1] >= 0 and xs[1] % g:
        raise BuilderError(f"layer '{name}': channels of '{x.name}' ({xs[1]}) must be divisible by groups ({g})")
    head, want = (ws[1:3], (g, kk)) if len(ws) == 5 else (ws[1:2], (g * kk,))
    if any(have >= 0 and have != need for have, need in zip(head, want)):
        raise BuilderError(f"layer '{name}': kernels '{w.name}' {ws} must be (N, {g}, {kk}, Ho, Wo) or "
                           f"(N, {g * kk}, Ho, Wo) for kernel_size={k}, groups={g}")
    for extent, w_extent, axis in zip(xs[2:], ws[-2:], "HW"):
        if extent < 0:
            continue
        o = (extent + 2 * p - d * (k - 1) - 1) // s + 1
        if o < 1:
            raise BuilderError(f"layer '{name}': input '{x.name}' {xs} is too small for kernel_size={k}, "
                               f"dilation={d}, padding={p}")
        if w_extent >= 0 and w_extent != o:
            raise BuilderError(f"layer '{name}': kernels '{w.name}' {ws} must have {axis}o={o} for input {xs} "
                               f"(stride={s}, padding={p}, dilation={d})")


def involution_plugin(network, x, w, kernel_size: int, stride: int, padding: int, dilation: int, groups: int,
                      name: str):
    """Add the Involution plugin layer (named ``name``, output tensor ``name``).

    ``x`` is (N, C, H, W); ``w`` the per-pixel kernels (N, G, K*K, Ho, Wo) or, same memory,
    (N, G*K*K, Ho, Wo); both FLOAT or both HALF. Returns the (N, C, Ho, Wo) output tensor.
    On real TensorRT call :func:`load_plugin_library` first.
    """
    k = _check_int(kernel_size, 1, "kernel_size", name)
    s = _check_int(stride, 1, "stride", name)
    p = _check_int(padding, 0, "padding", name)
    d = _check_int(dilation, 1, "dilation", name)
    g = _check_int(groups, 1, "groups", name)
    _check_shapes(x, w, k, s, p, d, g, name)
    if x.dtype != w.dtype:
        raise BuilderError(f"layer '{name}': '{x.name}' ({x.dtype}) and '{w.name}' ({w.dtype}) must have one type "
                           "(FLOAT or HALF)")
    trt = trt_of(network)
    if is_reference(trt):
        load_plugin_library(trt)
    creator = _find_creator(trt)
    if creator is None:
        raise BuilderError(
            f"layer '{name}': TensorRT plugin {PLUGIN_NAMESPACE}::{PLUGIN_NAME} v{PLUGIN_VERSION} is not registered; "
            f"load {PLUGIN_LIBRARY} first with trtbuild.layers.involution.load_plugin_library(trt, path)")
    fields = trt.PluginFieldCollection([
        trt.PluginField(field, np.array([value], dtype=np.int32), trt.PluginFieldType.INT32)
        for field, value in (("kernel_size", k), ("stride", s), ("padding", p), ("dilation", d), ("groups", g))
    ])
    plugin = creator.create_plugin(name, fields, trt.TensorRTPhase.BUILD)
    if plugin is None:
        raise BuilderError(f"layer '{name}': the Involution creator rejected its fields (see the TensorRT log)")
    return out(network.add_plugin_v3([x, w], [], plugin), name)


def involution_block(network, x, wm, prefix: str, name: str, kernel_size: int = 7, stride: int = 1,
                     dilation: int = 1, bn_eps: float = 1e-5, group_channels: int | None = None):
    """The RedNet involution module (:class:`trtbuild.ops.involution.Involution`) from its weights.

    Reads ``<prefix>.conv1.conv.weight``, ``<prefix>.conv1.bn.*`` and ``<prefix>.conv2.conv.{weight,bias}``
    from ``wm`` (``prefix`` "" for unprefixed names); weights may be stored flat, as in .wts files.
    Layers, named like the torch submodules under ``name``: ``name.avgpool`` (stride > 1),
    ``name.conv1.conv`` (reduce 1x1 conv, BN folded), ``name.conv1`` (ReLU), ``name.conv2`` (span 1x1
    conv giving (N, G*K*K, Ho, Wo), fed to the plugin without a reshape) and the plugin ``name``.
    The group count G comes from the span conv (K*K*G outputs); ``group_channels``, if given, must agree.
    """
    k = _check_int(kernel_size, 1, "kernel_size", name)
    s = _check_int(stride, 1, "stride", name)

    def key(rest: str) -> str:
        return f"{prefix}.{rest}" if prefix else rest

    channels = int(x.shape[1])
    src = avg_pool(network, x, s, s, 0, f"{name}.avgpool") if s > 1 else x
    reduced = conv_bn_relu(network, src, wm, key("conv1.conv"), key("conv1.bn"), f"{name}.conv1.conv",
                           relu_name=f"{name}.conv1", kernel=1, eps=bn_eps)
    reduced_ch = int(reduced.shape[1])
    span_key = key("conv2.conv.weight")
    size = int(np.prod(wm.shape_of(span_key)))
    span_ch = size // reduced_ch if size % reduced_ch == 0 else 0
    if span_ch == 0 or span_ch % (k * k) or channels < 0 or channels % (span_ch // (k * k)):
        raise BuilderError(f"layer '{name}': weight '{span_key}' has {size} values (shape {wm.shape_of(span_key)}); "
                           f"expected K*K*G x {reduced_ch} with K={k} and G dividing the {channels} input channels")
    groups = span_ch // (k * k)
    if group_channels is not None and channels != groups * group_channels:
        raise BuilderError(f"layer '{name}': {span_key} gives {groups} groups, which with group_channels="
                           f"{group_channels} does not cover the {channels} input channels")
    span = conv(network, reduced, wm.get(span_key, (span_ch, reduced_ch, 1, 1)),
                wm.get(key("conv2.conv.bias"), (span_ch,)), f"{name}.conv2")
    return involution_plugin(network, x, span, k, s, dilation * (k - 1) // 2, dilation, groups, name)
