"""Twin networks: every call made on a reference network is made on a TensorRT-RTX network too.

The `refnet` fixture (tests/conftest.py) hands out a `TwinRefNet`: a RefNet whose `network` is a
`TwinNetwork`. Each INetworkDefinition call (`add_*`, `mark_output`, ...), each layer attribute set
(`layer.stride_nd = ...`), each layer method (`get_output`, `set_input`) and each tensor rename is
applied to both networks; arguments are translated for TensorRT-RTX (twin tensors to their RTX
tensor, reference enums to RTX enums by name, reference Weights to RTX Weights, numpy arrays as
they are, kept alive until the test ends because TensorRT reads them by pointer at build time).
What the test gets back is always the reference's answer, so the tests read exactly as before.

The judgement (`Disagreement`, an AssertionError, fails the test):

- the reference raises NetworkError (at add time, on an attribute set or a shape query): RTX must
  reject the same construction: its call returns None or logs an error, a shape query of the
  affected tensors raises, or a build with them marked as outputs fails;
- the reference logs an error for a call and ignores it, as TensorRT does with a misused API call
  (a rename to a name in use, add_input with a taken name): RTX must log an error for it (or raise);
  both networks stay valid;
- the reference's build_serialized_network returns None: RTX must have rejected something, or fail
  its own build;
- the reference accepts (a build succeeds, or the test ends): RTX must have logged no error, its
  build must succeed, and every output of every layer (and every network input) must have the
  same shape and dtype on both; attribute values read by a test (defaults such as
  `layer.channel_axis`) must be equal too.

Where RTX accepts what TensorRT's documentation forbids, the reference may stay stricter: such
rejections are listed in REFERENCE_STRICTER with the documentation they follow, matched against the
reference's error message. Values are never compared: nothing here can run an RTX engine.
"""

from __future__ import annotations

import enum
import os
import re
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable

import numpy as np

import trtbuild.reference as ref
from trtbuild.reference import NetworkError

from helpers.refnet import RefNet, RtxNet


class Disagreement(AssertionError):
    """The reference and TensorRT-RTX disagree about a construction."""


@dataclass(frozen=True)
class Stricter:
    """A rejection of the reference that TensorRT-RTX 1.7 does not make, kept because TensorRT's
    documentation forbids the construction. `pattern` is searched in the reference's message;
    `example(network, trt)` makes the construction, inputs included (tests/reference/test_twin_harness.py
    checks, for each entry, that the reference still rejects it and TensorRT-RTX still accepts it, so the
    list cannot go stale)."""

    pattern: str
    docs: str
    example: Callable


#: Rejections where the reference is deliberately stricter than TensorRT-RTX 1.7, quoting the
#: TensorRT 10/11 documentation that forbids them (also listed in docs/rtx_differences.md).
REFERENCE_STRICTER: list[Stricter] = [
    Stricter(
        r"TensorRT's kernel needs alpha and beta tensors for an N-D output",
        "TensorRT's Fill operator: LINSPACE gives output[a_0, ..., a_n] = alpha + beta[0..n] . [a_0..a_n], beta one "
        "delta per dim, and \"input2 has shape [n] if the operation is LINSPACE\"; the attribute beta is one number "
        "(IFillLayer::setBeta(double)), and TensorRT's LINSPACE kernel asserts \"Alpha and beta tensor should be set "
        "when output an ND tensor\" (TensorRT 7/8, NVIDIA's trt-samples cookbook). TensorRT-RTX 1.7 builds it",
        lambda network, trt: network.add_fill((2, 3), trt.FillOperation.LINSPACE,
                                              trt.DataType.FLOAT).get_output(0).shape),
    Stricter(
        r"INT8, a quantized type",
        'DataType.INT8: "Signed 8-bit integer representing a quantized floating-point value." (TensorRT 10 and 11); '
        'ITensor.dynamic_range: "Deprecated in TensorRT 10.1. Superseded by explicit quantization." Its scale comes '
        "from a Q/DQ pair (add_dequantize makes the float values), so float-computing layers refuse INT8 there",
        lambda network, trt: network.add_activation(network.add_input("x", trt.int8, (2, 3)),
                                                    trt.ActivationType.LEAKY_RELU)),
    Stricter(
        r"minimum of 3 dimensions",
        'IScaleLayer: "The input tensor for this layer is required to have a minimum of 3 dimensions."; '
        'add_scale / add_scale_nd: "This tensor is required to have a minimum of 3 dimensions."',
        lambda network, trt: network.add_scale_nd(network.add_input("x", trt.float32, (4, 5)), trt.ScaleMode.UNIFORM,
                                                  None, np.array([2.0], np.float32), None, 1)),
    Stricter(
        r"does not support boolean and uint8 types",
        'IConstantLayer: "Note: This layer does not support boolean and uint8 types."',
        lambda network, trt: network.add_constant((2,), np.array([True, False]))),
    Stricter(
        r"The shape of scale and bias must be the same",
        'add_normalization: "The shape of scale and bias must be the same, and must have the same rank and be '
        'unidirectionally broadcastable to the shape of input." (add_normalization_v2: "The shapes of scale and bias '
        'must be the same, ...")',
        lambda network, trt: network.mark_output(network.add_normalization_v2(
            network.add_input("x", trt.float32, (1, 5, 6)), network.add_input("scale", trt.float32, (1, 5, 1)),
            network.add_input("bias", trt.float32, (1, 1, 1)), 0b11).get_output(0))),
    # -- TopK ---------------------------------------------------------------------------------------------------
    Stricter(
        r"must be one of the last four dimensions",
        'add_topk: "Currently axes must specify exactly one dimension, and it must be one of the last four '
        'dimensions." (TensorRT 10 and 11); the TopK operator page: "axes the axis to sample; must be one of the '
        'last four dimensions."',
        lambda network, trt: tuple(network.add_topk(network.add_input("x", trt.float32, (2, 2, 2, 2, 3)),
                                                    trt.TopKOperation.MAX, 1, 1).get_output(0).shape)),
    Stricter(
        r"requires the same shape in both branches",
        'IIfConditional: "The type and shape of each output tensor from the true/false subgraphs are the same, '
        'except that the shapes are allowed to differ if the condition is a build-time constant." (TensorRT 11.4; '
        "TensorRT-RTX gives -1 where the static dims differ)",
        lambda network, trt: _if_with_outputs(network, trt, (2, 3), (1, 3))),
    Stricter(
        r"a reverse iterator counts from the COUNT trip limit",
        'ILoop.add_iterator / IIteratorLayer.reverse: "For reverse=true, this is equivalent to add_gather(tensor, '
        'M-1-I, 0) where M is the trip count computed from TripLimits of kind COUNT." (TensorRT 10 and 11); a loop '
        "with only a WHILE limit has no such M",
        lambda network, trt: _while_loop_reverse_iterator(network, trt)),
]


@dataclass(frozen=True)
class NoRtxKernel:
    """A layer type TensorRT 10/11 documents and builds that TensorRT-RTX 1.7 defines (add_*, shapes, dtypes)
    but cannot build: its builder fails with "[<label>] has no runners that implement it" for every target. The
    reference accepts and runs it (the rule's exception: real TensorRT accepts it); the twin still compares
    every shape and dtype, and accepts that one build failure. `example(network, trt)` makes such a network;
    tests check that TensorRT-RTX still refuses it (tests/reference/test_layers_non_zero.py)."""

    label: str
    docs: str
    example: Callable
    onnx_op: str = ""  # the ONNX operator TensorRT-RTX's parser imports as this layer (its layer is named after it)


#: Layer types with no TensorRT-RTX 1.7 kernel (data-dependent shapes; also listed in docs/rtx_differences.md).
RTX_NO_KERNEL: list[NoRtxKernel] = [
    NoRtxKernel(
        "NonZero", 'INonZeroLayer (TensorRT 10 and 11): "Computes the indices of the input tensor where the value is '
        'non-zero. ... The output shape is always {D, C}"; TensorRT\'s ONNX operator support lists NonZero',
        lambda network, trt: network.mark_output(network.add_non_zero(
            network.add_input("x", trt.float32, (3, 4))).get_output(0))),
    NoRtxKernel(
        "NMS", 'INMSLayer (TensorRT 10 and 11): "A non-maximum suppression layer ... This layer implements NMS per '
        'batch item and per class"; TensorRT\'s ONNX operator support lists NonMaxSuppression',
        lambda network, trt: network.mark_output(network.add_nms(
            network.add_input("b", trt.float32, (1, 5, 4)), network.add_input("s", trt.float32, (1, 5, 2)),
            network.add_input("m", trt.int32, ())).get_output(0)), "NonMaxSuppression"),
]


def no_rtx_kernel(errors: list[str]) -> list[str]:
    """`errors` less TensorRT-RTX's "has no runners" failures of the RTX_NO_KERNEL layer types."""
    labels = "|".join(re.escape(k.label) for k in RTX_NO_KERNEL)
    ops = "|".join(re.escape(k.onnx_op) for k in RTX_NO_KERNEL if k.onnx_op)
    pattern = rf"(\[({labels})\]|/({ops})_\d+) has no runners that implement it"
    return [e for e in errors if not re.search(pattern, e)]



def _while_loop_reverse_iterator(network, trt):
    """A WHILE loop (i < 3) summing the rows of x read by a reverse iterator."""
    def const(value):
        arr = np.array(value, np.int32)
        return network.add_constant(arr.shape, arr).get_output(0)

    loop = network.add_loop()
    i = loop.add_recurrence(const(0))
    loop.add_trip_limit(network.add_elementwise(i.get_output(0), const(3), trt.ElementWiseOperation.LESS)
                        .get_output(0), trt.TripLimit.WHILE)
    i.set_input(1, network.add_elementwise(i.get_output(0), const(1), trt.ElementWiseOperation.SUM).get_output(0))
    acc = loop.add_recurrence(const([0, 0]))
    row = loop.add_iterator(network.add_input("x", trt.int32, (3, 2)), 0, True).get_output(0)
    acc.set_input(1, network.add_elementwise(acc.get_output(0), row, trt.ElementWiseOperation.SUM).get_output(0))
    network.mark_output(loop.add_loop_output(acc.get_output(0), trt.LoopOutput.LAST_VALUE).get_output(0))


def _if_with_outputs(network, trt, true_shape, false_shape):
    """An if-conditional selecting between two inputs of the given shapes."""
    cond = network.add_if_conditional()
    cond.set_condition(network.add_input("c", trt.bool, ()))
    out = cond.add_output(cond.add_input(network.add_input("x", trt.float32, true_shape)).get_output(0),
                          cond.add_input(network.add_input("z", trt.float32, false_shape)).get_output(0))
    network.mark_output(out.get_output(0))

#: RTX logs a CUDA error alongside most errors on a machine without a GPU; it is noise here.
_NOISE = re.compile(r"catchCudaError|CUDA driver version is insufficient")


def stricter_entry(message: str) -> Stricter | None:
    return next((s for s in REFERENCE_STRICTER if re.search(s.pattern, message)), None)


class Twin:
    """The pair of networks and the running verdict."""

    def __init__(self, refnet: RefNet, rtxnet: RtxNet):
        self.refnet, self.rtxnet = refnet, rtxnet
        self.rtx = rtxnet.trt
        self.pairs: list[tuple[object, object, str]] = []  # (reference layer, RTX layer or None, call)
        self.rtx_errors: list[str] = []  # RTX rejections seen where the reference raised nothing
        self.ref_rejected = False  # the reference rejected a construction (NetworkError or failed build)
        self.built = False
        self.exempted: list[tuple[str, Stricter]] = []
        self._keep: list = []  # arrays RTX reads by pointer at build time

    # -- translation -------------------------------------------------------------------------
    def to_ref(self, v):
        if isinstance(v, (TwinTensor, TwinLayer)):
            return v.ref
        if type(v) in (list, tuple):
            return type(v)(self.to_ref(x) for x in v)
        return v

    def to_rtx(self, v):
        rtx = self.rtx
        if isinstance(v, (TwinTensor, TwinLayer)):
            return v.rtx
        if isinstance(v, enum.Enum) and type(v).__module__.startswith("trtbuild.reference"):
            return getattr(getattr(rtx, type(v).__name__), v.name)
        if isinstance(v, ref.Weights):
            arr = np.ascontiguousarray(v._array)
            self._keep.append(arr)
            return rtx.Weights(self.to_rtx(v.dtype), arr.ctypes.data, arr.size)
        if isinstance(v, np.ndarray):
            self._keep.append(v)
            return v
        if isinstance(v, (list, tuple)):
            items = [self.to_rtx(x) for x in v]
            return items if isinstance(v, list) else tuple(items)
        return v

    @staticmethod
    def plain(v):
        """An RTX or reference value in comparable form: enums by name, Dims as tuples."""
        if hasattr(type(v), "__members__"):  # a Python or a pybind11 enum
            return v.name
        if v is None or isinstance(v, (bool, int, float, str)):
            return v
        if hasattr(v, "is_network_input") and hasattr(v, "name"):  # a tensor attribute (update_lengths): its name
            return f"tensor {v.name}"
        try:
            return tuple(Twin.plain(x) for x in v)
        except TypeError:
            return v

    # -- RTX's errors ------------------------------------------------------------------------
    @contextmanager
    def capture(self):
        """Collect the RTX errors logged inside the block (CUDA noise dropped) into the yielded list."""
        log = self.rtxnet.logger
        start = len(log.errors)
        found: list[str] = []
        try:
            yield found
        finally:  # RTX's own messages first: they say why, an exception raised after them only that it failed
            found[0:0] = [m for m in log.errors[start:] if not _NOISE.search(m)]

    def rtx_do(self, fn, what: str):
        """Run an RTX call while the reference accepted the same call; errors are remembered."""
        result, errs = self.call(fn)
        if errs:
            self.rtx_errors.append(f"{what}: {errs[0]}")
        return result

    def ref_logged(self, fn):
        """(fn()'s result, the errors the reference logged meanwhile): a misused API call (a rename to a name
        in use, add_input with a taken name) is refused the TensorRT way, an error logged and no effect."""
        log = self.refnet.logger
        start = len(log.errors)
        result = fn()
        return result, log.errors[start:]

    def refused_on_both(self, what: str, ref_message: str, rtx_fn):
        """The reference logged `ref_message` for `what`: RTX must refuse it too (log an error or raise); its
        result is returned. Neither side's network is broken by such a refusal."""
        result, errs = self.call(rtx_fn) if rtx_fn is not None else (None, ["no RTX twin"])
        if not errs:
            raise Disagreement(f"the reference refuses {what} ({ref_message}) but TensorRT-RTX "
                               f"{self.rtx.__version__} accepts it")
        self.audit(what, ref_message, errs[0])
        return result

    def call(self, fn):
        """(fn()'s result or None, the RTX errors it logged or raised)."""
        with self.capture() as errs:
            try:
                result = fn()
            except (RuntimeError, TypeError, ValueError, IndexError) as e:
                errs.append(f"{type(e).__name__}: {e}")
                result = None
        return result, errs

    def shape_errors(self, tensors) -> list[str]:
        """Why RTX cannot give the shape or dtype of these tensors (empty: it can)."""
        out = []
        for t in tensors:
            if t is None:
                continue
            with self.capture() as errs:
                try:
                    tuple(t.shape), t.dtype
                except RuntimeError as e:
                    errs.append(f"RuntimeError: {e}")
            out += errs
        return out

    def build_errors(self, tensors) -> list[str]:
        """Mark `tensors` as RTX outputs (those not yet marked), build, unmark; the build's errors."""
        net = self.rtxnet.network
        added = [t for t in tensors if t is not None and not t.is_network_output]
        for t in added:
            net.mark_output(t)
        try:
            with self.capture() as errs:
                plan = self.rtxnet.builder.build_serialized_network(net, self.rtxnet.config)
            return errs or ([] if plan is not None else ["build_serialized_network returned None"])
        finally:
            for t in added:
                net.unmark_output(t)

    def expect_rejected(self, what: str, error: NetworkError, rtx_fn, tensors_of):
        """The reference raised `error` for `what`: RTX must reject it too. `rtx_fn` performs the
        same operation on RTX; `tensors_of(result)` lists the RTX tensors it affects."""
        self.ref_rejected = True
        result, errs = self.call(rtx_fn)
        if not errs and result is None and what.startswith("add_"):
            errs.append("add_* returned None")
        if not errs:
            tensors = tensors_of(result)
            errs = self.shape_errors(tensors) or self.build_errors(tensors)
        if errs:
            self.audit(what, str(error), errs[0])
            return
        self.unexpectedly_accepted(what, str(error))

    def audit(self, what: str, ref_message: str, rtx_message: str):
        """With TRTBUILD_TWIN_AUDIT=<file>, append each agreed rejection (to review RTX's reasons)."""
        path = os.environ.get("TRTBUILD_TWIN_AUDIT")
        if path:
            with open(path, "a") as f:
                f.write(f"{os.environ.get('PYTEST_CURRENT_TEST', '?').split(' ')[0]}\n  {what}\n"
                        f"  reference: {ref_message}\n  rtx: {rtx_message}\n")

    def unexpectedly_accepted(self, what: str, ref_message: str):
        entry = stricter_entry(ref_message)
        if entry is not None:
            self.exempted.append((what, entry))
            return
        raise Disagreement(f"the reference rejects {what} ({ref_message}) but TensorRT-RTX "
                           f"{self.rtx.__version__} accepts it")

    # -- whole-network comparison ------------------------------------------------------------
    def compare_tensor(self, r, x, where: str):
        """Shape and dtype of reference tensor `r` and RTX tensor `x` must be equal."""
        rs, rd = tuple(r.shape), r.dtype.name
        if x is None:
            raise Disagreement(f"{where}: the reference gives {rs} {rd}; TensorRT-RTX rejected the layer "
                               f"({'; '.join(self.rtx_errors) or 'add_* returned None'})")
        with self.capture() as errs:
            try:
                xs, xd = tuple(x.shape), x.dtype.name
            except RuntimeError as e:
                errs.append(str(e))
        if errs:
            raise Disagreement(f"{where}: the reference gives {rs} {rd}; TensorRT-RTX cannot infer it: {errs[0]}")
        if (rs, rd) != (xs, xd):
            raise Disagreement(f"{where}: the reference gives {rs} {rd}, TensorRT-RTX {xs} {xd}")

    def compare_all(self):
        """Every network input and every output of every layer, in the order they were added."""
        rnet, xnet = self.refnet.network.ref, self.rtxnet.network
        for i in range(rnet.num_inputs):
            self.compare_tensor(rnet.get_input(i), xnet.get_input(i), f"input {rnet.get_input(i).name!r}")
        for k, (rl, xl, call) in enumerate(self.pairs):
            if xl is not None and xl.num_outputs != rl.num_outputs:
                raise Disagreement(f"layer {k} ({call}): {rl.num_outputs} outputs vs RTX {xl.num_outputs}")
            for j in range(rl.num_outputs):
                self.compare_tensor(rl.get_output(j), None if xl is None else xl.get_output(j),
                                    f"layer {k} ({call}) output {j}")

    def build(self):
        """The reference build (what the test sees) and the RTX build, judged together."""
        self.built = True
        plan = self.refnet.builder.build_serialized_network(self.refnet.network.ref, self.refnet.config)
        if self.ref_rejected:  # the RTX network still holds the construction the reference refused
            return plan
        with self.capture() as errs:
            rtx_plan = self.rtxnet.builder.build_serialized_network(self.rtxnet.network, self.rtxnet.config)
        if rtx_plan is None and not errs:
            errs.append("build_serialized_network returned None")
        if plan is not None and errs and not no_rtx_kernel(errs):  # only layers TensorRT-RTX has no kernel for
            errs = []
        if plan is None:
            self.ref_rejected = True
            ref_message = (self.refnet.logger.errors or ["build failed"])[-1]
            if self.rtx_errors or errs:
                self.audit("the network", ref_message, (self.rtx_errors + errs)[0])
            else:
                self.unexpectedly_accepted("the network", ref_message)
            return plan
        if self.rtx_errors:
            raise Disagreement(f"the reference accepts the network but TensorRT-RTX rejected: {self.rtx_errors}")
        self.compare_all()
        if errs:
            raise Disagreement(f"the reference builds the network but TensorRT-RTX's build fails: {errs}")
        return plan

    def finish(self):
        """At the end of a test that did not build: judge what was defined, with every unconsumed
        layer output marked as a network output on both sides."""
        if self.built or self.ref_rejected or not self.pairs:
            return
        rnet = self.refnet.network.ref
        consumed = {id(rl.get_input(i)) for rl, _, _ in self.pairs for i in range(rl.num_inputs)}
        for rl, xl, _ in self.pairs:
            for j in range(rl.num_outputs):
                t = rl.get_output(j)
                if id(t) not in consumed and not t.is_network_output:
                    rnet.mark_output(t)
                    if xl is not None:
                        self.rtxnet.network.mark_output(xl.get_output(j))
        self.build()


class TwinTensor:
    """A reference tensor and its RTX twin; reads answer from the reference (checked against RTX)."""

    def __init__(self, twin: Twin, r, x, what: str):
        object.__setattr__(self, "_twin", twin)
        object.__setattr__(self, "ref", r)
        object.__setattr__(self, "rtx", x)
        object.__setattr__(self, "_what", what)

    def _read(self, attr: str):
        twin = self._twin
        try:
            value = getattr(self.ref, attr)
        except NetworkError as e:
            twin.expect_rejected(f"{self._what}.{attr}", e, lambda: getattr(self.rtx, attr) if self.rtx else None,
                                 lambda _: [self.rtx])
            raise
        if attr in ("shape", "dtype") and not twin.ref_rejected:
            twin.compare_tensor(self.ref, self.rtx, self._what)
        return value

    @property
    def shape(self):
        return self._read("shape")

    @property
    def dtype(self):
        return self._read("dtype")

    def __getattr__(self, attr):
        return getattr(self.ref, attr)

    def __setattr__(self, attr, value):
        twin, what = self._twin, f"{self._what}.{attr} = {value!r}"
        _, logged = twin.ref_logged(lambda: setattr(self.ref, attr, twin.to_ref(value)))
        on_rtx = (lambda: setattr(self.rtx, attr, twin.to_rtx(value))) if self.rtx is not None else None
        if logged:
            twin.refused_on_both(what, logged[0], on_rtx)
        elif on_rtx is not None:
            twin.rtx_do(on_rtx, what)

    def __repr__(self):
        return f"Twin{self.ref!r}"


def _wrap(twin: Twin, r, x, what: str):
    """Wrap a call's results: tensors and layers become twins, anything else is the reference's."""
    if isinstance(r, ref.ITensor):
        return TwinTensor(twin, r, x, what)
    if isinstance(r, _LAYER_LIKE):
        return TwinLayer(twin, r, x, what)
    if isinstance(r, _CONSTRUCTS):
        return TwinConstruct(twin, r, x, what)
    return r


#: control-flow constructs (add_if_conditional, add_loop): their add_* methods and set_condition go to both
#: sides, as a network's; `conditional`/`loop` of a boundary layer is the construct (not compared: RTX's is
#: another object)
_CONSTRUCTS = tuple(getattr(ref, name) for name in ("IIfConditional", "ILoop") if hasattr(ref, name))
#: what add_* calls return that twins as a layer: layers, and IAttention (not a layer in TensorRT: it configures
#: its two boundary layers, and has inputs, outputs and attributes as a layer has)
_LAYER_LIKE = (ref.ILayer, ref.IAttention)


def _describe(name, args, kwargs) -> str:
    def short(v):
        if isinstance(v, TwinTensor):
            return f"<{v.ref.name}>"
        if isinstance(v, np.ndarray):
            return f"array{v.shape}"
        return repr(v)
    return f"{name}({', '.join([short(a) for a in args] + [f'{k}={short(v)}' for k, v in kwargs.items()])})"


def _outputs(layer) -> list:
    return [] if layer is None else [layer.get_output(j) for j in range(layer.num_outputs)]


class _TwinObject:
    """Shared by TwinNetwork and TwinLayer: methods go to both sides, attribute reads to the
    reference (compared with RTX), attribute sets to both."""

    _SKIP_COMPARE = ("name", "metadata", "conditional", "loop")

    def __init__(self, twin: Twin, r, x, what: str):
        object.__setattr__(self, "_twin", twin)
        object.__setattr__(self, "ref", r)
        object.__setattr__(self, "rtx", x)
        object.__setattr__(self, "_what", what)

    def _affected(self, rtx_result) -> list:
        return []

    def __getattr__(self, attr):
        value = getattr(self.ref, attr)
        if callable(value):
            return lambda *args, **kwargs: self._call(attr, value, args, kwargs)
        if attr not in self._SKIP_COMPARE and self.rtx is not None and not self._twin.ref_rejected \
                and hasattr(self.rtx, attr):  # an attribute TensorRT lacks is the conformance test's business
            mine, theirs = Twin.plain(value), Twin.plain(getattr(self.rtx, attr))
            same = (mine == theirs if not isinstance(mine, float) else
                    abs(mine - theirs) <= 1e-6 * max(abs(mine), abs(theirs), 1e-30))
            if not same:
                raise Disagreement(f"{self._what}.{attr}: the reference gives {mine!r}, TensorRT-RTX {theirs!r}")
        return value

    def _call(self, attr, ref_method, args, kwargs):
        """A method call (add_*, mark_output, get_output, set_input, ...) on both sides."""
        twin, what = self._twin, _describe(attr, args, kwargs)
        adds = attr.startswith("add_")

        def on_rtx():
            if self.rtx is None:
                return None
            return getattr(self.rtx, attr)(*twin.to_rtx(args), **{k: twin.to_rtx(v) for k, v in kwargs.items()})

        try:
            r, logged = twin.ref_logged(
                lambda: ref_method(*twin.to_ref(args), **{k: twin.to_ref(v) for k, v in kwargs.items()}))
        except NetworkError as e:
            twin.expect_rejected(what, e, on_rtx, lambda res: _outputs(res) if adds else self._affected(res))
            raise
        if logged:  # e.g. add_input with a name in use: None on both, the networks unchanged
            return _wrap(twin, r, twin.refused_on_both(what, logged[0], on_rtx), what)
        x = twin.rtx_do(on_rtx, what) if self.rtx is not None else None
        if adds and x is None and self.rtx is not None and not twin.rtx_errors:
            twin.rtx_errors.append(f"{what}: TensorRT-RTX returned None")
        if adds and isinstance(r, _LAYER_LIKE):
            twin.pairs.append((r, x, what))
        return _wrap(twin, r, x, what if not isinstance(r, ref.ITensor) else f"{self._what}.{what}")

    def __setattr__(self, attr, value):
        twin = self._twin
        what = f"{self._what}.{attr} = {value!r}"
        try:
            _, logged = twin.ref_logged(lambda: setattr(self.ref, attr, twin.to_ref(value)))
        except NetworkError as e:
            twin.expect_rejected(what, e, lambda: setattr(self.rtx, attr, twin.to_rtx(value)) if self.rtx else None,
                                 lambda _: _outputs(self.rtx))
            raise
        on_rtx = (lambda: setattr(self.rtx, attr, twin.to_rtx(value))) if self.rtx is not None else None
        if logged:  # e.g. a layer renamed to a name in use: refused on both, the old name kept
            twin.refused_on_both(what, logged[0], on_rtx)
        elif on_rtx is not None:
            twin.rtx_do(on_rtx, what)

    def __repr__(self):
        return f"Twin({self.ref!r})"


class TwinLayer(_TwinObject):
    def _affected(self, rtx_result) -> list:
        return _outputs(self.rtx)


class TwinNetwork(_TwinObject):
    pass


class TwinConstruct(_TwinObject):
    """An IIfConditional or ILoop and its RTX twin."""

    def _affected(self, rtx_result) -> list:
        return _outputs(rtx_result) if rtx_result is not None and hasattr(rtx_result, "num_outputs") else []


class TwinRefNet(RefNet):
    """A RefNet whose network is twinned with a TensorRT-RTX network (see the module docstring)."""

    def __init__(self, rtx_module, targets=("8.6",)):
        """`targets`: TensorRT-RTX's target GPUs (FP8 and FP4 build only for sm89 / sm120 and newer)."""
        super().__init__()
        self.rtxnet = RtxNet(rtx_module, targets)
        self.rtxnet.logger.clear()  # shared by every RTX builder (trtbuild.engine.logging_bridge)
        self.twin = Twin(self, self.rtxnet)
        self.network = TwinNetwork(self.twin, self.network, self.rtxnet.network, "network")

    def build(self):
        return self.twin.build()
