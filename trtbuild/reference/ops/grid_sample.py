"""IGridSampleLayer: samples a rank-4 (N, C, H, W) or rank-5 (N, C, D, H, W) input at the normalized positions of a
grid (N, *out, r), r the number of spatial dims, into an (N, C, *out) output: NVIDIA's GridSample operator, which
is ONNX GridSample and torch.nn.functional.grid_sample.

- grid[..., 0] is the position along the last (width) dim, grid[..., r - 1] along the first spatial dim; -1 and 1
  are the centres of the corner pixels with align_corners, their outer edges without;
- interpolation_mode NEAREST (round half to even), LINEAR (bi/trilinear) or CUBIC (bi/tricubic, Keys' kernel with
  a = -0.75); each spatial dim is interpolated on its own, so a rank-5 CUBIC is tricubic;
- sample_mode FILL (zeros outside), CLAMP (the border value) or REFLECT (positions mirrored at the borders,
  about the pixel centres with align_corners and the pixel edges without); TensorRT's setter refuses the other
  SampleMode values ("The only supported SampleModes are CLAMP, FILL, and REFLECT").

NEAREST and LINEAR move an outside position inside first and then interpolate; CUBIC takes its four taps around
the unmoved position and moves each tap inside (which is what PyTorch and ONNX Runtime do, and differs near the
borders). Input and grid have one type, FLOAT, HALF or BF16 (TensorRT-RTX refuses the others); the input's
and the grid's first dims must be equal.
"""

from __future__ import annotations

import itertools

import torch
import torch.nn.functional as F

from ..core import ITensor
from ..enums import InterpolationMode, LayerType, SampleMode
from .base import ILayer, param
from .common import f32, fail, need_float
from .registry import register

#: the sample modes TensorRT's IGridSampleLayer takes
SAMPLE_MODES = (SampleMode.CLAMP, SampleMode.FILL, SampleMode.REFLECT)
#: Keys' cubic convolution coefficient that TensorRT, PyTorch and ONNX Runtime use for grid sampling
CUBIC_A = -0.75


def _legal_sample_mode(mode):
    if mode not in SAMPLE_MODES:
        return "a grid sample takes SampleMode CLAMP, FILL or REFLECT"
    return None


class IGridSampleLayer(ILayer):
    _TYPE = LayerType.GRID_SAMPLE
    _MAX_INPUTS = 2
    interpolation_mode = param("interpolation_mode", InterpolationMode)
    align_corners = param("align_corners", "bool")
    sample_mode = param("sample_mode", SampleMode, check=_legal_sample_mode)

    @classmethod
    def _type_label(cls) -> str:
        return "GridSample"


def infer(p, w, shapes, dtypes, name, plugin):
    x, g = tuple(shapes[0]), tuple(shapes[1])
    need_float(name, dtypes[0])
    if dtypes[1] != dtypes[0]:
        fail(name, f"the grid has type {dtypes[1].name} but the input has {dtypes[0].name}; a grid sample needs one "
                   "type for both")
    if len(x) not in (4, 5):
        fail(name, f"the input has rank {len(x)}; a grid sample takes rank 4 (N, C, H, W) or 5 (N, C, D, H, W)")
    if len(g) != len(x):
        fail(name, f"the grid has rank {len(g)} but the input has rank {len(x)}; they must be equal")
    spatial = len(x) - 2
    if g[-1] != spatial:
        fail(name, f"the grid's last dimension is {g[-1]} but a rank-{len(x)} input needs {spatial} (one normalized "
                   "coordinate per spatial dimension)")
    if -1 not in (x[0], g[0]) and x[0] != g[0]:
        fail(name, f"the input's first dimension is {x[0]} but the grid's is {g[0]}; they must be equal")
    return [(x[0], x[1], *g[1:-1])], [dtypes[0]]  # the input's batch, dynamic or not (as TensorRT-RTX infers)


def _unnormalize(coord: torch.Tensor, size: int, align: bool) -> torch.Tensor:
    """A normalized coordinate in [-1, 1] as a pixel coordinate."""
    return (coord + 1) / 2 * (size - 1) if align else ((coord + 1) * size - 1) / 2


def _reflect(coord: torch.Tensor, twice_low: int, twice_high: int) -> torch.Tensor:
    """Mirror `coord` into [twice_low / 2, twice_high / 2] as often as needed."""
    if twice_low == twice_high:
        return torch.zeros_like(coord)
    low, span = twice_low / 2, (twice_high - twice_low) / 2
    coord = (coord - low).abs()
    extra, flips = torch.fmod(coord, span), torch.floor(coord / span)
    return torch.where(flips % 2 == 0, extra + low, span - extra + low)


def _inside(coord: torch.Tensor, size: int, mode: SampleMode, align: bool) -> torch.Tensor:
    """`coord` moved inside [0, size - 1] as CLAMP or REFLECT do; FILL leaves it where it is."""
    if mode == SampleMode.REFLECT:
        coord = _reflect(coord, 0, 2 * (size - 1)) if align else _reflect(coord, -1, 2 * size - 1)
    elif mode != SampleMode.CLAMP:
        return coord
    return coord.clamp(0, size - 1)


def _cubic_weights(t: torch.Tensor) -> list[torch.Tensor]:
    a = CUBIC_A

    def near(d):  # |d| <= 1
        return ((a + 2) * d - (a + 3)) * d * d + 1

    def far(d):  # 1 < |d| < 2
        return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a

    return [far(t + 1), near(t), near(1 - t), far(2 - t)]


def _taps(coord, size, interp, mode, align):
    """[(index, weight)] along one dim: the input pixels one output position reads and how much of each."""
    if interp == InterpolationMode.CUBIC:
        pix = _unnormalize(coord, size, align)
        base = torch.floor(pix)
        weights = _cubic_weights(pix - base)
        return [(_inside(base + k - 1, size, mode, align), wk) for k, wk in enumerate(weights)]
    pix = _inside(_unnormalize(coord, size, align), size, mode, align)
    if interp == InterpolationMode.NEAREST:
        return [(torch.round(pix), torch.ones_like(pix))]
    base = torch.floor(pix)
    t = pix - base
    return [(base, 1 - t), (base + 1, t)]


#: F.grid_sample's names of the modes it shares with the layer (bicubic on rank 4 only)
_TORCH_MODE = {InterpolationMode.NEAREST: "nearest", InterpolationMode.LINEAR: "bilinear",
               InterpolationMode.CUBIC: "bicubic"}
_TORCH_PADDING = {SampleMode.FILL: "zeros", SampleMode.CLAMP: "border", SampleMode.REFLECT: "reflection"}


def run(p, w, inputs, plugin):
    """F.grid_sample where PyTorch has the mode (it computes the same formulas in float32: tests bound the
    difference from run_by_taps, which also serves rank-5 CUBIC)."""
    interp, mode = InterpolationMode(p["interpolation_mode"]), SampleMode(p["sample_mode"])
    x, grid = f32(inputs[0]), f32(inputs[1])
    if x.dim() == 4 or interp != InterpolationMode.CUBIC:
        return [F.grid_sample(x, grid.to(x.dtype), mode=_TORCH_MODE[interp], padding_mode=_TORCH_PADDING[mode],
                              align_corners=bool(p["align_corners"]))]
    return run_by_taps(p, w, inputs, plugin)


def run_by_taps(p, w, inputs, plugin):
    """The documented formulas: each output is the weighted sum of its taps (positions and weights per dim)."""
    x, grid = f32(inputs[0]), f32(inputs[1])
    interp, mode, align = InterpolationMode(p["interpolation_mode"]), SampleMode(p["sample_mode"]), p["align_corners"]
    n, c, sizes = x.shape[0], x.shape[1], list(x.shape[2:])
    out_shape = grid.shape[1:-1]
    grid = grid.reshape(n, -1, len(sizes))
    # spatial dim d (outermost first) takes grid coordinate r - 1 - d (the grid lists x, y[, z])
    per_dim = [_taps(grid[..., len(sizes) - 1 - d], size, interp, mode, align) for d, size in enumerate(sizes)]
    flat = x.reshape(n, c, -1)
    y = torch.zeros(n, c, grid.shape[1], dtype=x.dtype, device=x.device)
    for combo in itertools.product(*per_dim):
        index = torch.zeros_like(grid[..., 0], dtype=torch.long)
        weight = torch.ones_like(grid[..., 0])
        for (pos, wk), size in zip(combo, sizes):
            valid = (pos >= 0) & (pos <= size - 1)  # FILL: a tap outside reads zero
            weight = weight * torch.where(valid, wk, torch.zeros_like(wk))
            index = index * size + pos.clamp(0, size - 1).long()
        y += weight.unsqueeze(1) * torch.gather(flat, 2, index.unsqueeze(1).expand(n, c, -1))
    return [y.reshape(n, c, *out_shape)]


def add_grid_sample(self, input: ITensor, grid: ITensor) -> IGridSampleLayer:
    return self._add(IGridSampleLayer, [input, grid], {
        "interpolation_mode": int(InterpolationMode.LINEAR), "align_corners": False,
        "sample_mode": int(SampleMode.FILL)})


register(IGridSampleLayer, infer, run, adds=(add_grid_sample,))
