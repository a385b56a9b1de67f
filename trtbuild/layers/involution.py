"""Involution builders: the "Involution" IPluginV3 plugin layer, the same op composed of native
layers, and the full RedNet block.

On the real ``tensorrt`` module the plugin is the C++ library built from ``plugins/involution``
(``libtrtbuild_involution_plugin.so``), loaded once with :func:`load_plugin_library`. On
``trtbuild.reference`` it is the reference plugin of :mod:`trtbuild.ops.involution_reference_plugin`,
registered automatically. Both take the same fields and give the same results.

:func:`involution_composed` builds the op from padding, strided slices, concatenations, one
elementwise product and one reduction (or, for a dynamic batch, two one-hot grouped convolutions
in place of the slices), so it runs wherever TensorRT's native layers do: TensorRT-RTX, which has
no plugins at all, and TensorRT 10/11 without the plugin library. :func:`involution` chooses
(``impl="auto" | "plugin" | "composed"``). TensorRT-RTX's plugin registry is never touched.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import numpy as np

from trtbuild.backend import capabilities, is_reference, product_name, trt_of

from trtbuild.ops.involution import involution_output_size

from .basic import avg_pool, conv, conv_bn_relu
from .common import BuilderError, named, out

__all__ = ["PLUGIN_NAME", "PLUGIN_VERSION", "PLUGIN_NAMESPACE", "PLUGIN_LIBRARY", "IMPLS", "UNFOLDS",
           "default_plugin_library_path", "load_plugin_library", "plugin_available", "resolve_impl",
           "involution", "involution_plugin", "involution_composed", "involution_block"]

log = logging.getLogger("trtbuild.layers")

PLUGIN_NAME = "Involution"
PLUGIN_VERSION = "1"
PLUGIN_NAMESPACE = "trtbuild"
#: The dynamic plugin library (getCreators entry point) that IPluginRegistry.load_library loads.
PLUGIN_LIBRARY = "libtrtbuild_involution_plugin.so"
#: Environment variable naming the library's path, read by default_plugin_library_path().
PLUGIN_LIBRARY_ENV = "TRTBUILD_INVOLUTION_PLUGIN"

#: involution(impl=...): "auto" (the plugin where its creator is available, else composed), "plugin", "composed".
IMPLS = ("auto", "plugin", "composed")
#: involution_composed(unfold=...): how the K*K shifted windows are gathered.
UNFOLDS = ("auto", "slice", "conv")

_loaded_handles: dict[str, object] = {}


def default_plugin_library_path() -> Path:
    """$TRTBUILD_INVOLUTION_PLUGIN, else plugins/build/libtrtbuild_involution_plugin.so in the source tree."""
    env = os.environ.get(PLUGIN_LIBRARY_ENV)
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[2] / "plugins" / "build" / PLUGIN_LIBRARY


def _no_plugins(trt, what: str) -> BuilderError:
    """The one-sentence refusal for TensorRT-RTX, which has no plugins (and must not be asked for one)."""
    return BuilderError(f"{what}: {product_name(trt)} supports no plugins, so the {PLUGIN_NAMESPACE}::{PLUGIN_NAME} "
                        "plugin cannot be used; build involutions with impl='composed' (or 'auto')")


def _find_creator(trt):
    """The registered Involution creator of ``trt`` or None. Never called for TensorRT-RTX. On real
    TensorRT the registry's creator list is scanned first, so an absent plugin is not reported as an
    error in TensorRT's log (get_creator logs one)."""
    if not capabilities(trt).has_plugins:
        raise _no_plugins(trt, "plugin lookup")
    registry = trt.get_plugin_registry()
    if not is_reference(trt):
        creators = getattr(registry, "all_creators", None)
        if creators is not None and not any(
                (getattr(c, "name", None), str(getattr(c, "plugin_version", "")), getattr(c, "plugin_namespace", None))
                == (PLUGIN_NAME, PLUGIN_VERSION, PLUGIN_NAMESPACE) for c in creators):
            return None
    return registry.get_creator(PLUGIN_NAME, PLUGIN_VERSION, PLUGIN_NAMESPACE)


def load_plugin_library(trt, path: str | os.PathLike | None = None):
    """Make the Involution plugin creator available in ``trt``'s plugin registry.

    Real TensorRT: loads ``path`` (default :func:`default_plugin_library_path`) with
    ``trt.get_plugin_registry().load_library`` unless the creator is already registered, and
    returns the library handle (None when nothing had to be loaded). Reference backend: registers
    the reference plugin and returns None. Raises FileNotFoundError / RuntimeError saying what to do,
    and BuilderError on TensorRT-RTX (no plugins; its registry is not touched).
    """
    if not capabilities(trt).has_plugins:
        raise _no_plugins(trt, "load_plugin_library")
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


def plugin_available(trt, load: bool = False) -> bool:
    """Whether the Involution plugin can be used with ``trt``: always on the reference (its PyTorch
    twin), never on TensorRT-RTX (no plugins; nothing is looked up), on real TensorRT when the
    creator is registered. ``load=True`` first tries to load the default library
    (:func:`default_plugin_library_path`) if that file exists; a library that fails to load is
    logged as a warning and counts as unavailable."""
    if not capabilities(trt).has_plugins:
        return False
    if is_reference(trt):
        return True
    if _find_creator(trt) is not None:
        return True
    if load and default_plugin_library_path().is_file():
        try:
            load_plugin_library(trt)
        except (OSError, RuntimeError) as e:
            log.warning("Involution plugin library not usable (%s); involutions are composed of native layers", e)
            return False
        return _find_creator(trt) is not None
    return False


def resolve_impl(trt, impl: str, name: str, load: bool = False) -> str:
    """``impl`` ("auto" | "plugin" | "composed") -> "plugin" or "composed" for backend ``trt``.

    "auto" is the plugin where :func:`plugin_available` (``load`` as there), else composed: always
    composed on TensorRT-RTX. "plugin" on TensorRT-RTX raises BuilderError (one sentence naming
    ``name``) before anything is added or looked up."""
    if impl not in IMPLS:
        raise BuilderError(f"layer '{name}': impl={impl!r} is not one of {', '.join(map(repr, IMPLS))}")
    if impl == "plugin" and not capabilities(trt).has_plugins:
        raise _no_plugins(trt, f"layer '{name}'")
    if impl != "auto":
        return impl
    return "plugin" if plugin_available(trt, load=load) else "composed"


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
        raise BuilderError(f"layer '{name}': kernels '{w.name}' must be (N, {g}, {kk}, Ho, Wo) or (N, "
                           f"{g * kk}, Ho, Wo), got {ws}")
    if xs[1] >= 0 and xs[1] % g:
        raise BuilderError(f"layer '{name}': channels of '{x.name}' ({xs[1]}) must be divisible by groups ({g})")
    head, want = (ws[1:3], (g, kk)) if len(ws) == 5 else (ws[1:2], (g * kk,))
    if any(have >= 0 and have != need for have, need in zip(head, want)):
        raise BuilderError(f"layer '{name}': kernels '{w.name}' {ws} must be (N, {g}, {kk}, Ho, Wo) or "
                           f"(N, {g * kk}, Ho, Wo) for kernel_size={k}, groups={g}")
    for extent, w_extent, axis in zip(xs[2:], ws[-2:], "HW"):
        if extent < 0:
            continue
        o = involution_output_size(extent, k, s, p, d)
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
    On real TensorRT call :func:`load_plugin_library` first. TensorRT-RTX has no plugins: BuilderError.
    """
    trt = trt_of(network)
    if not capabilities(trt).has_plugins:
        raise _no_plugins(trt, f"layer '{name}'")
    k = _check_int(kernel_size, 1, "kernel_size", name)
    s = _check_int(stride, 1, "stride", name)
    p = _check_int(padding, 0, "padding", name)
    d = _check_int(dilation, 1, "dilation", name)
    g = _check_int(groups, 1, "groups", name)
    _check_shapes(x, w, k, s, p, d, g, name)
    if x.dtype != w.dtype or x.dtype not in (trt.DataType.FLOAT, trt.DataType.HALF):
        raise BuilderError(f"layer '{name}': '{x.name}' ({getattr(x.dtype, 'name', x.dtype)}) and '{w.name}' "
                           f"({getattr(w.dtype, 'name', w.dtype)}) must have one type "
                           "(FLOAT or HALF) for the plugin; impl='composed' also takes BF16")
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


def _reshape(network, t, dims, name: str):
    """Shuffle ``t`` to ``dims`` (0 copies the input's dimension, so a dynamic batch passes through)."""
    trt = trt_of(network)
    layer = named(network.add_shuffle(t), name)
    layer.reshape_dims = trt.Dims(tuple(int(v) for v in dims))
    return layer.get_output(0)


def _slice(network, t, start, shape, stride, name: str):
    trt = trt_of(network)
    return out(network.add_slice(t, trt.Dims(tuple(start)), trt.Dims(tuple(shape)), trt.Dims(tuple(stride))), name)


def _concat(network, tensors, axis: int, name: str):
    if len(tensors) == 1:
        return tensors[0]
    layer = named(network.add_concatenation(list(tensors)), name)
    layer.axis = axis
    return layer.get_output(0)


def _one_hot_taps(channels: int, k: int, along_h: bool) -> np.ndarray:
    """Weights [channels*k, 1, k, 1] (or [..., 1, k]) of a grouped conv (groups=channels) whose output
    channel c*k + t copies tap t of input channel c: one unfold step, exact (products with 1 and 0)."""
    taps = np.zeros((channels * k, 1, k, 1) if along_h else (channels * k, 1, 1, k), dtype=np.float32)
    idx = np.arange(channels * k)
    if along_h:
        taps[idx, 0, idx % k, 0] = 1.0
    else:
        taps[idx, 0, 0, idx % k] = 1.0
    return taps


def involution_composed(network, x, w, kernel_size: int, stride: int, padding: int, dilation: int, groups: int,
                        name: str, unfold: str = "auto"):
    """The involution op of native layers only (no plugin): runs on every backend, TensorRT-RTX included.

    Same inputs, checks and result as :func:`involution_plugin` (``x`` (N, C, H, W), ``w`` (N, G, K*K,
    Ho, Wo) or (N, G*K*K, Ho, Wo), one type), plus BF16. C, H and W must be known at build time.
    The K*K shifted windows are gathered as F.unfold does, then multiplied by the kernels (broadcast
    over the C/G channels of each group) and summed over the K*K taps:

    - ``unfold="slice"`` (needs a static batch): ``name/pad`` (if padding) -> ``name/groups`` (reshape
      to (N, G, 1, C/G, Hp, Wp)) -> K strided column slices ``name/cols{kw}`` concatenated on axis 2
      (``name/cols``) -> K strided row slices ``name/rows{kh}`` concatenated on axis 2 (``name/patches``,
      (N, G, K*K, C/G, Ho, Wo), tap kh*K + kw) -> ``name/kernels`` (w reshaped to (N, G, K*K, 1, Ho, Wo))
      -> ``name/products`` -> ``name/sum`` (reduce SUM over the taps) -> ``name`` (reshape to (N, C, Ho, Wo)).
      2K + 8 layers, no weights, only data movement besides the product and the sum.
    - ``unfold="conv"`` (any batch, dynamic included): two grouped convolutions with one-hot weights
      ``name/unfold_rows`` ((K, 1) taps, stride/padding/dilation along H) and ``name/unfold``
      ((1, K) taps along W) give F.unfold's (N, C*K*K, Ho, Wo) exactly (each output is 1 * x plus
      zeros) -> ``name/patches`` (N, G, C/G, K*K, Ho, Wo) -> ``name/kernels`` (N, G, 1, K*K, Ho, Wo) ->
      ``name/products`` -> ``name/sum`` -> ``name``. C*K*K*(K+1) weight values.
    - ``unfold="auto"``: slice for a static batch, conv for a dynamic one.

    Every layer computes in x's type (products rounded to it, then summed), so fp16/bf16 results
    differ from the plugin's (fp32 accumulation of unrounded products) by a few units of the last place.
    """
    k = _check_int(kernel_size, 1, "kernel_size", name)
    s = _check_int(stride, 1, "stride", name)
    p = _check_int(padding, 0, "padding", name)
    d = _check_int(dilation, 1, "dilation", name)
    g = _check_int(groups, 1, "groups", name)
    if unfold not in UNFOLDS:
        raise BuilderError(f"layer '{name}': unfold={unfold!r} is not one of {', '.join(map(repr, UNFOLDS))}")
    _check_shapes(x, w, k, s, p, d, g, name)
    trt = trt_of(network)
    floats = (trt.DataType.FLOAT, trt.DataType.HALF, trt.DataType.BF16)
    if x.dtype not in floats or w.dtype != x.dtype:
        raise BuilderError(f"layer '{name}': '{x.name}' ({getattr(x.dtype, 'name', x.dtype)}) and '{w.name}' "
                           f"({getattr(w.dtype, 'name', w.dtype)}) must have one type "
                           "(FLOAT, HALF or BF16)")
    n, c, h, wd = (int(v) for v in x.shape)
    if min(c, h, wd) < 0:
        raise BuilderError(f"layer '{name}': the composed involution needs C, H and W of '{x.name}' known at build "
                           f"time, got {tuple(int(v) for v in x.shape)} (only the batch may be dynamic)")
    wn = int(w.shape[0])
    if n >= 0 and wn >= 0 and wn != n:
        raise BuilderError(f"layer '{name}': batch of kernels '{w.name}' ({wn}) differs from batch of '{x.name}' ({n})")
    if unfold == "auto":
        unfold = "slice" if n >= 0 else "conv"
    if unfold == "slice" and n < 0:
        raise BuilderError(f"layer '{name}': unfold='slice' needs a static batch (slices have static sizes), "
                           f"'{x.name}' is {tuple(int(v) for v in x.shape)}; use unfold='conv' or 'auto'")
    cg, kk = c // g, k * k
    ho, wo = (involution_output_size(v, k, s, p, d) for v in (h, wd))
    if unfold == "slice":
        src = x
        if p:
            src = out(network.add_padding_nd(x, trt.Dims((p, p)), trt.Dims((p, p))), f"{name}/pad")
        hp, wp = h + 2 * p, wd + 2 * p
        grouped = _reshape(network, src, (0, g, 1, cg, hp, wp), f"{name}/groups")
        cols = _concat(network, [_slice(network, grouped, (0, 0, 0, 0, 0, kw * d), (n, g, 1, cg, hp, wo),
                                        (1, 1, 1, 1, 1, s), f"{name}/cols{kw}") for kw in range(k)], 2, f"{name}/cols")
        patches = _concat(network, [_slice(network, cols, (0, 0, 0, 0, kh * d, 0), (n, g, k, cg, ho, wo),
                                           (1, 1, 1, 1, s, 1), f"{name}/rows{kh}") for kh in range(k)],
                          2, f"{name}/patches")
        kernels = _reshape(network, w, (0, g, kk, 1, ho, wo), f"{name}/kernels")
        tap_axis = 2
    else:
        rows = conv(network, x, _one_hot_taps(c, k, along_h=True), None, f"{name}/unfold_rows", stride=(s, 1),
                    padding=(p, 0), dilation=(d, 1), groups=c)
        cols = conv(network, rows, _one_hot_taps(c * k, k, along_h=False), None, f"{name}/unfold", stride=(1, s),
                    padding=(0, p), dilation=(1, d), groups=c * k)
        patches = _reshape(network, cols, (0, g, cg, kk, ho, wo), f"{name}/patches")
        kernels = _reshape(network, w, (0, g, 1, kk, ho, wo), f"{name}/kernels")
        tap_axis = 3
    products = out(network.add_elementwise(patches, kernels, trt.ElementWiseOperation.PROD), f"{name}/products")
    summed = out(network.add_reduce(products, trt.ReduceOperation.SUM, 1 << tap_axis, False), f"{name}/sum")
    return _reshape(network, summed, (0, c, ho, wo), name)


def involution(network, x, w, kernel_size: int, stride: int, padding: int, dilation: int, groups: int, name: str,
               impl: str = "auto"):
    """The involution op: :func:`involution_plugin` or :func:`involution_composed` (output tensor ``name``).

    impl: "plugin", "composed", or "auto" (the plugin where its creator is available: the reference
    backend, real TensorRT with the library loaded; composed otherwise, always on TensorRT-RTX).
    impl="plugin" on TensorRT-RTX raises BuilderError (it has no plugins).
    """
    which = resolve_impl(trt_of(network), impl, name)
    build = involution_plugin if which == "plugin" else involution_composed
    return build(network, x, w, kernel_size, stride, padding, dilation, groups, name)


def involution_block(network, x, wm, prefix: str, name: str, kernel_size: int = 7, stride: int = 1,
                     dilation: int = 1, bn_eps: float = 1e-5, group_channels: int | None = None,
                     impl: str = "auto"):
    """The RedNet involution module (:class:`trtbuild.ops.involution.Involution`) from its weights.

    Reads ``<prefix>.conv1.conv.weight``, ``<prefix>.conv1.bn.*`` and ``<prefix>.conv2.conv.{weight,bias}``
    from ``wm`` (``prefix`` "" for unprefixed names); weights may be stored flat, as in .wts files.
    Layers, named like the torch submodules under ``name``: ``name.avgpool`` (stride > 1),
    ``name.conv1.conv`` (reduce 1x1 conv, BN folded), ``name.conv1`` (ReLU), ``name.conv2`` (span 1x1
    conv giving (N, G*K*K, Ho, Wo), fed to the plugin without a reshape) and the op ``name``: the plugin
    layer, or the composed layers ``name/...`` ending in ``name`` (``impl`` as in :func:`involution`;
    impl="plugin" on TensorRT-RTX is refused before any layer is added).
    The group count G comes from the span conv (K*K*G outputs); ``group_channels``, if given, must agree.
    """
    k = _check_int(kernel_size, 1, "kernel_size", name)
    s = _check_int(stride, 1, "stride", name)
    impl = resolve_impl(trt_of(network), impl, name)

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
    return involution(network, x, span, k, s, dilation * (k - 1) // 2, dilation, groups, name, impl=impl)
