"""``interpolate``: ``torch.nn.functional.interpolate`` as one IResizeLayer.

PyTorch's modes map onto TensorRT's resize attributes:

- "nearest": NEAREST, ASYMMETRIC coordinates, FLOOR rounding (``src = floor(dst * in / out)``);
- "nearest-exact": NEAREST, HALF_PIXEL coordinates, HALF_UP rounding (``src = floor((dst + 0.5) * in / out)``);
- "linear", "bilinear", "trilinear": LINEAR; "bicubic": CUBIC with cubic_coeff -0.75 (PyTorch's A) and no
  exclude_outside. align_corners=True is ALIGN_CORNERS, False (the default) HALF_PIXEL with the FORMULA
  selector (a 1-pixel output samples the input's centre, as PyTorch does).

Output sizes: ``size``, or ``floor(in * scale_factor)``. TensorRT maps coordinates with the lengths' ratio
``in / out``; PyTorch with a scale_factor uses ``1 / scale_factor``. The two agree when ``in * scale_factor`` is
an integer (or align_corners=True); other scale factors are refused, naming the layer (pass ``size``).
Spatial dims must be known at build time, except with whole-number scale factors (any size scales exactly,
so a dynamic H, W profile works); N and C may be dynamic. The layer and its output are named ``name``.
"""

from __future__ import annotations

import math

from trtbuild.backend import trt_of

from .common import BuilderError, named

__all__ = ["interpolate"]

#: mode -> (spatial rank PyTorch requires, or None for nearest modes: 1 to 3)
_MODES = {"nearest": None, "nearest-exact": None, "linear": 1, "bilinear": 2, "bicubic": 2, "trilinear": 3}


def _per_dim(value, n: int, what: str, name: str) -> list:
    values = list(value) if isinstance(value, (list, tuple)) else [value] * n
    if len(values) != n:
        raise BuilderError(f"layer '{name}': {what} {value!r} has {len(values)} values for {n} spatial dims")
    return values


def interpolate(network, x, name: str, size=None, scale_factor=None, mode: str = "nearest",
                align_corners: bool | None = None):
    """Resize the spatial dims of ``x`` (N, C, *spatial) like ``F.interpolate``; returns the output tensor."""
    trt = trt_of(network)
    if mode not in _MODES:
        raise BuilderError(f"layer '{name}': mode {mode!r} is not one of {', '.join(map(repr, _MODES))}")
    shape = tuple(x.shape)
    spatial = len(shape) - 2
    want = _MODES[mode]
    if (want is None and not 1 <= spatial <= 3) or (want is not None and spatial != want):
        need = "3-D, 4-D or 5-D" if want is None else f"{want + 2}-D"
        raise BuilderError(f"layer '{name}': mode {mode!r} needs a {need} input (N, C, *spatial), got '{x.name}' "
                           f"{shape}")
    if (size is None) == (scale_factor is None):
        raise BuilderError(f"layer '{name}': give exactly one of size and scale_factor")
    if mode.startswith("nearest") and align_corners is not None:
        raise BuilderError(f"layer '{name}': align_corners applies to the linear and cubic modes only, not {mode!r}")
    align = bool(align_corners)
    scales = None if scale_factor is None else [float(s) for s in _per_dim(scale_factor, spatial, "scale_factor",
                                                                           name)]
    dynamic = any(d < 0 for d in shape[2:])
    if dynamic and (scales is None or not all(s.is_integer() and s >= 1 for s in scales)):
        raise BuilderError(f"layer '{name}': the spatial dims of '{x.name}' {shape} must be known at build time, "
                           "unless every scale_factor is a whole number >= 1 (then any size scales exactly)")
    if dynamic:  # in * s is a whole number for every in, so TensorRT's ratio in / out is 1 / s, as in PyTorch
        out = [math.floor(d * s) if d >= 0 else -1 for d, s in zip(shape[2:], scales)]
    elif size is not None:
        out = [int(s) for s in _per_dim(size, spatial, "size", name)]
    else:
        out = [math.floor(d * s) for d, s in zip(shape[2:], scales)]
        for d, s, o in zip(shape[2:], scales, out):
            if not align and d * s != o:
                raise BuilderError(f"layer '{name}': scale_factor {s} of a size-{d} dim gives {d * s}, not an "
                                   "integer; TensorRT maps coordinates by the sizes' ratio and PyTorch by "
                                   "1 / scale_factor, which then differ: pass size instead")
    if not dynamic and any(o <= 0 for o in out):
        raise BuilderError(f"layer '{name}': output size {tuple(out)} must be positive")
    layer = network.add_resize(x)
    if dynamic:
        layer.scales = [1.0, 1.0] + scales
    elif any(d < 0 for d in shape[:2]):
        layer.scales = [1.0, 1.0] + [o / d for o, d in zip(out, shape[2:])]
    else:
        layer.shape = trt.Dims(shape[:2] + tuple(out))
    if mode.startswith("nearest"):
        layer.resize_mode = trt.InterpolationMode.NEAREST
        exact = mode == "nearest-exact"
        layer.coordinate_transformation = (trt.ResizeCoordinateTransformation.HALF_PIXEL if exact
                                           else trt.ResizeCoordinateTransformation.ASYMMETRIC)
        layer.nearest_rounding = trt.ResizeRoundMode.HALF_UP if exact else trt.ResizeRoundMode.FLOOR
    else:
        layer.resize_mode = trt.InterpolationMode.CUBIC if mode == "bicubic" else trt.InterpolationMode.LINEAR
        layer.coordinate_transformation = (trt.ResizeCoordinateTransformation.ALIGN_CORNERS if align
                                           else trt.ResizeCoordinateTransformation.HALF_PIXEL)
        if mode == "bicubic":
            layer.cubic_coeff = -0.75
            layer.exclude_outside = False
    layer.selector_for_single_pixel = trt.ResizeSelector.FORMULA
    return named(layer, name).get_output(0)
