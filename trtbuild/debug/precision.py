"""Find a small set of PyTorch modules that must stay in fp32 for a fp16/bf16/int8/fp8 build to pass parity.

    result = search_precision("net.py", ref_trt, "fp16", small=True, on_trial=print)
    result.kept                 # ["norm"]: the modules to keep
    result.keep_option          # "fp32:norm", for `trtbuild build --keep`
    result.before, result.after # parity Reports with nothing kept / with `kept` kept

Candidates are the modules the model's builder asks the quantization plan about while it builds
(trtbuild.layers.planned: convolutions, linears, residual adds, normalizations...), in the order
it asks, which is network order: exactly the modules ``--keep`` can keep. Then, like Polygraphy's
``debug precision`` but on PyTorch module names and without marking outputs:

1. parity with nothing kept (if it passes there is nothing to find) and with every candidate kept
   (if that fails: a one-sentence PrecisionSearchError, which says that no choice of layers can fix
   it only when no layer is left in the reduced type; otherwise it names the layers that are no
   candidates and still computed in it: activations, adds, pools built without trtbuild.layers.planned);
2. bisection on prefixes: the shortest prefix of the candidates whose keeping passes; its last
   module is the latest one needed;
3. bisection on suffixes of that prefix: the latest start whose keeping passes, the earliest one needed;
4. pruning: each module of that window is dropped if parity still passes without it.

Every trial builds the same network with the same weights, calibration and inputs; only the kept
set differs (each is built between casts, see trtbuild.layers.planned). Trials are cached by kept
set; ``max_builds`` bounds the builds, and a search stopped by it returns the smallest passing set
found so far, marked incomplete.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

__all__ = ["PrecisionSearchError", "SearchResult", "Trial", "candidate_modules", "describe", "search_precision",
           "worst_output", "worst_text"]

PRECISIONS = ("fp16", "bf16", "int8", "fp8")
#: builds a search needs at least: nothing kept, everything kept
MIN_BUILDS = 2


class PrecisionSearchError(ValueError):
    """The search cannot help (every candidate kept still fails, no candidate, a bad option)."""


class _OutOfBuilds(Exception):
    pass


@dataclass
class Trial:
    """One parity run: the modules kept in fp32 and its report."""

    kept: tuple
    report: object

    @property
    def passed(self) -> bool:
        return self.report.passed

    def to_dict(self) -> dict:
        return {"kept": list(self.kept), "passed": self.passed, "outputs": _output_summary(self.report)}


@dataclass
class SearchResult:
    """What the search found; `kept` is [] when the build passes as it is."""

    model: str
    precision: str
    candidates: list
    kept: list
    before: object
    after: object
    trials: list = field(default_factory=list)
    complete: bool = True
    max_builds: int | None = None

    @property
    def builds(self) -> int:
        return len(self.trials)

    @property
    def keep_option(self) -> str | None:
        """``fp32:a,b`` for ``--keep`` (None when nothing needs keeping)."""
        return f"fp32:{','.join(self.kept)}" if self.kept else None

    def summary(self) -> str:
        """One line: what was found, after how many builds."""
        if not self.kept:
            return (f"result: {self.precision} passes parity with nothing kept; no module needs a higher precision "
                    f"({self.builds} build{'s' if self.builds != 1 else ''})")
        found = (f"result: keep {len(self.kept)} of {len(self.candidates)} candidate modules in fp32: "
                 f"{', '.join(self.kept)} ({self.builds} builds)")
        if not self.complete:
            found += (f"; stopped at --max-builds {self.max_builds}, so this passing set may not be the smallest "
                      "(raise --max-builds)")
        return found

    def to_dict(self) -> dict:
        return {"model": self.model, "precision": self.precision, "candidates": list(self.candidates),
                "kept": list(self.kept), "keep_option": self.keep_option, "builds": self.builds,
                "complete": self.complete, "max_builds": self.max_builds,
                "before": {"passed": self.before.passed, "outputs": _output_summary(self.before)},
                "after": {"passed": self.after.passed, "outputs": _output_summary(self.after)},
                "trials": [t.to_dict() for t in self.trials], "parity": {"meta": self.before.meta}}

    def to_json(self, path=None) -> str:
        """The search as JSON text; written atomically to `path` if given (parents created)."""
        import json

        from trtbuild.files.atomic import (
            AtomicWriteError,
            atomic_write_bytes,
            ensure_parent_dir,
        )

        text = json.dumps(self.to_dict(), indent=2, default=str) + "\n"
        if path is not None:
            atomic_write_bytes(ensure_parent_dir(path, AtomicWriteError), text.encode(), AtomicWriteError)
        return text


def _output_summary(report) -> list[dict]:
    return [{"name": s.name, "passed": s.passed, "max_abs": _finite(s.max_abs), "max_rel": _finite(s.max_rel),
             "cosine": _finite(s.cosine), "nonfinite": s.nonfinite_actual} for s in report.outputs]


def _finite(v: float):
    """JSON-safe: NaN -> None, +-inf -> "inf"/"-inf"."""
    v = float(v)
    return None if math.isnan(v) else ("inf" if v == float("inf") else "-inf" if v == -float("inf") else v)


def worst_output(report):
    """The output that fails most: failing first, then by max error over its tolerance."""
    def badness(s):
        err = math.inf if math.isnan(s.max_abs) else s.max_abs  # NaN: not compared (a shape mismatch)
        return (not s.passed, s.nonfinite_actual, err / max(s.atol, 1e-30))
    return max(report.outputs, key=badness)


def worst_text(report) -> str:
    """The worst output's max |error| and cosine: ``worst output 'out': max |err| 1.12, cosine 0.087596``."""
    s = worst_output(report)
    nonfinite = f", {s.nonfinite_actual} NaN/Inf" if s.nonfinite_actual else ""
    return f"worst output '{s.name}': max |err| {s.max_abs:.3g}, cosine {s.cosine:.6f}{nonfinite}"


def describe(report) -> str:
    """``PASS``/``FAIL`` and the worst output's max |error| and cosine."""
    return f"{'PASS' if report.passed else 'FAIL'} ({worst_text(report)})"


def _record_queries(plan) -> list[str]:
    """Make `plan` record, in order, every module name the builder asks it about (every query goes
    through kept_precision: layer, precision_of, output_amax, add_inputs); returns the list it fills."""
    asked: list[str] = []
    original = plan.kept_precision

    def kept_precision(module):
        if module not in asked:
            asked.append(module)
        return original(module)
    plan.kept_precision = kept_precision  # on this instance only; dataclasses.replace copies no such attribute
    return asked


def _base_plan(spec, precision: str, calibration, small: bool, module):
    """The plan with nothing kept (the calibration file checked against the model for int8/fp8)."""
    from trtbuild.engine import quant_plan
    from trtbuild.quant import QuantPlan

    if precision in ("int8", "fp8"):
        return quant_plan(spec, precision, calibration, small=small, module=module)
    if calibration is not None:
        raise PrecisionSearchError(f"--calibration applies to --precision int8 or fp8 only, not {precision}")
    return QuantPlan.build(None, precision, (), modules=[n for n, _ in module.named_modules() if n])


def candidate_modules(asked: list[str], plan) -> list[str]:
    """The modules of `asked` that --keep accepts for `plan` (PyTorch modules, or residual adds
    the calibration knows), in order."""
    known = set(plan.modules) | set(plan.calibration.adds if plan.calibration is not None else ())
    return [name for name in asked if name in known]


def _search_parity(parity=None, **shorthand):
    """The ParityOptions every trial of a search is judged with: `parity` (a ParityOptions), or else the one
    search_precision's shorthand keywords (seed, value_range, distribution, large_scale, atol, rtol) make.
    ValueError in one sentence for both at once, for another type, or for layerwise (a search judges the
    model's outputs: layer tensors are `trtbuild parity --layerwise`'s)."""
    from trtbuild.parity.check import _parity_options  # check_model_parity's rule, in search_precision's words

    parity = _parity_options(parity, "search_precision", **shorthand)
    if parity.layerwise:  # only a ParityOptions passed in can ask for it
        raise ValueError("search_precision judges the model's outputs, so parity.layerwise must be False (compare "
                         "layer by layer with `trtbuild parity --layerwise`)")
    return parity


def search_precision(model, trt, precision: str, *, calibration=None, weights=None, small: bool = False,
                     parity=None, seed: int = 0, weights_seed: int = 0, value_range=None,
                     distribution: str = "uniform", large_scale: float = 1e4, atol: float | None = None,
                     rtol: float | None = None, max_builds: int = 64, on_trial=None) -> SearchResult:
    """Search the modules of `model` (name or ModelSpec) that must stay fp32 for a `precision` build
    to pass parity (see the module doc). calibration: file or Calibration (int8/fp8 only, required
    there); weights, weights_seed: as trtbuild.parity.check_model_parity. parity: the
    trtbuild.parity.ParityOptions (inputs, tolerances) every trial is judged with, or as a shorthand
    the keywords seed, value_range, distribution, large_scale, atol, rtol (see _search_parity).
    on_trial(number, Trial): called after each build. PrecisionSearchError (a ValueError) when
    keeping every candidate still fails, or when there is no candidate."""
    from trtbuild.engine import get_spec
    from trtbuild.engine.model import load_model_weights
    from trtbuild.parity import check_model_parity

    if precision not in PRECISIONS:
        raise PrecisionSearchError(f"--precision {precision}: debug precision searches {', '.join(PRECISIONS)} builds "
                                   "(fp32 has nothing to keep)")
    if int(max_builds) < MIN_BUILDS:
        raise PrecisionSearchError(f"--max-builds {max_builds}: the search needs at least {MIN_BUILDS} builds "
                                   "(nothing kept, then every candidate kept)")
    parity = _search_parity(parity, seed=seed, value_range=value_range, distribution=distribution,
                           large_scale=large_scale, atol=atol, rtol=rtol)
    spec = get_spec(model) if isinstance(model, str) else model
    module = spec.torch_factory(weights_seed, small).eval()  # registered or not (a ModelSpec passed in)
    wm = load_model_weights(weights) if weights is not None else None
    if wm is not None:
        from trtbuild.parity.check import load_weights_into

        load_weights_into(module, wm)  # the calibration file is checked against these weights' network
    base = _base_plan(spec, precision, calibration, small, module)
    trials: list[Trial] = []
    cache: dict[frozenset, Trial] = {}

    def trial(kept, plan=None) -> Trial:
        key = frozenset(kept)
        if key in cache:
            return cache[key]
        if len(trials) >= max_builds:
            raise _OutOfBuilds
        plan = plan or replace(base, keep=[(name, "fp32") for name in kept])
        report = check_model_parity(spec, trt, weights=wm, precision=precision, small=small, parity=parity,
                                    weights_seed=weights_seed, module=module, quant=plan)
        t = cache[key] = Trial(tuple(kept), report)
        trials.append(t)
        if on_trial is not None:
            on_trial(len(trials), t)
        return t

    recording = replace(base)
    asked = _record_queries(recording)
    before = trial((), recording)
    candidates = candidate_modules(asked, base)
    result = SearchResult(spec.name, precision, candidates, [], before.report, before.report, trials,
                          max_builds=max_builds)
    if before.passed:
        return result
    if not candidates:
        raise PrecisionSearchError(f"model '{spec.name}': its builder asks the quantization plan about no module, so "
                                   "no layer can be kept in fp32 (build its layers with trtbuild.layers.planned)")
    every = trial(tuple(candidates))
    if not every.passed:
        every_kept = replace(base, keep=[(n, "fp32") for n in candidates])
        left = _layers_left_in(precision, spec, wm, module, small, every_kept)
        failing = (f"even with all {len(candidates)} candidate modules kept in fp32 (the modules the builder asks its "
                   f"quantization plan about), parity of '{spec.name}' fails ({worst_text(every.report)})")
        if not left:
            raise PrecisionSearchError(f"{failing}, so no choice of {precision} layers can fix it: check the builder, "
                                       "the weights and the tolerances with `trtbuild parity` in fp32")
        shown = ", ".join(left[:8]) + (f", ... ({len(left)} in all)" if len(left) > 8 else "")
        raise PrecisionSearchError(
            f"{failing}, but {len(left)} layer{'s' if len(left) != 1 else ''} that no candidate covers still "
            f"computed in {precision} and {'were' if len(left) != 1 else 'was'} not searched ({shown}), so either "
            f"they need fp32 or the builder is wrong: build them through trtbuild.layers.planned (planned(...)) to "
            "make them candidates, and check the builder, the weights and the tolerances with `trtbuild parity` in "
            "fp32")
    try:
        best = _bisect_and_prune(candidates, trial)
        complete = True
    except _OutOfBuilds:  # every set kept so far passed when it was kept: the smallest such
        best, complete = _smallest_passing(trials), False
    result.kept, result.after, result.complete = best, cache[frozenset(best)].report, complete
    return result


def _layers_left_in(precision: str, spec, wm, module, small: bool, plan) -> list[str]:
    """Names of the layers (casts aside) of `spec`'s network built with `plan` whose output is still
    the reduced float type of `precision` (HALF for fp16, BF16 for bf16; none for int8/fp8, whose
    float type is FLOAT): what keeping every candidate leaves out of the search."""
    import trtbuild.reference as ref_trt
    from trtbuild.engine.build import definition_step
    from trtbuild.weights import WeightMap

    reduced = {"fp16": ref_trt.DataType.HALF, "bf16": ref_trt.DataType.BF16}.get(precision)
    if reduced is None:
        return []
    weights = wm if wm is not None else WeightMap.from_module(module)
    network = definition_step(spec, weights=weights, precision=precision, small=small, quant=plan)(ref_trt).network
    layers = [network.get_layer(i) for i in range(network.num_layers)]
    return [layer.name for layer in layers if layer.type != ref_trt.LayerType.CAST  # get_layer gives ILayer views
            and any(layer.get_output(j).dtype == reduced for j in range(layer.num_outputs))]


def _smallest_passing(trials) -> list[str]:
    return list(min((t for t in trials if t.passed), key=lambda t: len(t.kept)).kept)


def _bisect_and_prune(candidates: list[str], trial) -> list[str]:
    """Steps 2-4 of the module doc; `trial(kept)` runs parity (nothing kept fails, all kept passes)."""
    lo, hi = 0, len(candidates)  # keeping candidates[:lo] fails, candidates[:hi] passes
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if trial(tuple(candidates[:mid])).passed else (mid, hi)
    end = hi
    lo, hi = 0, end  # keeping candidates[lo:end] passes, candidates[hi:end] fails
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if trial(tuple(candidates[mid:end])).passed else (lo, mid)
    kept = candidates[lo:end]
    for name in list(kept):
        if len(kept) > 1:
            rest = [n for n in kept if n != name]
            if trial(tuple(rest)).passed:
                kept = rest
    return kept
