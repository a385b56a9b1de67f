"""The cross-check: the reference backend must agree with NVIDIA's real builder (TensorRT-RTX).

    plan = build_plan(trt, spec, weights=wm, cross_check=True)
    plan.info.cross_check      # {"rtx_version": ..., "targets": [...], "outputs": [...], "tensors_compared": ...}

The same definition is run on the reference backend and on TensorRT-RTX, and both networks are
built (TensorRT-RTX needs no GPU to build). They must agree on acceptance (a network the
reference accepts must build), on the names of the marked outputs, and on the shape and dtype of
every output and of every other tensor both networks name alike (dynamic dimensions included).
The first difference, in network order, raises CrossCheckError naming the tensor and the layer
that produces it. The reference is the side whose plan build_plan returns when `trt` is the
reference; with TensorRT-RTX or TensorRT the plan is that backend's.
"""

from __future__ import annotations

import mmap
import re
import tempfile
import time
from dataclasses import dataclass, field
from types import ModuleType

from trtbuild.backend import BackendError, backend_name, is_reference, is_rtx, load_trt, product_name

from .build import serialize_network, tensors_by_name
from .errors import BuildError, CrossCheckError
from .rtx import target_list


@dataclass
class CrossCheckResult:
    """What the cross-check compared and found equal."""

    rtx_version: str
    targets: list[str]
    outputs: list[dict]
    tensors_compared: int
    rtx_build_seconds: float
    rtx_engine_bytes: int
    notes: list[str] = field(default_factory=list)
    #: the tensors both networks mark with mark_debug, in network order
    debug_tensors: list[str] = field(default_factory=list)
    #: the TensorRT-RTX plan itself (not part of to_dict; a SpilledPlan when it is a by-product of
    #: another backend's build); build_plan completes its `.info`
    rtx_plan: object = field(default=None, repr=False, compare=False)

    def summary(self) -> str:
        return (f"built and cross-checked by TensorRT-RTX {self.rtx_version} for {target_list(self.targets)}: "
                f"{len(self.outputs)} output(s)"
                f"{f', {len(self.debug_tensors)} debug tensor mark(s)' if self.debug_tensors else ''} "
                f"and {self.tensors_compared} tensors agree with the reference "
                f"(engine {self.rtx_engine_bytes / 2**20:.1f} MiB, built in {self.rtx_build_seconds:.1f} s)")

    def to_dict(self) -> dict:
        return {"rtx_version": self.rtx_version, "targets": list(self.targets), "outputs": self.outputs,
                "tensors_compared": self.tensors_compared, "rtx_build_seconds": round(self.rtx_build_seconds, 3),
                "rtx_engine_bytes": self.rtx_engine_bytes, "notes": list(self.notes),
                **({"debug_tensors": list(self.debug_tensors)} if self.debug_tensors else {})}


class SpilledPlan(mmap.mmap):
    """A plan moved to an unnamed temporary file and memory-mapped read-only: bytes-like (len,
    slicing, buffer protocol: save_engine and sha256 take it) with the plan's `.info`; it takes
    no memory until read, and its file goes when it is garbage collected."""

    info: dict


def spill(plan):
    """`plan` as a SpilledPlan, or `plan` itself if the temporary file cannot be written."""
    try:
        with tempfile.TemporaryFile(prefix="trtbuild-", suffix=".engine") as f:
            f.write(memoryview(plan))
            f.flush()
            spilled = SpilledPlan(f.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError):  # no space, no temp dir, an empty plan: keep it in memory
        return plan
    spilled.info = plan.info
    return spilled


def _dtype(t) -> str:
    dt = t.dtype
    return getattr(dt, "name", str(dt).split(".")[-1])


def _shape(t) -> tuple:
    return tuple(int(d) for d in t.shape)


def _layer_kind(layer) -> str:
    """POOLING, CONVOLUTION, ...: ILayer.type, the LayerType (get_layer returns an ILayer on every backend)."""
    kind = getattr(layer, "type", None)
    return getattr(kind, "name", str(kind).split(".")[-1])


def _tensors_in_order(network) -> list[tuple[object, object]]:
    """[(tensor, producing layer or None for inputs)] in network order, each name once."""
    return [(t, network.get_layer(li) if li >= 0 else None) for li, t in tensors_by_name(network).values()]


def _where(layer) -> str:
    return "a network input" if layer is None else f"layer '{layer.name}' ({_layer_kind(layer)})"


#: TensorRT's automatic tensor names count layers ("(Unnamed Layer* 12) [Pooling]_output"), so
#: they only pair up between networks whose layer lists are the same.
_AUTOMATIC_NAME = re.compile(r"\(Unnamed Layer\* \d+\)")


def _duplicates(network, side: str) -> list[str]:
    names = [network.get_input(i).name for i in range(network.num_inputs)]
    for li in range(network.num_layers):
        layer = network.get_layer(li)
        names += [layer.get_output(j).name for j in range(layer.num_outputs)]
    seen, twice = set(), []
    for n in names:
        if n in seen and n not in twice:
            twice.append(n)
        seen.add(n)
    return [f"tensor name '{n}' is used by more than one tensor on {side}, so the networks cannot be compared "
            "by name" for n in twice]


def _layer_names(network) -> list[str]:
    return [network.get_layer(i).name for i in range(network.num_layers)]


def debug_marks(network) -> list[str]:
    """Names of the tensors marked with mark_debug, in network order."""
    return [t.name for t, _ in _tensors_in_order(network) if network.is_debug_tensor(t)]


def compare_networks(reference_network, rtx_network, rtx_label: str = "TensorRT-RTX") -> tuple[list[str], int, str]:
    """Compare two defined networks: ([differences, first in network order], tensors compared, note).

    Compared: the marked outputs' names (in order), the debug tensors' names (mark_debug); duplicate tensor names on
    either side are differences. Where both networks have the same layers (names, in order), every tensor of one
    must exist in the other with the same shape and dtype. Where they differ by design (rednet's
    involution: a plugin on the reference, native layers on TensorRT-RTX), the outputs and every
    tensor that both name alike (automatic names excepted) are compared, and `note` says so."""
    differences = _duplicates(reference_network, "the reference") + _duplicates(rtx_network, rtx_label)
    ref_out = [reference_network.get_output(i).name for i in range(reference_network.num_outputs)]
    rtx_out = [rtx_network.get_output(i).name for i in range(rtx_network.num_outputs)]
    same_layers = _layer_names(reference_network) == _layer_names(rtx_network)
    note = "" if same_layers else (
        f"the networks differ in structure ({reference_network.num_layers} layers on the reference, "
        f"{rtx_network.num_layers} in {rtx_label}): outputs and tensors named alike were compared")
    rtx_tensors = {t.name: (t, layer) for t, layer in _tensors_in_order(rtx_network)}
    ref_names = set()
    compared = 0
    for t, layer in _tensors_in_order(reference_network):
        ref_names.add(t.name)
        other = rtx_tensors.get(t.name)
        if other is None:
            if t.name in ref_out or same_layers:
                differences.append(f"tensor '{t.name}' of {_where(layer)} exists on the reference but not in the "
                                   f"{rtx_label} network")
            continue
        if not same_layers and _AUTOMATIC_NAME.match(t.name):
            continue
        compared += 1
        try:
            theirs = (_shape(other[0]), _dtype(other[0]))
        except RuntimeError as e:  # TensorRT-RTX could not infer the tensor's shape
            differences.append(f"tensor '{t.name}' of {_where(layer)}: the reference infers {_shape(t)} "
                               f"{_dtype(t)} but {rtx_label} cannot ({e})")
            continue
        ours = (_shape(t), _dtype(t))
        if ours != theirs:
            differences.append(f"tensor '{t.name}' of {_where(layer)} is {ours[0]} {ours[1]} on the reference but "
                               f"{theirs[0]} {theirs[1]} in {rtx_label}")
    if same_layers:
        differences += [f"tensor '{n}' of {_where(layer)} exists in the {rtx_label} network but not on the reference"
                        for n, (_, layer) in rtx_tensors.items() if n not in ref_names]
    if ref_out != rtx_out:
        differences.append(f"the marked outputs differ: reference {ref_out}, {rtx_label} {rtx_out}")
    ref_debug, rtx_debug = debug_marks(reference_network), debug_marks(rtx_network)
    if ref_debug != rtx_debug:
        differences.append(f"the debug tensors (mark_debug) differ: reference {ref_debug}, {rtx_label} {rtx_debug}")
    return differences, compared, note


def _load_rtx() -> ModuleType:
    try:
        return load_trt("tensorrt-rtx")
    except BackendError as e:
        raise CrossCheckError(f"the cross-check needs TensorRT-RTX: {e}") from None


def _build(trt, on, serialize: dict):
    """(defined network, plan or None, the exception that rejected it or None, seconds) of one backend."""
    start = time.perf_counter()
    try:
        defined = on(trt)
    except Exception as e:  # noqa: BLE001 - rejected while defining; one side only is a disagreement to report
        return None, None, e, time.perf_counter() - start
    try:
        plan = serialize_network(trt, defined.builder, defined.network, defined.logger, **serialize)
    except BuildError as e:
        return defined, None, e, time.perf_counter() - start
    return defined, plan, None, time.perf_counter() - start


def cross_check_build(trt: ModuleType, on, serialize: dict):
    """Define and build with `on` (build.definition_step) on the reference and on TensorRT-RTX
    (and on `trt` if it is real TensorRT); return (plan of `trt`, its DefinedNetwork,
    CrossCheckResult). Raises CrossCheckError on any disagreement, BuildError if both reject."""
    rtx = trt if is_rtx(trt) else _load_rtx()
    from trtbuild import reference

    # no timing cache is written before the comparison has passed
    # TensorRT-RTX refuses version/hardware compatibility: the twin of another backend's build compares networks only
    rtx_opts = dict(serialize) if is_rtx(trt) else dict(serialize, timing_cache=None, progress=False, compat=None)
    ref_opts = dict(serialize, timing_cache=None, targets=None,
                    progress=serialize.get("progress") if is_reference(trt) else False)
    # TensorRT-RTX first: its builder's working memory (about twice the weights) is then not on
    # top of the reference plan; the reference plan is made next to TensorRT-RTX's engine instead
    rtx_defined, rtx_plan, rtx_error, rtx_seconds = _build(rtx, on, rtx_opts)
    if rtx_plan is not None and not is_rtx(trt):  # a by-product: out of memory while the next plan is made
        rtx_plan = spill(rtx_plan)
    ref_defined, ref_plan, ref_error, _ = _build(reference, on, ref_opts)
    label = product_name(rtx)
    if ref_plan is None and rtx_plan is None:  # both agree it is wrong: the error of the backend asked for
        raise rtx_error if is_rtx(trt) else ref_error
    if rtx_plan is None:
        raise CrossCheckError(f"cross-check: the reference builds the network but {label} rejects it ({rtx_error})")
    if ref_plan is None:
        raise CrossCheckError(f"cross-check: {label} builds the network but the reference rejects it ({ref_error})")
    differences, compared, note = compare_networks(ref_defined.network, rtx_defined.network, label)
    if differences:
        more = f" (and {len(differences) - 1} more difference(s))" if len(differences) > 1 else ""
        raise CrossCheckError(f"cross-check against {label}: {differences[0]}{more}")
    result = CrossCheckResult(
        rtx_version=str(rtx.__version__), targets=list(rtx_plan.info.targets or []),
        outputs=rtx_plan.info["outputs"], tensors_compared=compared, rtx_build_seconds=rtx_seconds,
        rtx_engine_bytes=len(rtx_plan), rtx_plan=rtx_plan, notes=[note] if note else [],
        debug_tensors=debug_marks(ref_defined.network))
    if is_reference(trt):
        if serialize.get("timing_cache") is not None:  # the comparison passed: now build with the cache
            ref_plan = serialize_network(reference, ref_defined.builder, ref_defined.network, ref_defined.logger,
                                         **dict(ref_opts, timing_cache=serialize["timing_cache"]))
        return ref_plan, ref_defined, result
    if is_rtx(trt):
        return rtx_plan, rtx_defined, result
    defined = on(trt)  # real TensorRT: its own build, checked like any other
    plan = serialize_network(trt, defined.builder, defined.network, defined.logger, **dict(serialize, targets=None))
    result.notes.append(f"engine built by {backend_name(trt)}; the cross-check compared the reference with {label}")
    return plan, defined, result
