"""Layerwise parity: intermediate engine tensors (marked as extra outputs) vs PyTorch module
outputs captured with forward hooks, one row per layer in network order, plus the first layer
where the error jumps.
"""

from __future__ import annotations

import difflib
import math
from typing import Mapping, Sequence

import torch

from trtbuild.forward_hooks import CaptureOptions, capture_forward

from .compare import TensorStats, compare_tensor, not_compared

#: the note of a layer row whose tensor the engine never reported (debug tensors fused or optimised away)
FUSED_AWAY = "fused away (not compared)"


def capture_module_outputs(module: torch.nn.Module, module_names: Sequence[str], *inputs):
    """Run `module(*inputs)` with forward hooks on the named submodules.

    Returns (forward result, {module name: output}, {module name: number of calls}). Outputs are
    cloned when captured, so later in-place ops (ReLU(inplace=True)) do not alter them; a module
    called several times keeps its first output.
    """
    modules = dict(module.named_modules())
    unknown = [n for n in module_names if n not in modules]
    if unknown:
        hints = {n: difflib.get_close_matches(n, list(modules), n=3) for n in unknown}
        raise ValueError("layer_map names torch modules that do not exist: "
                         + "; ".join(f"'{n}' (closest: {hints[n] or 'none'})" for n in unknown))
    options = CaptureOptions(names=list(module_names), keep="first", first_of_tuple=True, copy=True)
    result, capture = capture_forward(module, *inputs, options=options)
    return result, capture.first, capture.counts


def find_jump(rows: Sequence[TensorStats], factor: float = 10.0, floor: float = 1e-6) -> str | None:
    """Name of the first row whose relative L2 error exceeds `factor` x the previous row's
    (errors below `floor` count as `floor`, so noise at machine precision is not a jump)."""
    prev = floor
    for row in rows:
        if row.note == FUSED_AWAY:
            continue
        err = row.rel_l2
        if math.isnan(err) or err > factor * max(prev, floor):
            return row.name
        prev = err
    return None


def layerwise_rows(engine_outputs: Mapping[str, torch.Tensor], captured: Mapping[str, torch.Tensor],
                   layer_map: Mapping[str, str], order: Sequence[str], output_of: Mapping[str, str],
                   atol: float, rtol: float, calls: Mapping[str, int] | None = None,
                   atol_relative: bool = False, allow_nonfinite: bool = False,
                   fused_away_ok: bool = False) -> list[TensorStats]:
    """One TensorStats per network tensor in `order` (network order).

    layer_map: network tensor name -> torch module name. output_of: network tensor name ->
    engine output name (they differ when a final output was renamed or cast). A layer tensor with
    NaN/Inf fails unless allow_nonfinite. fused_away_ok (debug tensors): a tensor absent from
    `engine_outputs` gets a row noted FUSED_AWAY (not compared) instead of a ValueError.
    """
    rows = []
    for tensor_name in order:
        mod = layer_map[tensor_name]
        out_name = output_of.get(tensor_name, tensor_name)
        if out_name not in engine_outputs and fused_away_ok:
            row = TensorStats(tensor_name, [], 0, atol, rtol, True, max_abs=math.nan, rel_l2=math.nan,
                              cosine=math.nan, note=FUSED_AWAY)
            row.module = mod
            rows.append(row)
            continue
        if out_name not in engine_outputs:
            raise ValueError(f"layer '{tensor_name}' is not an output of the engine (marked outputs: "
                             f"{list(engine_outputs)}); build it with extra_outputs including it")
        if mod not in captured:
            row = not_compared(tensor_name, [], 0, atol, rtol,
                               note=f"torch module '{mod}' was never called in forward()")
        else:
            row = compare_tensor(tensor_name, engine_outputs[out_name], captured[mod], atol, rtol, atol_relative,
                                 allow_nonfinite)
            if calls and calls.get(mod, 0) > 1:
                row.note = (row.note + "; " if row.note else "") + \
                    f"torch module '{mod}' ran {calls[mod]} times; compared with its first call"
        row.module = mod
        rows.append(row)
    return rows
