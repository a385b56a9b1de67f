"""Involution (Li et al., "Involution: Inverting the Inherence of Convolution for Visual
Recognition", CVPR 2021) for PyTorch.

The op (matches the official mmcv / d-li14 CUDA op)::

    x   : (N, C, H, W)
    w   : (N, G, K*K, Ho, Wo)   per-pixel kernels, made from x by a separate branch
    out : (N, C, Ho, Wo)
    out[n, c, ho, wo] = sum_{kh, kw} w[n, c // (C // G), kh*K + kw, ho, wo]
                                     * x[n, c, ho*stride - pad + kh*dil, wo*stride - pad + kw*dil]
    (taps outside x contribute zero), Ho = (H + 2*pad - dil*(K-1) - 1) // stride + 1.

Entry points:

- :func:`involution_reference`: pure PyTorch (unfold), CPU or CUDA, differentiable by autograd.
- :class:`InvolutionFunction`: autograd Function over the CUDA kernels in ``plugins/involution``
  (the same kernels the TensorRT plugin runs), built lazily as a torch extension.
- :func:`involution`: the CUDA kernels for CUDA tensors when the extension builds, else the
  reference.
- :class:`Involution`: the full RedNet involution module (kernel-generation branch + op).
"""

from __future__ import annotations

import warnings

import torch
import torch.nn.functional as F
from torch import nn
from torch.autograd.function import once_differentiable

from trtbuild.ops import _involution_ext

__all__ = [
    "involution_output_size",
    "involution_reference",
    "InvolutionFunction",
    "involution",
    "Involution",
]

#: dtypes the CUDA kernels implement (fp16 accumulates in fp32).
CUDA_KERNEL_DTYPES = (torch.float32, torch.float16, torch.float64)

_warned_fallback = False


def involution_output_size(size: int, kernel_size: int, stride: int = 1, padding: int = 0, dilation: int = 1) -> int:
    """Output extent (Ho or Wo) for an input extent: (size + 2p - d(K-1) - 1) // s + 1."""
    return (size + 2 * padding - dilation * (kernel_size - 1) - 1) // stride + 1


def _check_args(x: torch.Tensor, w: torch.Tensor, kernel_size: int, stride: int, padding: int, dilation: int,
                groups: int) -> tuple[torch.Tensor, int, int]:
    """Validate the op's arguments; returns w as 5-D (N, G, K*K, Ho, Wo) and (Ho, Wo)."""
    for name, value, low in (("kernel_size", kernel_size, 1), ("stride", stride, 1), ("padding", padding, 0),
                             ("dilation", dilation, 1), ("groups", groups, 1)):
        if not isinstance(value, int) or isinstance(value, bool) or value < low:
            raise ValueError(f"involution: {name} must be an int >= {low}, got {value!r}")
    if not isinstance(x, torch.Tensor) or x.dim() != 4:
        raise ValueError(f"involution: x must be a 4-D tensor (N, C, H, W), got "
                         f"{tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__}")
    n, c, h, wd = x.shape
    if c % groups != 0:
        raise ValueError(f"involution: channels of x ({c}) must be divisible by groups ({groups})")
    ho = involution_output_size(h, kernel_size, stride, padding, dilation)
    wo = involution_output_size(wd, kernel_size, stride, padding, dilation)
    if ho < 1 or wo < 1:
        raise ValueError(f"involution: x {tuple(x.shape)} is too small for kernel_size={kernel_size}, "
                         f"dilation={dilation}, padding={padding} (output would be {ho}x{wo})")
    if not isinstance(w, torch.Tensor):
        raise ValueError(f"involution: w must be a tensor, got {type(w).__name__}")
    kk = kernel_size * kernel_size
    # Same memory, other views: the official (N, G, K, K, Ho, Wo) and the generator's (N, G*K*K, Ho, Wo).
    if w.dim() == 6 and tuple(w.shape[2:4]) == (kernel_size, kernel_size):
        w = w.reshape(w.shape[0], w.shape[1], kk, w.shape[4], w.shape[5])
    elif w.dim() == 4 and w.shape[1] == groups * kk:
        w = w.reshape(w.shape[0], groups, kk, w.shape[2], w.shape[3])
    expected = (n, groups, kk, ho, wo)
    if tuple(w.shape) != expected:
        raise ValueError(f"involution: w must have shape (N, G, K*K, Ho, Wo) = {expected} (or (N, G*K*K, Ho, Wo)) "
                         f"for x {tuple(x.shape)}, kernel_size={kernel_size}, stride={stride}, padding={padding}, "
                         f"dilation={dilation}, groups={groups}; got {tuple(w.shape)}")
    if not x.is_floating_point() or w.dtype != x.dtype:
        raise ValueError(f"involution: x and w must share one floating dtype, got {x.dtype} and {w.dtype}")
    if w.device != x.device:
        raise ValueError(f"involution: x is on {x.device} but w is on {w.device}")
    return w, ho, wo


def involution_reference(x: torch.Tensor, w: torch.Tensor, kernel_size: int, stride: int = 1, padding: int = 0,
                         dilation: int = 1, groups: int = 1) -> torch.Tensor:
    """Involution in pure PyTorch via ``F.unfold``; works on any device and under autograd.

    Args:
        x: (N, C, H, W) input.
        w: (N, G, K*K, Ho, Wo) per-pixel kernels; the same memory viewed as (N, G*K*K, Ho, Wo) or as
            the official (N, G, K, K, Ho, Wo) is accepted too.
        kernel_size, stride, padding, dilation: K and the usual sliding-window parameters.
        groups: G; channel c uses kernel group c // (C // G).

    Returns:
        (N, C, Ho, Wo) tensor of x's dtype. Half/bfloat16 inputs are computed in float32.
    """
    w, ho, wo = _check_args(x, w, kernel_size, stride, padding, dilation, groups)
    n, c = x.shape[:2]
    kk = kernel_size * kernel_size
    compute_dtype = torch.float32 if x.dtype in (torch.float16, torch.bfloat16) else x.dtype
    cols = F.unfold(x.to(compute_dtype), kernel_size, dilation=dilation, padding=padding, stride=stride)
    cols = cols.view(n, groups, c // groups, kk, ho, wo)  # unfold rows are ordered (c, kh, kw)
    out = (cols * w.to(compute_dtype).unsqueeze(2)).sum(dim=3)
    return out.reshape(n, c, ho, wo).to(x.dtype)


class InvolutionFunction(torch.autograd.Function):
    """Involution on the CUDA kernels of ``plugins/involution`` (forward, grad-input, grad-weight).

    ``InvolutionFunction.apply(x, w, kernel_size, stride, padding, dilation, groups)`` with CUDA
    tensors of dtype float32, float16 or float64. Not twice differentiable.
    """

    @staticmethod
    def forward(ctx, x: torch.Tensor, w: torch.Tensor, kernel_size: int, stride: int, padding: int, dilation: int,
                groups: int) -> torch.Tensor:
        w_shape = w.shape  # gradients must come back in the caller's view of w
        w, _, _ = _check_args(x, w, kernel_size, stride, padding, dilation, groups)
        if not x.is_cuda:
            raise ValueError(f"InvolutionFunction: needs CUDA tensors, got x on {x.device}")
        if x.dtype not in CUDA_KERNEL_DTYPES:
            raise ValueError(f"InvolutionFunction: CUDA kernels support {CUDA_KERNEL_DTYPES}, got {x.dtype}")
        ext = _involution_ext.load_extension()
        x = x.contiguous()
        w = w.contiguous()
        ctx.params = (kernel_size, stride, padding, dilation, groups)
        ctx.x_sizes = list(x.shape)
        ctx.w_shape = w_shape
        ctx.save_for_backward(x, w)
        return ext.forward(x, w, kernel_size, stride, padding, dilation, groups)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_out: torch.Tensor):
        x, w = ctx.saved_tensors
        ext = _involution_ext.load_extension()
        grad_out = grad_out.contiguous()
        grad_x = grad_w = None
        if ctx.needs_input_grad[0]:
            grad_x = ext.backward_input(grad_out, w, ctx.x_sizes, *ctx.params)
        if ctx.needs_input_grad[1]:
            grad_w = ext.backward_weight(grad_out, x, *ctx.params).reshape(ctx.w_shape)
        return grad_x, grad_w, None, None, None, None, None


def involution(x: torch.Tensor, w: torch.Tensor, kernel_size: int, stride: int = 1, padding: int = 0,
               dilation: int = 1, groups: int = 1) -> torch.Tensor:
    """Involution, dispatched: CUDA kernels (:class:`InvolutionFunction`) for CUDA tensors of a
    supported dtype when the extension is available, else :func:`involution_reference`.

    Same arguments and result as :func:`involution_reference`.
    """
    global _warned_fallback
    w, _, _ = _check_args(x, w, kernel_size, stride, padding, dilation, groups)
    if x.is_cuda and x.dtype in CUDA_KERNEL_DTYPES:
        if _involution_ext.extension_available():
            return InvolutionFunction.apply(x, w, kernel_size, stride, padding, dilation, groups)
        if not _warned_fallback:
            _warned_fallback = True
            warnings.warn(f"involution: CUDA extension unavailable ({_involution_ext.unavailable_reason()}); "
                          "using the unfold reference", RuntimeWarning, stacklevel=2)
    return involution_reference(x, w, kernel_size, stride, padding, dilation, groups)


class _ConvModule(nn.Module):
    """1x1 conv (+ BN + ReLU), with mmcv ConvModule's submodule names (conv, bn, activate) so the
    official RedNet checkpoints load unchanged."""

    def __init__(self, in_channels: int, out_channels: int, norm_act: bool):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size=1, bias=not norm_act)
        self.bn = nn.BatchNorm2d(out_channels) if norm_act else None
        self.activate = nn.ReLU(inplace=True) if norm_act else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv(x)
        if self.bn is not None:
            x = self.activate(self.bn(x))
        return x


class Involution(nn.Module):
    """RedNet involution module (official d-li14/involution design).

    Kernel generation: [AvgPool2d(stride) if stride > 1] -> conv1 (1x1, C -> C/r, no bias) + BN +
    ReLU -> conv2 (1x1, C/r -> K*K*G, bias), reshaped to (N, G, K*K, Ho, Wo); then the involution
    op with padding dilation*(K-1)//2. G = channels // group_channels.

    State-dict keys match the official code: conv1.conv.weight, conv1.bn.*, conv2.conv.weight,
    conv2.conv.bias. With stride > 1, H and W must be divisible by the stride (as in the official
    code: the pooled kernel map must match the op's output size).
    """

    def __init__(self, channels: int, kernel_size: int = 7, stride: int = 1, group_channels: int = 16,
                 reduction_ratio: int = 4, dilation: int = 1):
        super().__init__()
        if channels % group_channels != 0:
            raise ValueError(f"Involution: channels ({channels}) must be divisible by group_channels "
                             f"({group_channels})")
        if channels // reduction_ratio < 1:
            raise ValueError(f"Involution: channels ({channels}) // reduction_ratio ({reduction_ratio}) must be >= 1")
        self.channels = channels
        self.kernel_size = kernel_size
        self.stride = stride
        self.dilation = dilation
        self.padding = dilation * (kernel_size - 1) // 2
        self.group_channels = group_channels
        self.groups = channels // group_channels
        self.reduction_ratio = reduction_ratio
        self.conv1 = _ConvModule(channels, channels // reduction_ratio, norm_act=True)
        self.conv2 = _ConvModule(channels // reduction_ratio, kernel_size * kernel_size * self.groups, norm_act=False)
        self.avgpool = nn.AvgPool2d(stride, stride) if stride > 1 else nn.Identity()

    def kernel_generator(self, x: torch.Tensor) -> torch.Tensor:
        """The per-pixel kernels w (N, G, K*K, Ho, Wo) generated from x."""
        weight = self.conv2(self.conv1(self.avgpool(x)))
        n, _, h, wd = weight.shape
        return weight.view(n, self.groups, self.kernel_size * self.kernel_size, h, wd)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() != 4 or x.shape[1] != self.channels:
            raise ValueError(f"Involution: expected input (N, {self.channels}, H, W), got {tuple(x.shape)}")
        return involution(x, self.kernel_generator(x), self.kernel_size, self.stride, self.padding, self.dilation,
                          self.groups)

    def extra_repr(self) -> str:
        return (f"channels={self.channels}, kernel_size={self.kernel_size}, stride={self.stride}, "
                f"groups={self.groups}, dilation={self.dilation}")
