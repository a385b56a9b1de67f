"""How a model's parity is checked, as one frozen value: ParityOptions (the inputs and the judging),
next to BuildOptions (the engine built in memory).

    report = check_model_parity("resnet18", trt, options=BuildOptions(precision="fp16"),
                                parity=ParityOptions(seed=3, distribution="normal", rtol=1e-2))

check_model_parity's keyword arguments of the same names are a shorthand for its fields. A
ParityOptions is checked when it is made, so that a bad value is refused in one sentence before
any engine is built or any input made.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from dataclasses import dataclass

from .compare import check_tolerance
from .debug_tensors import VIA_DEBUG, check_layerwise_via

DISTRIBUTIONS = ("uniform", "normal", "large")


def check_input_values(value_range, distribution: str = "uniform", large_scale: float = 1e4) -> tuple[float, float]:
    """(lo, hi) of `value_range` if the inputs it describes can be made: finite lo < hi, a known
    distribution and a positive finite scale for "large"; ValueError in one sentence otherwise."""
    lo, hi = (float(v) for v in value_range)
    if not (math.isfinite(large_scale) and large_scale > 0):
        raise ValueError(f"large_scale (--scale) must be a positive finite number, got {large_scale}")
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise ValueError(f"value range (--range) must be finite, got [{lo}, {hi}]")
    if not lo < hi:
        raise ValueError(f"value range needs lo < hi, got [{lo}, {hi}]")
    if distribution not in DISTRIBUTIONS:
        raise ValueError(f"distribution {distribution!r} is not one of {', '.join(DISTRIBUTIONS)}")
    return lo, hi


@dataclass(frozen=True)
class ParityOptions:
    """The seeded inputs (seed, value_range: None for the model's own, distribution, large_scale: see
    make_inputs), the tolerances (atol, rtol: None for the precision's defaults, the default atol
    relative to each tensor's largest |expected|), whether NaN/Inf may pass where PyTorch has them
    too (allow_nonfinite) and the layerwise mode (layerwise, layerwise_via: see check_model_parity)."""

    seed: int = 0
    value_range: tuple[float, float] | None = None
    distribution: str = "uniform"
    large_scale: float = 1e4
    atol: float | None = None
    rtol: float | None = None
    allow_nonfinite: bool = False
    layerwise: bool = False
    layerwise_via: str = VIA_DEBUG

    def __post_init__(self):
        def put(name, value):
            object.__setattr__(self, name, value)

        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise ValueError(f"parity option seed must be an integer, got {self.seed!r}")
        for name in ("allow_nonfinite", "layerwise"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"parity option {name} must be True or False, got {getattr(self, name)!r}")
        if isinstance(self.large_scale, bool) or not isinstance(self.large_scale, numbers.Real):
            raise ValueError(f"parity option large_scale must be a number, got {self.large_scale!r}")
        if self.value_range is not None:
            try:
                lo, hi = (float(v) for v in self.value_range)
            except (TypeError, ValueError):
                raise ValueError(f"parity option value_range must be (lo, hi) numbers, got {self.value_range!r}") \
                    from None
            put("value_range", (lo, hi))
        check_input_values(self.value_range or (-1.0, 1.0), self.distribution, self.large_scale)
        put("large_scale", float(self.large_scale))
        for name in ("atol", "rtol"):
            if getattr(self, name) is not None:
                put(name, check_tolerance(name, getattr(self, name)))
        check_layerwise_via(self.layerwise_via)

    def replace(self, **changes) -> "ParityOptions":
        """A copy with `changes` (checked again)."""
        return dataclasses.replace(self, **changes)
