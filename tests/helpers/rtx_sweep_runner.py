"""Runs sweep cases (tests/helpers/rtx_sweep.py) on the reference and on TensorRT-RTX and judges them.

Reference: a case is accepted when its construction raises no NetworkError, every output's shape
and dtype can be read, and build_serialized_network returns a plan; the plan is then run on inputs
of the optimization profile's opt shape, and the outputs must have the shapes and dtypes the
reference inferred. TensorRT-RTX: accepted when no add_* returns None, no error is logged (the CUDA
noise of a machine without a GPU aside), every output's shape and dtype can be read and the build
returns an engine. Builds are batched (one network holding many accepted cases, each with its own
inputs); a failing batch is split in halves until the failing cases are alone, so each verdict is
one case's own.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np
import torch

import trtbuild.reference as ref
from trtbuild.reference import NetworkError

from helpers.twin import no_rtx_kernel

_NOISE = re.compile(r"catchCudaError|CUDA driver version is insufficient")
_TORCH = {"FLOAT": torch.float32, "HALF": torch.float16, "BF16": torch.bfloat16, "INT32": torch.int32,
          "INT64": torch.int64, "BOOL": torch.bool, "INT8": torch.int8, "UINT8": torch.uint8,
          "FP8": torch.float8_e4m3fn, "E8M0": torch.float8_e8m0fnu,
          "FP4": torch.uint8}  # FP4: its packed bytes, two values a byte (helpers.refnet.TORCH_OF)
BATCH = 48  # cases per batched TensorRT-RTX build


class Rejected(Exception):
    """An add_* returned None (TensorRT-RTX's way of refusing a layer)."""


class _Net:
    """The network handed to a case: input names get a per-case prefix (so many cases can share a
    network), inputs are recorded (for optimization profiles), and an add_* returning None raises
    Rejected instead of failing later on None.get_output."""

    def __init__(self, network, prefix: str = ""):
        self._network, self._prefix, self.inputs = network, prefix, []

    def add_input(self, name, dtype, shape):
        t = self._network.add_input(self._prefix + name, dtype, shape)
        if t is None:
            raise Rejected("add_input returned None")
        self.inputs.append((self._prefix + name, tuple(shape)))
        return t

    def __getattr__(self, attr):
        value = getattr(self._network, attr)
        if not attr.startswith("add_"):
            return value

        def add(*args, **kwargs):
            layer = value(*args, **kwargs)
            if layer is None:
                raise Rejected(f"{attr} returned None")
            return layer
        return add


def profile_shapes(shape):
    return [tuple(v if d < 0 else d for d in shape) for v in (1, 2, 3)]


def _add_profile(builder, config, inputs):
    dynamic = [(n, s) for n, s in inputs if any(d < 0 for d in s)]
    if dynamic:
        profile = builder.create_optimization_profile()
        for name, shape in dynamic:
            profile.set_shape(name, *profile_shapes(shape))
        config.add_optimization_profile(profile)


@dataclass
class Verdict:
    accepted: bool
    message: str = ""
    outputs: list = field(default_factory=list)  # [(shape tuple, dtype name)]


def _random_input(shape, dtype: str, gen) -> torch.Tensor:
    if dtype == "BOOL":
        return torch.rand(shape, generator=gen) > 0.5
    if dtype in ("INT8", "INT32", "INT64", "UINT8"):
        return torch.randint(0 if dtype == "UINT8" else -5, 6, shape, generator=gen).to(_TORCH[dtype])
    return (torch.rand(shape, generator=gen) * 4 - 2).to(_TORCH[dtype])


STRONGLY_TYPED = 1 << int(ref.NetworkDefinitionCreationFlag.STRONGLY_TYPED)


def run_reference(case) -> Verdict:
    """The reference's verdict. Exceptions other than NetworkError propagate (a reference bug)."""
    from helpers.refnet import CapturingLogger

    logger = CapturingLogger()
    builder = ref.Builder(logger)
    network = builder.create_network(STRONGLY_TYPED)
    net = _Net(network)
    try:
        outs = case.build(ref, net)
        info = [(tuple(t.shape), t.dtype.name) for t in outs]
    except NetworkError as e:
        return Verdict(False, str(e))
    for t in outs:
        network.mark_output(t)
    config = builder.create_builder_config()
    _add_profile(builder, config, net.inputs)
    plan = builder.build_serialized_network(network, config)
    if plan is None:
        return Verdict(False, "; ".join(logger.errors) or "build_serialized_network returned None")
    _run_check(plan, network, net, outs, info, logger)
    return Verdict(True, outputs=info)


def _run_check(plan, network, net, outs, info, logger):
    """Run the reference engine at the profile's opt shapes (batch 2 where dim 0 is dynamic), or, where
    those shapes are refused at run time (TensorRT-RTX leaves some shape checks to run time, e.g. a
    dim that must be 1 to broadcast, or a scale's weight count), at its min or max shapes; each output
    must have the inferred dtype and static dims. An engine that runs at none of them is a failure."""
    from helpers.refnet import run_plan

    dtypes = {network.get_input(i).name: network.get_input(i).dtype.name for i in range(network.num_inputs)}
    errors = []
    for which in (1, 0, 2):
        gen = torch.Generator().manual_seed(0)
        feeds = {name: _random_input(profile_shapes(shape)[which], dtypes[name], gen) for name, shape in net.inputs}
        try:
            results = run_plan(plan, feeds, logger)
            break
        except NetworkError as e:
            errors.append(str(e))
            if not any(any(d < 0 for d in shape) for _, shape in net.inputs):
                raise
    else:
        raise AssertionError(f"the reference's engine runs at none of the profile's opt/min/max shapes: {errors}")
    for t, (shape, dtype) in zip(outs, info):
        got = results[t.name]
        if len(got.shape) != len(shape) or any(d >= 0 and g != d for g, d in zip(got.shape, shape)) \
                or got.dtype != _TORCH[dtype]:
            raise AssertionError(f"reference engine output {t.name!r} is {tuple(got.shape)} {got.dtype}, "
                                 f"but the network says {shape} {dtype}")


class RtxRunner:
    """TensorRT-RTX's verdicts for many cases, with batched builds."""

    def __init__(self, rtx, targets=("8.6",)):
        from trtbuild.engine.logging_bridge import make_logger
        from trtbuild.engine.rtx import set_targets

        self.rtx, self._set_targets, self.targets = rtx, set_targets, tuple(targets)
        self.logger = make_logger(rtx)
        self.builder = rtx.Builder(self.logger)
        self.flags = 1 << int(rtx.NetworkDefinitionCreationFlag.STRONGLY_TYPED)
        self.static_config = self._config()
        self.builds = 0

    def _config(self):
        config = self.builder.create_builder_config()
        self._set_targets(self.rtx, config, self.targets)
        return config

    def _errors_since(self, start: int) -> list[str]:
        return [m for m in self.logger.errors[start:] if not _NOISE.search(m)]

    def _define(self, case, network, prefix):
        """(outputs, info, error message or None) of one case defined in `network`."""
        net = _Net(network, prefix)
        start = len(self.logger.errors)
        outs, info, err = None, None, None
        try:
            outs = case.build(self.rtx, net)
            info = [(tuple(t.shape), t.dtype.name) for t in outs]
        except Rejected as e:
            err = str(e)
        except (RuntimeError, ValueError, TypeError, IndexError, AttributeError) as e:
            err = f"{type(e).__name__}: {e}"
        errors = self._errors_since(start)
        if errors:  # the logged reason first: an exception or None after it only says that it failed
            err = "; ".join(dict.fromkeys(errors)) + (f" ({err})" if err else "")
        return outs, info, net.inputs, err

    def verdicts(self, cases) -> list[Verdict]:
        out: list[Verdict | None] = [None] * len(cases)
        pending = []
        for i, case in enumerate(cases):
            network = self.builder.create_network(self.flags)
            _, info, _, err = self._define(case, network, "")
            if err:
                out[i] = Verdict(False, err)
            else:
                out[i] = Verdict(True, outputs=info)
                pending.append(i)
        for k in range(0, len(pending), BATCH):
            self._build([(i, cases[i]) for i in pending[k:k + BATCH]], out)
        return out

    def _build(self, items, out):
        network = self.builder.create_network(self.flags)
        inputs = []
        for i, case in items:
            outs, _, case_inputs, err = self._define(case, network, f"c{i}_")
            assert err is None, f"{case.desc}: defined once without error, now: {err}"
            inputs += case_inputs
            for t in outs:
                network.mark_output(t)
        config = self.static_config
        if any(any(d < 0 for d in s) for _, s in inputs):
            config = self._config()
            _add_profile(self.builder, config, inputs)
        start = len(self.logger.errors)
        plan = self.builder.build_serialized_network(network, config)
        self.builds += 1
        raw = self._errors_since(start)
        errors = no_rtx_kernel(raw)  # NonZero and NMS: TensorRT-RTX has no kernel, the rest of the build is judged
        if (plan is not None or raw) and not errors:
            return
        if len(items) == 1:
            out[items[0][0]] = Verdict(False, "build: " + ("; ".join(dict.fromkeys(errors)) or
                                                           "build_serialized_network returned None"))
            return
        half = len(items) // 2
        self._build(items[:half], out)
        self._build(items[half:], out)


@dataclass
class Tally:
    cases: int = 0
    dynamic: int = 0  # cases with a dynamic batch (dim 0 = -1, built with an optimization profile)
    both_accept: int = 0
    both_reject: int = 0
    stricter: int = 0  # reference rejects, RTX accepts, documented
    differences: int = 0

    def add(self, other: "Tally") -> None:
        for k in vars(self):
            setattr(self, k, getattr(self, k) + getattr(other, k))

    def __str__(self):
        return (f"{self.cases} cases ({self.dynamic} with a dynamic batch): {self.both_accept} both accept, "
                f"{self.both_reject} both reject, {self.stricter} documented reference-stricter, "
                f"{self.differences} differences")


def judge(cases, rtx_runner: RtxRunner, stricter) -> tuple[Tally, list[str]]:
    """Run every case on both sides; return the tally and one message per difference.
    `stricter(case, reference message)` returns the documentation a reference-only rejection
    follows, or None."""
    tally, problems = Tally(cases=len(cases), dynamic=sum(c.dynamic for c in cases)), []
    refs, crashes = [], {}
    for k, case in enumerate(cases):
        try:
            refs.append(run_reference(case))
        except Exception as e:  # noqa: BLE001 - a crash is a finding, reported with the case
            refs.append(None)
            crashes[k] = f"{case.desc}: the reference raised {type(e).__name__}, not NetworkError: {e}"
    for k, (case, r, x) in enumerate(zip(cases, refs, rtx_runner.verdicts(cases))):
        if r is None:
            tally.differences += 1
            verdict = 'accepts it' if x.accepted else 'rejects it: ' + x.message
            problems.append(crashes[k] + f" [TensorRT-RTX {verdict}]")
            continue
        if r.accepted and x.accepted:
            tally.both_accept += 1
            if r.outputs != x.outputs:
                tally.differences += 1
                problems.append(f"{case.desc}: both accept, but the reference infers {r.outputs} "
                                f"and TensorRT-RTX {x.outputs}")
        elif not r.accepted and not x.accepted:
            tally.both_reject += 1
        elif r.accepted:
            tally.differences += 1
            problems.append(f"{case.desc}: TensorRT-RTX rejects it ({x.message}) but the reference accepts it "
                            f"(outputs {r.outputs})")
        elif stricter(case, r.message):
            tally.stricter += 1
        else:
            tally.differences += 1
            problems.append(f"{case.desc}: the reference rejects it ({r.message}) but TensorRT-RTX accepts it "
                            f"(outputs {x.outputs})")
    return tally, problems


__all__ = ["RtxRunner", "Tally", "Verdict", "judge", "run_reference", "np"]
