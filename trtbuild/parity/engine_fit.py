"""Does an engine fit the parity check asked of it: its recorded precision, weights, model, size variant and input
shape against what was requested, and the input shapes to feed it. Each misfit is a ValueError in one sentence naming
both sides, raised before anything runs."""

from __future__ import annotations

import os

import torch

from trtbuild.engine.records import BuildInfo, build_info_of
from trtbuild.engine.sidecar import Sidecar


def engine_precision(engine, requested: str | None = None) -> str:
    """The precision to judge `engine` by: `requested`, else the one its sidecar / plan info records,
    else fp32. ValueError if `requested` contradicts the recorded one."""
    built = (build_info_of(getattr(engine, "sidecar", None)) or BuildInfo()).precision
    if requested is not None and built is not None and requested != built:
        raise ValueError(f"precision {requested} was requested but engine {getattr(engine, 'name', 'engine')} "
                         f"computes in {built} (its sidecar says so); omit the precision or pass {built}")
    return requested or built or "fp32"


def check_engine_weights(sidecar, source: str, weights) -> None:
    """ValueError if `weights` (a path) is not the file whose sha256 the engine's sidecar records."""
    built = (Sidecar.of(sidecar).weights or {}).get("sha256")
    if not built or not isinstance(weights, (str, os.PathLike)) or not os.path.isfile(weights):
        return  # nothing recorded, a WeightMap, or a missing file (reported when it is loaded)
    from trtbuild.engine.serialize import sha256_file

    have = sha256_file(weights)
    if have != built:
        raise ValueError(f"engine {source} was built from other weights (sha256 {built[:12]}… in its sidecar, "
                         f"{have[:12]}… for {weights}); pass the weights it was built from or rebuild it")


def recorded_weights(sidecar) -> str | None:
    """The weight file an engine's sidecar records, if it exists and still has the recorded sha256."""
    record = Sidecar.of(sidecar).weights or {}
    path, sha = record.get("path"), record.get("sha256")
    if not path or not sha or not os.path.isfile(path):
        return None
    from trtbuild.engine.serialize import sha256_file

    return path if sha256_file(path) == sha else None


def check_engine_input_fits(engine, spec, small: bool, source: str) -> None:
    """ValueError naming the input, the engine's shape and the model's if `engine`'s input does not
    have the shape (batch aside) that `spec` (its small variant if `small`) takes. A dynamic dimension
    (-1, an engine built with --profile, e.g. unet's H and W) takes the model's size."""
    want = tuple(int(d) for d in spec.input_shape(small))
    info = engine.tensors.get(spec.input_name)
    model = f"model '{spec.name}'{' (small)' if small else ''}"
    if info is None:
        raise ValueError(f"engine {source} has no input '{spec.input_name}' (its inputs are {engine.input_names}), "
                         f"which {model} takes; build the engine from this model")
    if len(info.shape) != len(want) or any(int(d) not in (-1, w) for d, w in zip(info.shape[1:], want[1:])):
        raise ValueError(f"engine {source} takes input '{spec.input_name}' of shape {tuple(info.shape)} but {model} "
                         f"expects {('N',) + want[1:]}; build the engine for this model and size variant")


def load_weights_into(module: torch.nn.Module, wm) -> torch.nn.Module:
    """Copy a WeightMap's tensors into `module` (reshaping flat .wts arrays), so the PyTorch side
    uses exactly the engine's weights. Raises ValueError naming missing or mis-sized weights."""
    state = module.state_dict()
    missing, new_state = [], {}
    for key, value in state.items():
        if not value.dtype.is_floating_point:
            new_state[key] = value  # e.g. num_batches_tracked (not stored in .wts)
            continue
        if key not in wm:
            missing.append(key)
            continue
        # a copy: WeightMap.get's own arrays are read-only, which torch.from_numpy warns about
        new_state[key] = torch.from_numpy(wm.get(key, tuple(value.shape), copy=True)).to(value.dtype)
    if missing:
        raise ValueError(f"weights from {wm.source} lack {len(missing)} tensors the PyTorch model needs, "
                         f"e.g. {missing[:5]}")
    module.load_state_dict(new_state)
    return module


def check_engine_matches(sidecar, source: str, model: str, small: bool,
                         precision: str | None = None) -> None:
    """Raise ValueError if an engine's sidecar says it was built for another model, size variant
    (small) or precision than requested (`precision=None`: not requested, nothing to check).
    Engines without a sidecar, or sidecar keys left None (e.g. custom networks), are not checked."""
    side = build_info_of(sidecar) or BuildInfo()
    built_model, built_small = side.model, side.small
    if built_model is not None and built_model != model:
        raise ValueError(f"engine {source} was built for model '{built_model}' but parity was requested for "
                         f"'{model}'; pass the matching model name or another --engine")
    if built_small is not None and bool(built_small) != bool(small):
        variant = "the small variant" if built_small else "the full-size model"
        requested = "the small variant (--small)" if small else "the full-size model (no --small)"
        raise ValueError(f"engine {source} was built for {variant} of '{built_model or model}' but "
                         f"parity was requested for {requested}; "
                         f"{'add' if built_small else 'drop'} --small or pass another --engine")
    built_precision = side.precision
    if precision is not None and built_precision is not None and built_precision != precision:
        raise ValueError(f"engine {source} computes in {built_precision} but --precision {precision} was requested; "
                         f"omit --precision (the engine's is used) or build a {precision} engine")


def engine_input_shapes(engine, batch: int | None, source: str, batch_source: str = "--batch") -> dict[str, list[int]]:
    """{input name: shape} to feed `engine`, with batch `batch` (None: the engine's static batch,
    or the smallest batch of its profile). Raises ValueError if an explicit batch is not one the
    engine accepts (a static batch of another size, or outside the profile's [min, max]);
    `batch_source` names what asked for the batch in that message (``--input x:8x3x32x32``)."""
    if batch is not None and int(batch) < 1:
        raise ValueError(f"batch must be >= 1, got {batch}")
    by = "" if batch_source == "--batch" else f" by {batch_source}"
    shapes = {}
    for name in engine.input_names:
        info = engine.tensors[name]
        dims = list(info.shape)
        if dims[0] >= 0:
            if batch is not None and int(batch) != dims[0]:
                advice = ("omit --batch" if batch_source == "--batch"
                          else f"give the engine's batch there or pass --batch {dims[0]}")
                raise ValueError(f"engine {source} has a static batch of {dims[0]} (input '{name}' {tuple(dims)}) but "
                                 f"batch {batch} was requested{by}; {advice} or build with --batch MIN,OPT,MAX")
        else:
            lo, hi = info.min_shape[0], info.max_shape[0]
            if batch is None:
                dims[0] = max(1, lo)
            elif not lo <= int(batch) <= hi:
                raise ValueError(f"batch {batch}{by} is outside the batch range [{lo}, {hi}] of engine {source} "
                                 f"(input '{name}'); pick a batch in that range or rebuild the engine")
            else:
                dims[0] = int(batch)
        shapes[name] = dims
    return shapes
