"""The quantization plan: which PyTorch modules to quantize, with which ranges, and which to keep
in a higher precision. What the Q/DQ builders consume.

    keep = parse_keep(["fp32:conv4_3_norm,layer4.*", "fp16:fc"])      # --keep, repeatable
    plan = QuantPlan.build(load_calibration("calib.json", spec), "int8", keep)
    lp = plan.layer("layer1.0.conv1")
    lp.quantized, lp.input_amax, lp.weight_amax, lp.precision     # True, 2.7, (0.41, ...), "int8"
    plan.precision_of("conv4_3_norm")                              # "fp32" (kept)
    plan.add_inputs("layer1.0.add")                                # (amax of input 0, amax of input 1) or None
    plan.add_operands("layer1.0.add")                              # both AddInputs (key, amax, Conv/Linear) or None
    plan.sdpa_amax("blocks.0.attn")                                # its attention's (query, key, value) amax or None

Keep patterns are PyTorch module names or globs (fnmatch: ``*`` also crosses dots). A pattern
matching a module keeps it and every module inside it. When several patterns cover a module, the
one matching the innermost module wins (``fp16:layer4 fp32:layer4.1.conv2``: layer4.1.conv2 stays
fp32, the rest of layer4 fp16); on the same module fp32 wins over fp16. A pattern that matches no
module (or residual add, ``layer1.0.add``) of the network is an error naming it. A plan for fp16/bf16/fp32 (no
calibration) only carries the kept modules.

INT8 scale = amax/127, FP8 E4M3 scale = amax/448 (:func:`scale_of`), symmetric, zero point 0.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from fnmatch import fnmatchcase

from .calibrate import Calibration

__all__ = [
    "KEEP_PRECISIONS",
    "AddInput",
    "QUANTIZED_PRECISIONS",
    "LayerPlan",
    "QuantPlan",
    "folded_weight_amax",
    "parse_keep",
    "scale_of",
]

QUANTIZED_PRECISIONS = {"int8": 127.0, "fp8": 448.0}
KEEP_PRECISIONS = ("fp32", "fp16")
_RANK = {"fp32": 0, "fp16": 1, "bf16": 1, "fp8": 2, "int8": 2}


def scale_of(amax, precision: str):
    """Q/DQ scale of `amax` (a number or a sequence) in `precision` (int8: amax/127, fp8: amax/448)."""
    top = QUANTIZED_PRECISIONS[precision]
    return [a / top for a in amax] if isinstance(amax, (list, tuple)) else amax / top


def folded_weight_amax(weight_amax, channel_scale) -> list[float]:
    """Per-channel amax of a weight after folding a BatchNorm into it: output channel c is
    multiplied by s_c = gamma_c / sqrt(var_c + eps), so its max |w| becomes |s_c| * amax_c."""
    if len(weight_amax) != len(channel_scale):
        raise ValueError(f"folded_weight_amax: {len(weight_amax)} channel amax values but {len(channel_scale)} "
                         "BatchNorm scales")
    return [abs(float(s)) * float(a) for a, s in zip(weight_amax, channel_scale)]


def parse_keep(items) -> list[tuple[str, str]]:
    """["fp32:a,b*", "fp16:c"] -> [("a", "fp32"), ("b*", "fp32"), ("c", "fp16")]; ValueError naming a bad item."""
    out = []
    for item in items or ():
        precision, sep, patterns = item.partition(":")
        if not sep or precision not in KEEP_PRECISIONS:
            raise ValueError(f"--keep {item!r}: expected fp32:PATTERNS or fp16:PATTERNS (PyTorch module names or "
                             "globs, comma-separated), e.g. fp32:conv4_3_norm,layer4.*")
        names = [p.strip() for p in patterns.split(",") if p.strip()]
        if not names:
            raise ValueError(f"--keep {item!r}: no module name or glob after '{precision}:'")
        out += [(name, precision) for name in names]
    return out


@dataclass(frozen=True)
class LayerPlan:
    """One Conv/Linear module: quantized (input_amax per tensor, weight_amax per output channel) in
    `precision`, or kept in `precision` (fp32/fp16/...) with `reason`."""

    module: str
    precision: str
    quantized: bool
    input_amax: float | None = None
    weight_amax: tuple[float, ...] | None = None
    reason: str = ""

    def input_scale(self) -> float:
        return scale_of(self.input_amax, self.precision)

    def weight_scales(self) -> list[float]:
        return scale_of(list(self.weight_amax), self.precision)


@dataclass(frozen=True)
class AddInput:
    """One input of a calibrated residual add: its calibration key (``layer1.0.bn2.output``), amax,
    and the Conv/Linear module whose output it is (``layer1.0.conv2``; None: no such output)."""

    key: str
    amax: float
    source: str | None = None

    @property
    def module(self) -> str | None:
        """The module that returned it (``layer1.0.bn2``), None for an input no module returned."""
        return self.key[: -len(".output")] if self.key.endswith(".output") else None


def _prefixes(name: str):
    """`a.b.c` -> a.b.c, a.b, a (innermost first)."""
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        yield ".".join(parts[:i])


@dataclass
class QuantPlan:
    """Per PyTorch module name: quantize it? with which ranges? kept in which precision?"""

    precision: str
    keep: list[tuple[str, str]] = field(default_factory=list)
    calibration: Calibration | None = None
    modules: list[str] = field(default_factory=list)
    #: every module the builder asked about (kept_precision), in order: what --keep can reach
    asked: list[str] = field(default_factory=list, init=False, repr=False, compare=False)

    @classmethod
    def build(cls, calibration: Calibration | None, precision: str, keep=(), modules=None) -> QuantPlan:
        """A plan for `precision` (int8/fp8 need `calibration`), keeping the `keep` patterns
        ((pattern, precision) pairs, see parse_keep). `modules`: the network's module names
        (default: the calibration's). ValueError names an unknown pattern or a mismatch."""
        if precision in QUANTIZED_PRECISIONS and calibration is None:
            raise ValueError(f"--precision {precision} needs a calibration file (--calibration calib.json, written "
                             "by `trtbuild calibrate`)")
        if precision not in QUANTIZED_PRECISIONS and precision not in _RANK:
            raise ValueError(f"precision {precision!r} is not one of int8, fp8, fp16, bf16, fp32")
        if calibration is not None and calibration.precision not in (None, precision):
            raise ValueError(f"the calibration was made for {calibration.precision}, not --precision {precision}; "
                             f"recalibrate with --precision {precision} or without --precision")
        names = list(modules if modules is not None else calibration.modules if calibration else [])
        keep = list(keep)
        known = names + list(calibration.adds if calibration else ())  # adds can be kept by name too
        unknown = [p for p, _ in keep if not any(fnmatchcase(n, p) for n in known)]
        if unknown:
            shown = ", ".join(names[:8]) + (", ..." if len(names) > 8 else "")
            raise ValueError(f"--keep: {', '.join(unknown)} match{'es' if len(unknown) == 1 else ''} no module of "
                             f"the network (its modules: {shown or 'none known'})")
        for pattern, kept in keep:
            if _RANK[kept] >= _RANK.get(precision, 0):
                raise ValueError(f"--keep {kept}:{pattern} keeps nothing in a {precision} build; keep modules in a "
                                 "higher precision than --precision")
        return cls(precision=precision, keep=keep, calibration=calibration, modules=names)

    def kept_precision(self, module: str) -> str | None:
        """The precision a --keep pattern gives `module` (or a module containing it), else None."""
        if module not in self.asked:
            self.asked.append(module)
        for prefix in _prefixes(module):
            found = [kept for pattern, kept in self.keep if fnmatchcase(prefix, pattern)]
            if found:
                return min(found, key=_RANK.__getitem__)
        return None

    def unreached_keep(self) -> list[str]:
        """The --keep items (``fp32:relu1``) that cover no module the builder asked about: layers
        built without trtbuild.layers.planned (ReLUs, pools...), which those items cannot keep."""
        return [f"{kept}:{pattern}" for pattern, kept in self.keep
                if not any(fnmatchcase(prefix, pattern) for module in self.asked for prefix in _prefixes(module))]

    def check_keep_reached(self, model: str) -> None:
        """Refuse (ValueError, one sentence) --keep items that kept nothing in the network just built
        with this plan, naming the modules that can be kept (call it after the builder ran)."""
        unreached = self.unreached_keep()
        if not unreached:
            return
        shown = ", ".join(self.asked[:16]) + (f", ... ({len(self.asked)} in all)" if len(self.asked) > 16 else "")
        one = len(unreached) == 1
        raise ValueError(f"--keep {' '.join(unreached)} would keep nothing: model '{model}' builds no layer of "
                         f"{'that module' if one else 'those modules'} through trtbuild.layers.planned (ReLUs, pools "
                         f"and other unplanned layers stay in the network's type); the modules that can be kept: "
                         f"{shown or 'none'}")

    def precision_of(self, module: str) -> str:
        """The precision `module` computes in: its kept precision, else the plan's."""
        return self.kept_precision(module) or self.precision

    @property
    def quantizes(self) -> bool:
        return self.precision in QUANTIZED_PRECISIONS

    def layer(self, module: str) -> LayerPlan:
        """The plan for the Conv/Linear `module`."""
        kept = self.kept_precision(module)
        if kept is not None:
            return LayerPlan(module, kept, False, reason=f"kept in {kept} by --keep")
        if not self.quantizes:
            return LayerPlan(module, self.precision, False, reason=f"{self.precision} build")
        calib = self.calibration
        weight = calib.weights.get(f"{module}.weight")
        if weight is None:
            raise ValueError(f"module {module} is not a Conv/Linear of the calibrated model '{calib.model}' (no "
                             f"{module}.weight in the calibration)")
        amax = calib.activations.get(f"{module}.input")
        if amax is None:
            return LayerPlan(module, "fp32", False, reason="its input was never seen during calibration (the "
                                                           "module did not run)")
        return LayerPlan(module, self.precision, True, float(amax), tuple(float(v) for v in weight))

    def output_amax(self, module: str) -> float | None:
        """amax of `module`'s output where it feeds a residual add (None if not recorded or not quantized)."""
        if not self.quantizes or self.kept_precision(module) is not None:
            return None
        return self.calibration.activations.get(f"{module}.output")

    def sdpa_amax(self, module: str, call: str = "sdpa") -> tuple[float, float, float] | None:
        """amax of the query, key and value of the attention call ``call`` (``sdpa``, ``sdpa_1``...) that the
        PyTorch `module` (``blocks.0.attn``) runs, as trtbuild.quant.record keys F.scaled_dot_product_attention's
        operands (``blocks.0.attn.sdpa.query``), or None when its matrix multiplies are not to be quantized
        (a non-quantized plan, `module` kept, or no calibration of the call)."""
        if not self.quantizes or self.kept_precision(module) is not None:
            return None
        acts = self.calibration.activations
        keys = [f"{module}.{call}.{which}" for which in ("query", "key", "value")]
        if any(k not in acts for k in keys):
            return None
        return tuple(float(acts[k]) for k in keys)

    def add_operands(self, add: str) -> tuple[AddInput, AddInput] | None:
        """Both inputs of the residual add `add` in PyTorch's operand order (key, amax, the Conv/Linear
        feeding it), or None when the add is not to be quantized (as :meth:`add_inputs`)."""
        amax = self.add_inputs(add)
        if amax is None:
            return None
        keys = self.calibration.adds[add]
        sources = self.calibration.add_sources.get(add) or [None, None]
        return tuple(AddInput(k, a, s) for k, a, s in zip(keys, amax, sources))

    def add_inputs(self, add: str) -> tuple[float, float] | None:
        """amax of both inputs of the residual add `add` (``layer1.0.add``), or None when the add is
        not to be quantized (not recorded, a non-quantized plan, or the add's module kept)."""
        if not self.quantizes or self.calibration is None or add not in self.calibration.adds:
            return None
        if self.kept_precision(add) is not None:  # the add, or a module containing it, is kept
            return None
        keys = self.calibration.adds[add]
        return tuple(float(self.calibration.activations[k]) for k in keys)

    def summary(self) -> str:
        """One line: how many Conv/Linear are quantized and which modules are kept."""
        probe = replace(self)  # its queries are not the builder's: they must not count as asked
        if not self.quantizes:
            kept = sorted({m for m in self.modules if probe.kept_precision(m)})
            return f"{self.precision} build; kept: {', '.join(kept) or 'none'}"
        layers = [k[: -len(".weight")] for k in self.calibration.weights]
        plans = [probe.layer(m) for m in layers]
        quantized = sum(p.quantized for p in plans)
        kept = [f"{p.module} ({p.precision})" for p in plans if not p.quantized]
        return (f"{self.precision}: {quantized} of {len(plans)} Conv/Linear quantized"
                + (f"; not quantized: {', '.join(kept)}" if kept else ""))
