"""Calibrate a PyTorch model: run it on calibration batches and compute the amax of every tensor
a quantized network quantizes (trtbuild.quant.record), plus the per-output-channel amax of every
Conv/Linear weight.

    calib = calibrate(model, data.batches(), method="percentile", percentile=99.99, model_name="resnet18")
    calib.activations   # {"conv1.input": 2.7, "layer1.0.output": 3.1, ...}
    calib.weights       # {"conv1.weight": [0.41, 0.38, ...]}

Weights: max |w| over every axis but 0 (the output channels of Conv and Linear; the input channels of
a ConvTranspose, whose [in, out, *kernel] weight trtbuild.layers.planned.planned_deconv quantizes per
output channel, axis 1, from the weights themselves), straight from the state dict, whatever the method.
A builder that folds a BatchNorm into the conv scales output channel c by s_c = gamma_c / sqrt(var_c + eps),
so the folded weight's amax is |s_c| times this one.
A tensor that was zero everywhere gets amax 1.0 (a zero tensor quantizes to zero at any scale; NVIDIA's
quantizers do the same) and is listed in ``all_zero``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

import torch
from torch import nn

from .histogram import DEFAULT_BINS, METHODS, AbsHistogram, compute_amax
from .record import TensorRecorder, quantized_modules

__all__ = ["ZERO_AMAX", "Calibration", "calibrate", "calibrate_data", "network_tensors", "weight_amax",
           "weights_sha256"]

ZERO_AMAX = 1.0


@dataclass
class Calibration:
    """What a calibration file holds (see trtbuild.quant.calibfile for the JSON format)."""

    model: str
    method: dict
    activations: dict[str, float]
    weights: dict[str, list[float]]
    shapes: dict[str, dict[str, list[int]]]
    adds: dict[str, list[str]]
    modules: list[str]
    data: dict = field(default_factory=dict)
    small: bool | None = None
    precision: str | None = None
    weights_source: str | None = None
    all_zero: list[str] = field(default_factory=list)
    weights_sha256: str | None = None  # weights_sha256() of the model calibrated (None in files made before it)
    #: per add, the Conv/Linear whose output each input is (trtbuild.quant.record); {} in files made before it
    add_sources: dict[str, list[str | None]] = field(default_factory=dict)


def weights_sha256(model: nn.Module, weights=None) -> str | None:
    """sha256 of a model's weights: over its floating-point state-dict tensors in state-dict order,
    each as its name, a NUL and its values as contiguous little-endian float32. A calibration file
    records it, so that it is not applied to other weights (buffers such as BatchNorm's running
    statistics count; integer ones such as num_batches_tracked do not). `weights`: a WeightMap to
    take the values from instead of the model's own (as if loaded into it; flat .wts rows are fine);
    None if it lacks one of the tensors or holds another number of values (the build will say so)."""
    import hashlib

    import numpy as np

    stored = weights.stored_arrays() if weights is not None else None  # not a read of the weights
    digest = hashlib.sha256()
    for name, tensor in model.state_dict().items():
        if not tensor.is_floating_point():
            continue
        if stored is None:
            values = tensor.detach().to("cpu", torch.float32).contiguous().numpy()
        else:
            values = stored.get(name)
            if values is None or values.size != tensor.numel() or values.dtype.kind != "f":
                return None
        digest.update(name.encode() + b"\0")
        digest.update(np.ascontiguousarray(values, dtype="<f4").tobytes())
    return digest.hexdigest()


def weight_amax(weight: torch.Tensor) -> list[float]:
    """max |w| per output channel (axis 0)."""
    w = weight.detach().abs().float()
    return [float(v) for v in w.reshape(w.shape[0], -1).amax(dim=1)] if w.dim() > 1 else [float(v) for v in w]


def _weights(model: nn.Module) -> tuple[dict[str, list[float]], dict[str, list[int]]]:
    amax, shapes = {}, {}
    for name, module in quantized_modules(model):
        key = f"{name}.weight"
        amax[key] = weight_amax(module.weight)
        shapes[key] = list(module.weight.shape)
    return amax, shapes


def _module_names(model: nn.Module) -> list[str]:
    return [name for name, _ in model.named_modules() if name]


def network_tensors(model: nn.Module, sample_shape) -> dict[str, dict[str, list[int]]]:
    """{"activations": {key: per-sample shape}, "weights": {name: shape}}: the tensors calibration
    records for `model`, found by one forward on zeros of `sample_shape` (no data needed)."""
    with torch.no_grad(), TensorRecorder(model, lambda key, x: None) as rec:
        rec.start_batch()
        model(torch.zeros((1, *sample_shape)))
    return {"activations": rec.shapes, "weights": _weights(model)[1]}


def calibrate(model: nn.Module, batches: Iterable[torch.Tensor], method: str = "max", *, percentile: float = 99.99,
              num_bins: int = DEFAULT_BINS, model_name: str = "model", progress=None) -> Calibration:
    """Run `model` (eval mode, no grad) on `batches` and compute the amax of each recorded tensor by
    `method` (max, percentile, mse, entropy). `progress(batch)` is called after each batch."""
    if method not in METHODS:
        raise ValueError(f"calibration method {method!r} is not one of {', '.join(METHODS)}")
    if method == "percentile" and not (0 < percentile <= 100 and math.isfinite(percentile)):
        raise ValueError(f"--percentile {percentile} must be in (0, 100]")
    hists: dict[str, AbsHistogram] = {}

    def observe(key: str, x: torch.Tensor) -> None:
        hist = hists.get(key)
        if hist is None:
            hist = hists[key] = AbsHistogram(num_bins, histogram=method != "max")
        try:
            hist.collect(x)
        except ValueError as e:
            raise ValueError(f"calibration: tensor {key} of model '{model_name}': {e} (check the data and "
                             "the weights)") from None

    model.eval()
    seen = 0
    with torch.no_grad(), TensorRecorder(model, observe) as rec:
        for batch in batches:
            rec.start_batch()
            model(batch)
            seen += 1
            if progress is not None:
                progress(batch)
    if not seen:
        raise ValueError("calibration: the data gave no batch")
    activations, all_zero = {}, []
    for key in rec.shapes:
        amax = compute_amax(hists[key], method, percentile)
        if amax == 0.0:
            all_zero.append(key)
            amax = ZERO_AMAX
        activations[key] = amax
    weights, weight_shapes = _weights(model)
    for key, values in weights.items():
        if any(v == 0.0 for v in values):
            all_zero.append(key)
            weights[key] = [v if v > 0 else ZERO_AMAX for v in values]
    params = {"name": method}
    if method == "percentile":
        params["percentile"] = percentile
    if method != "max":
        params["num_bins"] = num_bins
    return Calibration(model=model_name, method=params, activations=activations, weights=weights,
                       shapes={"activations": rec.shapes, "weights": weight_shapes}, adds=rec.adds,
                       modules=_module_names(model), all_zero=all_zero, weights_sha256=weights_sha256(model),
                       add_sources=rec.add_sources)


def calibrate_data(model: nn.Module, source, method: str = "max", *, percentile: float = 99.99,
                   batch_size: int | None = None, limit: int | None = None, model_name: str = "model",
                   small: bool | None = None, precision: str | None = None, progress=None) -> Calibration:
    """calibrate() on a trtbuild.quant.data source (`batch_size`, `limit`: as CalibrationData.batches),
    recording the data's kind, description, sha256, batch and sample counts and sample shape."""
    from .data import DataHash

    digest = DataHash(source.sample_shape)

    def batches():
        for batch in source.batches(batch_size, limit):
            digest.update(batch)
            yield batch

    calib = calibrate(model, batches(), method, percentile=percentile, model_name=model_name, progress=progress)
    data = {"kind": source.kind, "description": source.description, "sha256": digest.hexdigest(),
            "batches": digest.batches, "samples": digest.samples, "sample_shape": list(source.sample_shape)}
    return replace(calib, small=small, precision=precision, data=data)
