"""Run an engine and a PyTorch module on the same seeded inputs and compare them.

    report = check_parity(engine, module, make_inputs({"input": (1, 3, 224, 224)}, seed=0))
    report = check_model_parity("alexnet", trt, precision="fp16", layerwise=True)
    print(report.to_table())
"""

from __future__ import annotations

import dataclasses
import os
from typing import Mapping, Sequence

import torch

from trtbuild.engine.options import BatchProfile, BuildOptions
from trtbuild.engine.records import BuildInfo, build_info_of

from .compare import Report, check_tolerance, compare, default_tolerances, judge_argmax_ties
from .engine_fit import (check_engine_input_fits, check_engine_matches, check_engine_weights, engine_input_shapes,
                         engine_precision, load_weights_into, recorded_weights)
from .layerwise import FUSED_AWAY, capture_module_outputs, find_jump, layerwise_rows
from .options import DISTRIBUTIONS, ParityOptions, check_input_values  # noqa: F401 - DISTRIBUTIONS: importable here



def make_inputs(shapes: Mapping[str, Sequence[int]], seed: int = 0, value_range=(-1.0, 1.0),
                distribution: str = "uniform", large_scale: float = 1e4) -> dict[str, torch.Tensor]:
    """Seeded float32 CPU inputs: "uniform" in [lo, hi]; "normal" with mean (lo+hi)/2 and std
    (hi-lo)/2; "large": uniform in [lo, hi] times `large_scale` (overflow / large-magnitude tests)."""
    lo, hi = check_input_values(value_range, distribution, large_scale)
    gen = torch.Generator().manual_seed(int(seed))
    out = {}
    for name, shape in shapes.items():
        shape = tuple(int(d) for d in shape)
        if distribution == "normal":
            x = torch.randn(shape, generator=gen) * ((hi - lo) / 2) + (lo + hi) / 2
        else:
            x = torch.rand(shape, generator=gen) * (hi - lo) + lo
            if distribution == "large":
                x = x * large_scale
        out[name] = x.float()
    return out


def describe_inputs(distribution: str, value_range, large_scale: float = 1e4) -> str:
    lo, hi = value_range
    if distribution == "normal":
        return f"normal(mean={(lo + hi) / 2:g}, std={(hi - lo) / 2:g})"
    if distribution == "large":
        return f"uniform[{lo:g}, {hi:g}]x{large_scale:g}"
    return f"uniform[{lo:g}, {hi:g}]"


def _as_named(result, names: Sequence[str]) -> dict[str, torch.Tensor]:
    if isinstance(result, torch.Tensor):
        result = [result]
    if isinstance(result, Mapping):
        return {n: result[n] for n in names if n in result}
    result = list(result)
    if len(result) != len(names):
        raise ValueError(f"the torch module returned {len(result)} outputs but {len(names)} names were "
                         f"given: {list(names)}")
    return dict(zip(names, result))


def check_parity(engine, module: torch.nn.Module, inputs: Mapping[str, torch.Tensor], *,
                 output_names: Sequence[str] | None = None, atol: float | None = None, rtol: float | None = None,
                 layer_map: Mapping[str, str] | None = None, layer_order: Sequence[str] | None = None,
                 output_of: Mapping[str, str] | None = None, jump_factor: float = 10.0,
                 meta: dict | None = None, allow_nonfinite: bool = False,
                 debug_tensors: Mapping[str, str] | None = None, debug_unfused: bool | None = None,
                 argmax_of: Mapping[str, str] | None = None,
                 tolerances: Mapping[str, tuple[float, float]] | None = None) -> Report:
    """Compare `engine` with `module` on `inputs` (float32 CPU tensors named like the engine inputs).

    atol/rtol default to default_tolerances(precision), the default atol being relative to each
    tensor's largest |expected|; an explicit atol is absolute. The precision is meta["precision"]
    or else the engine's (`engine.sidecar`: its sidecar, or plan.info for an engine built in
    memory), fp32 if neither says; a meta["precision"] contradicting the engine's is a ValueError.
    The engine gets the inputs in its own dtype and device; the module gets exactly the same
    values (rounded to the engine's input type, back in float32). Layerwise mode (`layer_map`:
    network tensor -> torch module name) needs the engine built with those tensors as outputs;
    `output_of` maps a tensor name to its engine output name when they differ (default: the
    sidecar's "extra_outputs", which records the names build_plan marked them under).
    atol/rtol must be finite and >= 0. NaN/Inf in an engine output or layer tensor fail it unless
    allow_nonfinite (then they pass where PyTorch has the same).
    debug_tensors (network tensor -> debug tensor name; default: the sidecar's "debug_tensors"):
    the layer tensors are read with an IDebugListener from an engine that marked them with
    mark_debug, not from extra outputs (trtbuild.parity.debug_tensors); one marked but never
    reported gets a row "fused away (not compared)", listed in meta["fused_away"]. debug_unfused
    (default: the sidecar's): the engine marked them with mark_unfused_tensors_as_debug_tensors.
    argmax_of (index output -> score output): the index output is the argmax over the last dim of the score
    output; an index differing from PyTorch's passes at a near-tie of the scores (compare.judge_argmax_ties).
    tolerances ({precision: (relative atol, rtol)}, a model's ModelSpec.tolerances): the defaults for this
    engine's precision instead of default_tolerances's; an explicit atol/rtol still wins.
    """
    side = build_info_of(getattr(engine, "sidecar", None)) or BuildInfo()
    meta = dict(meta or {})
    meta["precision"] = precision = engine_precision(engine, meta.get("precision"))
    d_atol, d_rtol = (tolerances or {}).get(precision) or default_tolerances(precision)
    atol_relative = atol is None  # the default atol scales with each tensor's largest |expected|
    atol = d_atol if atol is None else check_tolerance("atol", atol)
    rtol = d_rtol if rtol is None else check_tolerance("rtol", rtol)
    feeds = {}
    torch_inputs = []
    for name in engine.input_names:
        if name not in inputs:
            raise ValueError(f"no value for engine input '{name}'; got {list(inputs)}")
        x = inputs[name].to(engine.tensors[name].dtype)
        feeds[name] = x.to(engine.device)
        torch_inputs.append(x.float())
        if x.is_floating_point() and not torch.isfinite(x).all():  # e.g. a range x scale beyond the input type
            meta.setdefault("nonfinite_inputs", {})[name] = int((~torch.isfinite(x)).sum())
    module = module.eval()
    try:
        mod_device = next(module.parameters()).device
    except StopIteration:
        mod_device = torch.device("cpu")
    torch_inputs = [t.to(mod_device) for t in torch_inputs]
    layer_map = dict(layer_map or {})
    output_of = dict(output_of if output_of is not None else side.extra_outputs or {})
    if output_names is None and side.model_outputs:
        output_names = list(side.model_outputs)  # recorded by build_plan: the extra outputs are not among them
    if output_names is None:
        extra = set(output_of.values()) | set(layer_map)
        output_names = [n for n in engine.output_names if n not in extra] or engine.output_names
    debug_of = dict(debug_tensors if debug_tensors is not None else side.debug_tensors or {})
    layer_values = None
    if layer_map and debug_of:
        from .debug_tensors import VIA_DEBUG, VIA_UNFUSED, run_with_debug_tensors

        unfused = bool(side.debug_unfused if debug_unfused is None else debug_unfused)

        unmarked = [n for n in layer_map if n not in debug_of]
        if unmarked:
            raise ValueError(f"layer tensors {unmarked} are not debug tensors of engine {engine.name}; build it "
                             "with debug_tensors including them")
        actual, layer_values, _ = run_with_debug_tensors(engine, feeds, [debug_of[n] for n in layer_map], unfused)
        meta["layerwise_via"], output_of = VIA_UNFUSED if unfused else VIA_DEBUG, debug_of
    else:
        actual = engine.run(feeds, synchronize=True)
        if layer_map:
            meta["layerwise_via"] = "outputs"
    try:
        result, captured, calls = capture_module_outputs(module, list(layer_map.values()), *torch_inputs)
    except RuntimeError as e:  # typically an engine built for other input shapes than the module takes
        shapes = ", ".join(f"'{n}' {tuple(feeds[n].shape)}" for n in engine.input_names)
        first_line = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise ValueError(f"the PyTorch module failed on the engine's input shapes ({shapes}), so the engine does "
                         f"not seem to fit the model: {first_line}") from None
    expected = _as_named(result, output_names)
    report = compare(actual, expected, atol, rtol, names=list(output_names), meta=meta, atol_relative=atol_relative,
                     allow_nonfinite=allow_nonfinite)
    rows = {row.name: row for row in report.outputs}
    for index_name, score_name in (argmax_of or {}).items():
        if index_name in rows and score_name in rows and index_name in actual:
            judge_argmax_ties(rows[index_name], actual[index_name], expected[index_name], expected[score_name],
                              rows[score_name])
    if allow_nonfinite:
        report.meta["allow_nonfinite"] = True
    if layer_map:
        order = list(layer_order) if layer_order is not None else list(layer_map)
        report.layers = layerwise_rows(actual if layer_values is None else layer_values, captured, layer_map, order,
                                       output_of, atol, rtol, calls, atol_relative, allow_nonfinite,
                                       fused_away_ok=layer_values is not None)
        if layer_values is not None:
            report.meta["fused_away"] = [r.name for r in report.layers if r.note == FUSED_AWAY]
        report.first_jump = find_jump(report.layers, jump_factor, floor=rtol / 10)
        report.first_failure = next((r.name for r in report.layers if not r.passed), None)
        report.meta.setdefault("jump_factor", jump_factor)
    return report


#: check_model_parity's keyword arguments that are a shorthand for its `options` (BuildOptions) and its
#: `parity` (ParityOptions), with their defaults
_BUILD_KEYWORDS = {"precision": None, "small": False, "progress": False, "targets": None, "cross_check": False,
                   "quant": None}
_PARITY_KEYWORDS = {f.name: f.default for f in dataclasses.fields(ParityOptions)}


def _typed_or_shorthand(name: str, typed, cls, shorthand: dict, defaults: dict,
                        caller: str = "check_model_parity") -> None:
    """ValueError in one sentence (starting "<caller>: ") if both `typed` (the caller's `name`=cls(...)) and any
    of its shorthand keyword arguments (those not at their defaults) are given, or `typed` is not a `cls`."""
    given = sorted(k for k, v in shorthand.items() if v is not defaults[k] and v != defaults[k])
    if typed is not None and given:
        raise ValueError(f"{caller}: pass either {name}={cls.__name__}(...) or keyword arguments "
                         f"({', '.join(given)}), not both")
    if typed is not None and not isinstance(typed, cls):
        raise ValueError(f"{caller}: {name} must be a {cls.__name__}, got {type(typed).__name__}")


def _build_options(options: BuildOptions | None, batch: int | None, **shorthand) -> BuildOptions:
    """The BuildOptions of check_model_parity: `options`, or else the one its shorthand keywords
    (precision, small, progress, targets, cross_check, quant; `batch` > 1 a BatchProfile(1, batch, batch))
    describe; ValueError in one sentence if both are given."""
    _typed_or_shorthand("options", options, BuildOptions, shorthand, _BUILD_KEYWORDS)
    if options is not None:
        return options
    build_batch = int(batch or 1)
    return BuildOptions(precision=shorthand["precision"] or "fp32", small=shorthand["small"],
                        progress=shorthand["progress"], targets=shorthand["targets"],
                        cross_check=shorthand["cross_check"], quant=shorthand["quant"],
                        profiles=(BatchProfile(1, build_batch, build_batch),) if build_batch > 1 else ())


def _parity_options(parity, caller: str = "check_model_parity", **shorthand) -> ParityOptions:
    """The ParityOptions of check_model_parity (or of `caller`, e.g. search_precision, in messages): `parity`, or
    else the one its shorthand keywords make."""
    _typed_or_shorthand("parity", parity, ParityOptions, shorthand, _PARITY_KEYWORDS, caller)
    return parity if parity is not None else ParityOptions(**shorthand)


def check_model_parity(model: str, trt, *, options: BuildOptions | None = None, parity: ParityOptions | None = None,
                       weights=None, engine=None, precision: str | None = None,
                       small: bool = False, seed: int = 0, weights_seed: int = 0, value_range=None,
                       distribution: str = "uniform", large_scale: float = 1e4, batch: int | None = None,
                       atol: float | None = None, rtol: float | None = None, layerwise: bool = False,
                       progress: bool | None = False, module: torch.nn.Module | None = None,
                       targets=None, cross_check: bool = False, allow_nonfinite: bool = False,
                       layerwise_via: str = "debug tensors", quant=None, batch_source: str = "--batch",
                       profile: int | None = None) -> Report:
    """Parity of a registry model (name or ModelSpec): engine (a path, an Engine, or built in memory) vs PyTorch.

    weights: path or WeightMap used for the engine build and loaded into the PyTorch model
    (None: for a given engine and no `module`, the weight file its sidecar records if it is there
    with the recorded sha256, else the PyTorch model's own seeded weights, `weights_seed`). Layerwise mode builds an
    engine in memory with the ModelSpec.layer_map tensors marked as debug tensors (layerwise_via="debug
    tensors", the default: the engine has only the model's outputs, as the deployed one; "unfused debug
    tensors": marked with mark_unfused_tensors_as_debug_tensors, which leaves fusions alone on TensorRT,
    tensors fused away being listed) or as extra outputs (layerwise_via="outputs", which blocks fusions on
    real TensorRT); meta["layerwise_via"] says which.
    parity: a ParityOptions (seed, value_range, distribution, large_scale, atol, rtol, allow_nonfinite,
    layerwise, layerwise_via), checked before anything is built; or, as a shorthand, those keyword
    arguments, not both. value_range None: the model's (ModelSpec.value_range).
    options: the BuildOptions of the engine built in memory (layerwise mode marks the layer tensors on
    top of them); with a given engine, the precision and small variant it must have. Or, as a
    shorthand, the keyword arguments precision, small, progress, targets, cross_check and quant (and
    `batch` > 1 for a batch profile (1, batch, batch)), not both; `batch` is the batch the inputs have
    either way. precision / batch: None means "not requested": fp32 / batch 1 (the profile's smallest)
    for an engine built in memory, the engine's own for a given engine. A given engine whose sidecar
    names another model, small variant or precision than requested, or whose batch cannot be the
    requested one, raises ValueError naming both. targets / cross_check: as in build_plan, for an
    engine built in memory.
    allow_nonfinite: as in check_parity (NaN/Inf outputs fail unless allowed). batch_source: what
    asked for `batch`, named where a given engine cannot take it (default "--batch").
    quant: a trtbuild.quant.QuantPlan (trtbuild.engine.quant_plan) for an engine built in memory:
    required for precision int8/fp8, or --keep in fp16/bf16 (meta["quantization"] describes it).
    profile: for a given engine, run it pinned to this optimization profile, at the profile's opt
    shapes (`batch` replacing the batch dim); meta["profile"] names it. check_model_parity_profiles
    makes one report per profile.
    """
    from trtbuild.engine import Engine, build_model, get_spec, load_engine
    from trtbuild.models import registry
    from trtbuild.weights import WeightMap

    from .debug_tensors import VIA_OUTPUTS, VIA_UNFUSED

    p = _parity_options(parity, seed=seed, value_range=value_range, distribution=distribution,
                        large_scale=large_scale, atol=atol, rtol=rtol, allow_nonfinite=allow_nonfinite,
                        layerwise=layerwise, layerwise_via=layerwise_via)
    explicit = options is not None
    options = _build_options(options, batch, precision=precision, small=small, progress=progress, targets=targets,
                             cross_check=cross_check, quant=quant)
    small, quant = options.small, options.quant
    precision = options.precision if explicit else precision  # None: the given engine's own
    spec = get_spec(model) if isinstance(model, str) else model
    output_of, order, source, debug_of = {}, None, "(built in memory)", None
    if engine is not None and quant is not None:
        raise ValueError("a given engine was built with its own quantization (its sidecar records it); omit "
                         "--calibration/--keep (quant=) with --engine")
    if engine is not None and not p.layerwise:
        if isinstance(engine, (str, os.PathLike)):
            source = str(engine)
            engine = load_engine(engine, trt)
        else:
            source = engine.name
        check_engine_matches(engine.sidecar, source, spec.name, small, precision)
        if weights is None and module is None:  # a given module has the weights its caller chose
            weights = recorded_weights(engine.sidecar)
        check_engine_weights(engine.sidecar, source, weights)
        check_engine_input_fits(engine, spec, small, source)
        precision = engine_precision(engine, precision)
    elif engine is not None:
        raise ValueError("--layerwise builds its own engine with the layer tensors marked (as debug tensors, or "
                         "outputs); omit --engine (a saved engine has no such marks)")
    if batch is not None and int(batch) < 1:
        raise ValueError(f"batch must be >= 1, got {batch}")
    weights_note = (str(weights) if isinstance(weights, (str, os.PathLike)) else weights.source if weights is not None
                    else "the module passed in" if module is not None
                    else f"seeded PyTorch model (seed {weights_seed})")
    if module is None:
        module = registry.get_torch_model(spec.name, seed=weights_seed, small=small)
    wm = None
    if weights is not None:
        wm = weights if isinstance(weights, WeightMap) else WeightMap.load(weights)
    layer_map = dict(spec.layer_map) if p.layerwise else {}
    automap_meta = {}
    if p.layerwise and not layer_map:  # derived from the layer names (trtbuild.parity.automap)
        from .automap import automap_spec

        layer_map, unmapped = automap_spec(spec, wm or WeightMap.from_module(module), module, precision, small)
        automap_meta = {"layer_map": "automatic (from the layer names)", "unmapped_layers": unmapped}
    if engine is None:
        precision = options.precision
        if wm is None:
            wm = WeightMap.from_module(module)
        via_debug = p.layerwise_via != VIA_OUTPUTS
        if p.layerwise:
            options = options.replace(extra_outputs=() if via_debug else tuple(layer_map),
                                      debug_tensors=tuple(layer_map) if via_debug else (),
                                      debug_unfused=p.layerwise_via == VIA_UNFUSED)
        plan = build_model(spec, wm, trt, options=options)
        output_of = plan.info.extra_outputs
        debug_of = (plan.info.debug_tensors or {}) if via_debug else None
        order = list(debug_of if via_debug else output_of)
        engine = Engine(plan, trt, sidecar=plan.info, name=f"{spec.name} ({precision}, in memory)")
    if weights is not None:  # after the build, so that the build's record of unused weights is its own
        load_weights_into(module, wm)
    if profile is not None:
        from .profiles import profile_input_shapes

        shapes = profile_input_shapes(engine, profile, batch, source)
        pinned, engine.profile = engine.profile, profile
    else:
        shapes = engine_input_shapes(engine, batch, source, batch_source)
    value_range = p.value_range if p.value_range is not None else tuple(spec.value_range)
    inputs = make_inputs(shapes, p.seed, value_range, p.distribution, p.large_scale)
    built = build_info_of(engine.sidecar) or BuildInfo()
    cross = built.cross_check
    meta = {"model": spec.name + (" (small)" if small else ""), "backend": engine.backend, "precision": precision,
            "batch": shapes[engine.input_names[0]][0], "seed": p.seed,
            "inputs": describe_inputs(p.distribution, value_range, p.large_scale), "against": "pytorch",
            "engine": source, **({"cross_check": cross} if cross else {}),
            "weights": weights_note,
            **{k: getattr(built, k) for k in ("weight_tensors", "unused_weights", "quantization")
               if getattr(built, k) is not None}}
    meta.update(automap_meta)
    if profile is not None:
        meta["profile"] = profile
    try:
        return check_parity(engine, module, inputs, output_names=list(spec.output_names), atol=p.atol, rtol=p.rtol,
                            layer_map=layer_map, layer_order=order, output_of=output_of, meta=meta,
                            allow_nonfinite=p.allow_nonfinite, debug_tensors=debug_of, argmax_of=spec.argmax_of,
                            tolerances=spec.tolerances)
    finally:
        if profile is not None:
            engine.profile = pinned
