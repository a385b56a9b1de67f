"""Basic layer builders: convolution, activation, linear, reshape and add, and the readers of their weights.

Each builder is a plain function ``(network, tensor, params..., name) -> ITensor`` that names every
layer it adds (``name`` or ``name/part``) and that layer's output tensor, and runs unchanged on the
real ``tensorrt`` module and on ``trtbuild.reference``. Weights are numpy arrays in PyTorch layout
(any float dtype); they are converted to the input tensor's type, so fp16 networks work. The pooling
builders live in trtbuild.layers.pooling and are importable from here too.
"""

from __future__ import annotations

import numpy as np

from trtbuild.backend import trt_of
from trtbuild.reparam import fold_conv_bn

from .common import BuilderError, constant, out, trt_weights
from .pooling import adaptive_avg_pool, avg_pool, global_avg_pool, max_pool, pool_output_size
from .spatial import _ntuple, _shape, _unsqueezed
from .tensor import flatten

_flatten = flatten  # linear's `flatten` argument shadows the builder

__all__ = ["conv", "relu", "max_pool", "avg_pool", "adaptive_avg_pool", "global_avg_pool", "linear", "flatten",
           "add", "conv_bn", "conv_bn_relu", "read_conv_bn", "pool_output_size", "read_conv_weight",
           "read_linear", "linear_view"]


#: what to do with a weight stored flat (.wts files keep every tensor 1-D), said where a builder is given one
_FLAT_WEIGHT = "a weight stored flat (as .wts files store every tensor) needs its shape"


def check_conv_weight(weight, name: str) -> np.ndarray:
    """`weight` as an array ``[out, in/groups, *kernel]`` with 1 to 3 kernel dims; else a BuilderError
    naming the layer, before any layer is added (a flat .wts weight gets told how to shape it)."""
    w = np.asarray(weight)
    if w.ndim in (3, 4, 5):
        return w
    hint = ""
    if w.ndim == 1:
        hint = (f": {_FLAT_WEIGHT}, wm.get(key, (out, in/groups, kh, kw)), or read it with "
                "read_conv_weight(wm, key, out_channels, in_channels, kernel), which also infers the groups")
    raise BuilderError(f"layer '{name}': conv weight must be [out, in/groups, *kernel] with 1 to 3 kernel dims, "
                       f"got shape {w.shape}{hint}")


def check_linear_weight(weight, name: str) -> np.ndarray:
    """`weight` as an ``[out, in]`` array; else a BuilderError naming the layer (a flat .wts weight
    gets told how to shape it)."""
    w = np.asarray(weight)
    if w.ndim == 2:
        return w
    hint = f": {_FLAT_WEIGHT}, wm.get(key, (out, in)), or read it with read_linear(wm, prefix)" if w.ndim == 1 else ""
    raise BuilderError(f"layer '{name}': linear weight must be [out, in], got shape {w.shape}{hint}")


def conv(network, x, weight, bias, name: str, stride=1, padding=0, dilation=1, groups: int = 1, *,
         kernel_tensor=None):
    """Convolution with a PyTorch-layout weight ``[out, in/groups, *kernel]`` (1-D, 2-D or 3-D by its rank).

    ``bias`` is ``[out]`` or None. ``stride``, ``padding`` (symmetric) and ``dilation`` are ints or
    per-spatial-dim tuples, as in ``torch.nn.ConvNd``. Adds one layer named ``name``; a 1-D
    convolution is a 2-D one on ``(N, C, L, 1)`` between two shuffles (``name/2d``, ``name/conv2d``,
    ``name``). ``kernel_tensor``: a tensor of ``weight``'s shape and ``x``'s type (a dequantized
    weight, trtbuild.layers.quantize) fed as the layer's input 1 instead of weights (2-D and 3-D).
    """
    w = check_conv_weight(weight, name)
    nsp = w.ndim - 2
    if kernel_tensor is not None and (nsp == 1 or tuple(_shape(kernel_tensor)) != w.shape):
        raise BuilderError(f"layer '{name}': the kernel tensor '{kernel_tensor.name}' {_shape(kernel_tensor)} must "
                           f"have the weight's shape {w.shape}, of a 2-D or 3-D convolution")
    if nsp == 1 and len(_shape(x)) == 3:
        st, pd, dl = (_ntuple(v, 1, what, name) for v, what in ((stride, "stride"), (padding, "padding"),
                                                                  (dilation, "dilation")))
        return _unsqueezed(network, x, name, lambda n, x4: conv(
            n, x4, w[..., None], bias, f"{name}/conv2d", st + (1,), pd + (0,), dl + (1,), groups))
    shape = _shape(x)
    if len(shape) != nsp + 2:
        raise BuilderError(f"layer '{name}': a {nsp}-D conv needs a rank-{nsp + 2} input (N, C, ...), "
                           f"got '{x.name}' with shape {shape}")
    groups = int(groups)
    out_ch = w.shape[0]
    if groups < 1 or out_ch % groups:
        raise BuilderError(f"layer '{name}': groups={groups} must be >= 1 and divide the {out_ch} output channels")
    if shape[1] >= 0 and shape[1] != w.shape[1] * groups:
        raise BuilderError(f"layer '{name}': input '{x.name}' has {shape[1]} channels but the weight {w.shape} "
                           f"with groups={groups} expects {w.shape[1] * groups}")
    if bias is not None and np.asarray(bias).size != out_ch:
        raise BuilderError(f"layer '{name}': bias has {np.asarray(bias).size} values; expected {out_ch}")
    window = [_ntuple(v, nsp, what, name) for v, what in ((stride, "stride"), (padding, "padding"),
                                                          (dilation, "dilation"))]  # checked before any layer
    trt = trt_of(network)
    kernel = trt_weights(network, x, w) if kernel_tensor is None else trt.Weights()
    ks = trt.Dims(w.shape[2:])
    if bias is None:
        layer = network.add_convolution_nd(x, out_ch, ks, kernel)
    else:
        layer = network.add_convolution_nd(x, out_ch, ks, kernel, trt_weights(network, x, np.asarray(bias).reshape(-1)))
    if layer is None:
        return out(layer, name)
    if kernel_tensor is not None:
        layer.set_input(1, kernel_tensor)
    layer.stride_nd, layer.padding_nd, layer.dilation_nd = (trt.Dims(v) for v in window)
    layer.num_groups = groups
    return out(layer, name)


def relu(network, x, name: str):
    """ReLU activation (one layer named ``name``)."""
    trt = trt_of(network)
    return out(network.add_activation(x, trt.ActivationType.RELU), name)


def linear_view(x, weight, name: str, flatten: bool | None = None) -> tuple[np.ndarray, bool]:
    """``(weight as [out, in], whether linear flattens x first)``, checked before any layer is added.

    nn.Linear's rule: the last dim of ``x`` holds the ``in`` features and every leading dim is kept.
    An input of rank > 2 whose last dim is not ``in`` but whose dims after the first make ``in``
    features (a pooled ``(N, C, 1, 1)`` map) is flattened first, as ``nn.Linear(torch.flatten(x, 1))``;
    ``flatten=True`` always flattens, ``flatten=False`` never does."""
    w = check_linear_weight(weight, name)
    shape = _shape(x)
    k = w.shape[1]
    if not shape:
        raise BuilderError(f"layer '{name}': linear needs an input of rank >= 1, got '{x.name}' {shape}")
    if flatten is None:
        flatten = len(shape) > 2 and shape[-1] != k and all(d >= 0 for d in shape[1:]) \
            and int(np.prod(shape[1:])) == k
    if flatten and len(shape) < 2:
        raise BuilderError(f"layer '{name}': flatten=True needs an (N, ...) input, got '{x.name}' {shape}")
    features = (int(np.prod(shape[1:])) if all(d >= 0 for d in shape[1:]) else -1) if flatten else shape[-1]
    if features >= 0 and features != k:
        what = "dims after the first make" if flatten else "last dim has"
        raise BuilderError(f"layer '{name}': input '{x.name}' {shape}: its {what} {features} features but the "
                           f"weight {w.shape} expects {k}")
    return w, bool(flatten)


def linear(network, x, weight, bias, name: str, *, weight_tensor=None, flatten: bool | None = None):
    """``torch.nn.Linear``: ``y = x @ W^T + b`` with ``weight`` [out, in] and ``bias`` [out] or None.

    Like nn.Linear, ``x`` is ``(*, in)`` and keeps its leading dims: ``(N, L, in) -> (N, L, out)``.
    An input of rank > 2 whose last dim is not ``in`` but whose dims after the first make ``in``
    (a pooled ``(N, C, 1, 1)`` map) is flattened first (layer ``name/flatten``), as
    ``nn.Linear(torch.flatten(x, 1))``; ``flatten=True`` / ``False`` forces / forbids that. The
    weight is a constant (``name/weight``, with leading size-1 dims to the input's rank, as TensorRT's
    matrix multiply needs equal ranks) multiplied with op TRANSPOSE (``name/matmul``, or ``name``
    without bias); the bias a ``[1, ..., out]`` constant (``name/bias``) added elementwise
    (``name``). ``weight_tensor``: a tensor of ``weight``'s shape, or with those leading size-1 dims
    (a dequantized weight), used instead of the constant (``name/weight_view`` reshapes the former).
    """
    w, flat = linear_view(x, weight, name, flatten)
    if flat:
        x = _flatten(network, x, f"{name}/flatten")
    rank = len(_shape(x))
    lead = (1,) * (rank - 2)
    trt = trt_of(network)
    if weight_tensor is not None and _shape(weight_tensor) not in (w.shape, lead + w.shape):
        raise BuilderError(f"layer '{name}': the weight tensor '{weight_tensor.name}' {_shape(weight_tensor)} must "
                           f"have the weight's shape {w.shape}")
    b = None if bias is None else np.asarray(bias).reshape(-1)
    if b is not None and b.size != w.shape[0]:
        raise BuilderError(f"layer '{name}': bias has {b.size} values; expected {w.shape[0]}")
    if weight_tensor is None:
        wt = constant(network, w.reshape(lead + w.shape) if rank >= 2 else w, x, f"{name}/weight")
    elif rank > 2 and _shape(weight_tensor) != lead + w.shape:
        view = network.add_shuffle(weight_tensor)
        view.reshape_dims = trt.Dims(lead + w.shape)
        wt = out(view, f"{name}/weight_view")
    else:
        wt = weight_tensor
    op = trt.MatrixOperation.VECTOR if rank == 1 else trt.MatrixOperation.NONE
    mm = network.add_matrix_multiply(x, op, wt, trt.MatrixOperation.TRANSPOSE)
    if b is None:
        return out(mm, name)
    y = out(mm, f"{name}/matmul")
    bt = constant(network, b.reshape((1,) * max(rank - 1, 0) + (-1,)), x, f"{name}/bias")
    return out(network.add_elementwise(y, bt, trt.ElementWiseOperation.SUM), name)


def add(network, a, b, name: str):
    """Elementwise sum ``a + b`` (one layer)."""
    return out(network.add_elementwise(a, b, trt_of(network).ElementWiseOperation.SUM), name)


def read_conv_weight(wm, key: str, out_channels: int, in_channels: int, kernel) -> tuple[np.ndarray, int]:
    """Read conv weight ``key`` as ``[out, in/groups, *kernel]`` and infer ``groups`` from its size.

    Works with weights stored flat (tensorrtx .wts files keep every tensor 1-D): the element count
    ``out * (in/groups) * prod(kernel)`` gives ``in/groups``. ``kernel`` is a tuple (or an int for
    a square 2-D kernel). Returns ``(weight, groups)``; a size that fits no group count raises
    BuilderError naming the weight.
    """
    ks = (int(kernel),) * 2 if isinstance(kernel, (int, np.integer)) else tuple(int(k) for k in kernel)
    size = int(np.prod(wm.shape_of(key)))
    per_out = out_channels * int(np.prod(ks))
    per_group = size // per_out if per_out and size % per_out == 0 else 0
    if per_group < 1 or in_channels % per_group:
        raise BuilderError(f"weight '{key}' has {size} values (shape {wm.shape_of(key)}), which is not "
                           f"{out_channels} out x (in/groups) x kernel {ks} for {in_channels} input channels and any "
                           "group count")
    return wm.get(key, (out_channels, per_group) + ks), in_channels // per_group


def read_linear(wm, prefix: str) -> tuple[np.ndarray, np.ndarray]:
    """``(<prefix>.weight as [out, in], <prefix>.bias [out])``; works with flat (.wts) storage too."""
    b = wm.get(f"{prefix}.bias")
    b = b.reshape(-1)
    return wm.get(f"{prefix}.weight", (b.size, -1)), b


def read_conv_bn(wm, x, conv_prefix: str, bn_prefix: str, name: str, groups: int | None = None,
                 eps: float = 1e-5, kernel=None) -> tuple:
    """``(weight, bias, groups)`` of the conv ``conv_prefix`` with the BatchNorm ``bn_prefix`` folded in,
    for the input ``x`` (what :func:`conv_bn` builds; arguments as there)."""
    out_ch = int(np.prod(wm.shape_of(f"{bn_prefix}.weight")))
    in_ch = int(x.shape[1])
    key = f"{conv_prefix}.weight"
    if kernel is None:
        kernel = wm.shape_of(key)[2:]
        if not kernel:
            raise BuilderError(f"layer '{name}': {key} is stored flat {wm.shape_of(key)}; pass kernel= to conv_bn")
    w, inferred = read_conv_weight(wm, key, out_ch, in_ch, kernel)
    if groups is not None and groups != inferred:
        raise BuilderError(f"layer '{name}': groups={groups} but {key} {wm.shape_of(key)} with {in_ch} input "
                           f"channels implies groups={inferred}")
    b = wm.get(f"{conv_prefix}.bias", (out_ch,)) if wm.has(f"{conv_prefix}.bias") else None
    bn = [wm.get(f"{bn_prefix}.{k}", (out_ch,)) for k in ("weight", "bias", "running_mean", "running_var")]
    wf, bf = fold_conv_bn(w, b, *bn, eps, name=name)
    return wf, bf, inferred


def conv_bn(network, x, wm, conv_prefix: str, bn_prefix: str, name: str, stride=1, padding=0, dilation=1,
            groups: int | None = None, eps: float = 1e-5, kernel=None):
    """Conv followed by eval-mode BatchNorm, folded into ONE conv layer named ``name``.

    Reads ``<conv_prefix>.weight`` (and ``.bias`` if present) and ``<bn_prefix>.{weight,bias,
    running_mean,running_var}`` from the WeightMap ``wm``; folds with trtbuild.reparam.fold_conv_bn
    (float64 arithmetic). ``eps`` is the BatchNorm's eps (not stored in state dicts). With
    ``kernel`` given, the conv weight may be stored flat (see :func:`read_conv_weight`); otherwise
    its stored shape is used. ``groups=None`` infers the group count from the weight size.
    """
    from .weight_names import conv_bn_sources, name_new_weights

    wf, bf, groups = read_conv_bn(wm, x, conv_prefix, bn_prefix, name, groups, eps, kernel)
    first = network.num_layers
    y = conv(network, x, wf, bf, name, stride=stride, padding=padding, dilation=dilation, groups=groups)
    name_new_weights(network, first, "CONVOLUTION", conv_bn_sources(wm, conv_prefix, bn_prefix, eps, wf.shape))
    return y


def conv_bn_relu(network, x, wm, conv_prefix: str, bn_prefix: str, name: str, relu_name: str | None = None,
                 **conv_args):
    """:func:`conv_bn` then ReLU (layer ``relu_name``, default ``name + "/relu"``)."""
    y = conv_bn(network, x, wm, conv_prefix, bn_prefix, name, **conv_args)
    return relu(network, y, relu_name or f"{name}/relu")

