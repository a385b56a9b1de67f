"""API methods take the argument types TensorRT's bindings take, and refuse the rest with a TypeError.

Every method of INetworkDefinition that the reference and TensorRT-RTX 1.7 both have is called once with
valid arguments on both (the call must work on both), then again with one argument at a time replaced by
a value of another kind (None, a bool, ints, floats, a str, bytes, a tuple, a list, an array, an enum of
another type, a tensor, an object); the outcome class (TypeError or not) must be the same on both. The
same is done for the methods of Builder, IBuilderConfig, IOptimizationProfile, ITimingCache, ILayer,
ITensor and Logger that take arguments.

Why it matters: a reference that converts anything it can (`add_activation(x, 0)` as a RELU, `add_input('y',
1, (1,))` as a FLOAT input, `add_lrn(x, 3.0, ...)` as a window of 3, `add_pooling_nd(x, type, 2)` as a 1-D
window, `add_reduce(x, op, 2, "no")` keeping dims) lets a builder that passes an int for an enum work on the
reference and fail for users of TensorRT."""

from __future__ import annotations

import re

import decimal
import fractions
import inspect

import numpy as np
import pytest

import trtbuild.reference as reference
from trtbuild.engine.build import new_network

from helpers.layer_attributes import ATTRIBUTES, set_attribute

# TensorRT-RTX warns that its timing-cache calls are no-ops, and numpy that np.bool_ becomes an index
pytestmark = [pytest.mark.filterwarnings("ignore:Use Deprecated in TensorRT-RTX:DeprecationWarning"),
              pytest.mark.filterwarnings("ignore:In future, it will be an error for .np.bool_.:DeprecationWarning")]


class _Object:
    pass


#: values of every kind, substituted for one argument at a time
WRONG = {
    "None": lambda trt, env: None, "True": lambda trt, env: True, "1": lambda trt, env: 1,
    "int64": lambda trt, env: np.int64(1), "2.0": lambda trt, env: 2.0, "2.5": lambda trt, env: 2.5,
    "float32": lambda trt, env: np.float32(2.0), "str": lambda trt, env: "x", "bytes": lambda trt, env: b"x",
    "tuple": lambda trt, env: (1, 1), "list": lambda trt, env: [1, 1],
    "array": lambda trt, env: np.array([1, 1], np.int32),
    "enum": lambda trt, env: trt.SampleMode.WRAP,  # an enum no method here takes
    "DataType": lambda trt, env: trt.DataType.HALF,
    "tensor": lambda trt, env: env["x"], "tensors": lambda trt, env: [env["x"]],
    "object": lambda trt, env: _Object(),
}

_W = np.ones((2, 4, 1, 1), np.float32)
_DW = np.ones((4, 2, 1, 1), np.float32)

#: valid arguments of every INetworkDefinition method both backends have: (trt, env) -> args
NETWORK = {
    "add_input": lambda t, e: ("y", t.float32, (1, 4)),
    "add_constant": lambda t, e: ((2,), np.ones(2, np.float32)),
    "add_scale": lambda t, e: (e["x"], t.ScaleMode.UNIFORM, None, np.array([2.0], np.float32), None),
    "add_scale_nd": lambda t, e: (e["x"], t.ScaleMode.UNIFORM, None, np.array([2.0], np.float32), None, 1),
    "add_reduce": lambda t, e: (e["x"], t.ReduceOperation.SUM, 2, True),
    "add_elementwise": lambda t, e: (e["x"], e["x"], t.ElementWiseOperation.SUM),
    "add_unary": lambda t, e: (e["x"], t.UnaryOperation.EXP),
    "add_activation": lambda t, e: (e["x"], t.ActivationType.RELU),
    "add_convolution_nd": lambda t, e: (e["x"], 2, (1, 1), _W, np.zeros(2, np.float32)),
    "add_deconvolution_nd": lambda t, e: (e["x"], 2, (1, 1), _DW, np.zeros(2, np.float32)),
    "add_pooling_nd": lambda t, e: (e["x"], t.PoolingType.MAX, (2, 2)),
    "add_lrn": lambda t, e: (e["x"], 3, 1e-4, 0.75, 2.0),
    "add_normalization": lambda t, e: (e["x"], e["s"], e["b"], 0b1100),
    "add_normalization_v2": lambda t, e: (e["x"], e["s"], e["b"], 0b1100),
    "add_shuffle": lambda t, e: (e["x"],),
    "add_concatenation": lambda t, e: ([e["x"], e["x"]],),
    "add_slice": lambda t, e: (e["x"], (0, 0, 0, 0), (1, 1, 1, 1), (1, 1, 1, 1)),
    "add_padding_nd": lambda t, e: (e["x"], (1, 1), (1, 1)),
    "add_matrix_multiply": lambda t, e: (e["x"], t.MatrixOperation.NONE, e["x"], t.MatrixOperation.NONE),
    "add_softmax": lambda t, e: (e["x"],),
    "add_cast": lambda t, e: (e["x"], t.DataType.HALF),
    "add_identity": lambda t, e: (e["x"],),
    "add_quantize": lambda t, e: (e["x"], e["scale"], t.DataType.INT8),
    "add_dequantize": lambda t, e: (e["q"], e["scale"], t.DataType.FLOAT),
    "add_squeeze": lambda t, e: (e["x"], e["axes"]),
    "add_unsqueeze": lambda t, e: (e["x"], e["axes"]),
    "add_parametric_relu": lambda t, e: (e["x"], e["s"]),
    "add_select": lambda t, e: (e["cond"], e["x"], e["s"]),
    "add_gather": lambda t, e: (e["x"], e["idx"], 1),
    "add_gather_v2": lambda t, e: (e["x"], e["idx"], t.GatherMode.DEFAULT),
    "add_cumulative": lambda t, e: (e["x"], e["axis"], t.CumulativeOperation.SUM, False, True),
    "add_one_hot": lambda t, e: (e["idx"], e["values"], e["axis"], -1),
    "add_resize": lambda t, e: (e["x"],),
    "add_grid_sample": lambda t, e: (e["x"], e["grid"]),
    "add_ragged_softmax": lambda t, e: (e["seq"], e["bounds"]),
    "add_rotary_embedding": lambda t, e: (e["x"], e["cossin"], e["cossin"], True, 4),
    "add_kv_cache_update": lambda t, e: (e["x"], e["update"], e["starts"], t.KVCacheMode.LINEAR),
    "add_topk": lambda t, e: (e["x"], t.TopKOperation.MAX, 2, 1 << 3),
    "add_scatter": lambda t, e: (e["sc_data"], e["sc_idx"], e["sc_upd"], t.ScatterMode.ND),
    "add_reverse_sequence": lambda t, e: (e["seqs"], e["lens"]),
    "add_einsum": lambda t, e: ([e["m"]], "ij->ji"),
    "add_non_zero": lambda t, e: (e["x"],),
    "add_nms": lambda t, e: (e["boxes"], e["scores"], e["max_boxes"]),
    "add_assertion": lambda t, e: (e["holds"], "ones are equal"),
    "add_if_conditional": lambda t, e: (),
    "add_loop": lambda t, e: (),
    "add_shape": lambda t, e: (e["x"],),
    "add_fill": lambda t, e: ((4,), t.FillOperation.LINSPACE, t.int32),
    "mark_output_for_shapes": lambda t, e: (e["dims"],),
    "unmark_output_for_shapes": lambda t, e: (e["shape_out"],),
    "add_attention": lambda t, e: (e["x"], e["x"], e["x"], t.AttentionNormalizationOp.SOFTMAX, False),
    "add_attention_v2": lambda t, e: (e["x"], e["x"], e["x"], t.AttentionNormalizationOp.SOFTMAX,
                                      t.CausalMaskKind.LOWER_RIGHT),
    "add_dynamic_quantize": lambda t, e: (e["x"], 3, 16, t.DataType.FP4, t.DataType.FP8),
    "add_dynamic_quantize_v2": lambda t, e: (e["x"], (1, 1, 1, 16), t.DataType.FP4, t.DataType.FP8),
    "get_layer": lambda t, e: (0,),
    "get_input": lambda t, e: (0,),
    "get_output": lambda t, e: (0,),
    "mark_output": lambda t, e: (e["free"],),
    "unmark_output": lambda t, e: (e["out"],),
    "mark_debug": lambda t, e: (e["x"],),
    "unmark_debug": lambda t, e: (e["x"],),
    "is_debug_tensor": lambda t, e: (e["x"],),
    "mark_unfused_tensors_as_debug_tensors": lambda t, e: (),
    "set_weights_name": lambda t, e: (e["kernel"], "renamed.weight"),
    "mark_weights_refittable": lambda t, e: ("conv.weight",),
    "unmark_weights_refittable": lambda t, e: ("conv.weight",),
    "are_weights_marked_refittable": lambda t, e: ("conv.weight",),
    "unmark_unfused_tensors_as_debug_tensors": lambda t, e: (),
}

#: the other API objects: (object name in env, method) -> valid arguments
OTHERS = {
    ("builder", "create_network"): lambda t, e: (1 << int(t.NetworkDefinitionCreationFlag.STRONGLY_TYPED),),
    ("builder", "is_network_supported"): lambda t, e: (e["network"], e["config"]),
    ("config", "set_flag"): lambda t, e: (t.BuilderFlag.DEBUG,),
    ("config", "clear_flag"): lambda t, e: (t.BuilderFlag.DEBUG,),
    ("config", "get_flag"): lambda t, e: (t.BuilderFlag.DEBUG,),
    ("config", "set_memory_pool_limit"): lambda t, e: (t.MemoryPoolType.WORKSPACE, 1 << 20),
    ("config", "get_memory_pool_limit"): lambda t, e: (t.MemoryPoolType.WORKSPACE,),
    ("config", "add_optimization_profile"): lambda t, e: (e["profile"],),
    ("config", "create_timing_cache"): lambda t, e: (b"",),
    ("config", "set_timing_cache"): lambda t, e: (e["cache"], False),
    ("profile", "set_shape"): lambda t, e: ("s", (1, 4, 1, 1), (1, 4, 1, 1), (1, 4, 1, 1)),
    ("profile", "get_shape"): lambda t, e: ("x",),
    ("profile", "set_shape_input"): lambda t, e: ("idx", (1, 1), (2, 2), (3, 3)),
    ("profile", "get_shape_input"): lambda t, e: ("idx",),
    ("cache", "combine"): lambda t, e: (e["cache2"], False),
    ("layer", "get_input"): lambda t, e: (0,),
    ("layer", "get_output"): lambda t, e: (0,),
    ("layer", "set_input"): lambda t, e: (0, e["x"]),
    ("layer", "get_output_type"): lambda t, e: (0,),
    ("x", "get_dimension_name"): lambda t, e: (0,),
    ("x", "set_dimension_name"): lambda t, e: (0, "n"),
    ("trt_logger", "log"): lambda t, e: (t.ILogger.Severity.VERBOSE, "not shown"),
    ("loop", "add_trip_limit"): lambda t, e: (e["axis"], t.TripLimit.COUNT),
    ("loop", "add_recurrence"): lambda t, e: (e["x"],),
    ("loop", "add_iterator"): lambda t, e: (e["x"], 1, True),
    ("loop", "add_loop_output"): lambda t, e: (e["x"], t.LoopOutput.LAST_VALUE, 0),
    ("conditional", "set_condition"): lambda t, e: (e["cond"],),
    ("conditional", "add_input"): lambda t, e: (e["x"],),
    ("conditional", "add_output"): lambda t, e: (e["x"], e["x"]),
}


def _env(trt) -> dict:
    builder, network, logger = new_network(trt)
    x = network.add_input("x", trt.float32, (1, 4, 6, 6))
    env = {"builder": builder, "network": network, "logger": logger, "x": x,
           "s": network.add_input("s", trt.float32, (1, 4, 1, 1)),
           "b": network.add_input("b", trt.float32, (1, 4, 1, 1)),
           "scale": network.add_input("scale", trt.float32, ()), "q": network.add_input("q", trt.int8, (1, 4))}
    env["cond"] = network.add_input("cond", trt.bool, (1, 4, 6, 1))
    env["idx"] = network.add_input("idx", trt.int32, (2,))
    env["axis"] = network.add_constant((), np.array(1, np.int32)).get_output(0)
    env["values"] = network.add_input("values", trt.float32, (2,))
    env["axes"] = network.add_constant((1,), np.array([0], np.int64)).get_output(0)
    env["grid"] = network.add_input("grid", trt.float32, (1, 3, 3, 2))
    env["seq"], env["bounds"] = network.add_input("seq", trt.float32, (2, 3, 5)), network.add_input("bounds", trt.int32,
                                                                                                   (2, 3, 1))
    env["cossin"] = network.add_input("cossin", trt.float32, (1, 6, 2))
    env["update"], env["starts"] = network.add_input("update", trt.float32, (1, 4, 2, 6)), network.add_input(
        "starts", trt.int32, (1,))
    env["sc_data"], env["sc_upd"] = network.add_input("sc_data", trt.float32, (4,)), network.add_input(
        "sc_upd", trt.float32, (2,))
    env["sc_idx"] = network.add_constant((2, 1), np.array([[0], [2]], np.int32)).get_output(0)
    env["seqs"], env["lens"] = network.add_input("seqs", trt.float32, (3, 2)), network.add_constant(
        (2,), np.array([1, 3], np.int32)).get_output(0)
    env["m"] = network.add_input("m", trt.float32, (2, 3))
    env["boxes"], env["scores"] = network.add_input("boxes", trt.float32, (1, 5, 4)), network.add_input(
        "scores", trt.float32, (1, 5, 2))
    env["max_boxes"] = network.add_constant((), np.array(3, np.int32)).get_output(0)
    one = network.add_constant((1,), np.array([1], np.int32)).get_output(0)
    env["holds"] = network.add_elementwise(one, one, trt.ElementWiseOperation.EQUAL).get_output(0)
    env["layer"] = network.add_identity(x)
    env["out"] = env["layer"].get_output(0)
    network.mark_output(env["out"])
    env["free"] = network.add_shuffle(x).get_output(0)
    env["dims"] = network.add_shape(x).get_output(0)
    env["shape_out"] = network.add_shape(env["free"]).get_output(0)
    network.mark_output_for_shapes(env["shape_out"])
    env["config"] = builder.create_builder_config()
    env["profile"] = builder.create_optimization_profile()
    env["profile"].set_shape("x", (1, 4, 6, 6), (1, 4, 6, 6), (1, 4, 6, 6))
    env["cache"] = env["config"].create_timing_cache(b"")
    env["cache2"] = env["config"].create_timing_cache(b"")
    env["trt_logger"] = trt.Logger()
    env["kernel"] = trt.Weights(np.ones((2, 4, 1, 1), np.float32))  # named through the object the layer got
    network.add_convolution_nd(x, 2, (1, 1), env["kernel"], trt.Weights(np.zeros(2, np.float32)))
    network.set_weights_name(env["kernel"], "conv.weight")
    env["loop"], env["conditional"] = network.add_loop(), network.add_if_conditional()
    env["loop"].add_trip_limit(env["axis"], trt.TripLimit.COUNT)  # a construct is checked at build, used or not
    env["conditional"].set_condition(network.add_input("c", trt.bool, ()))
    return env


#: (method, argument index, WRONG value) that kill the process in TensorRT-RTX 1.7 (a segmentation fault), so cannot be
#: compared; the reference refuses them with a TypeError
CRASHES_TENSORRT_RTX = {("are_weights_marked_refittable", 0, "None")}


def _call(trt, owner: str, method: str, valid, index=None, value=None):
    """'TypeError', or 'ok' (any other outcome: a result, None, another exception), of one call."""
    env = _env(trt)
    args = list(valid(trt, env))
    if index is not None:
        args[index] = WRONG[value](trt, env)
    try:
        getattr(env[owner], method)(*args)
    except TypeError:
        return "TypeError"
    except Exception:  # noqa: BLE001 - a refusal of the value, not of its type
        return "ok"
    return "ok"


def _valid_call(trt, owner, method, valid):
    env = _env(trt)
    env["logger"].clear() if hasattr(env["logger"], "clear") else None
    result = getattr(env[owner], method)(*valid(trt, env))
    errors = [m for m in getattr(env["logger"], "errors", []) if "CUDA" not in m and "cudaError" not in m]
    return result, errors


def _public_methods(cls) -> set[str]:
    return {n for n in dir(cls) if not n.startswith("_") and callable(getattr(cls, n))
            and not isinstance(getattr(cls, n), type)}


def test_every_shared_network_method_is_covered(rtx):
    shared = _public_methods(reference.INetworkDefinition) & _public_methods(rtx.INetworkDefinition)
    assert shared == set(NETWORK)


def _cases():
    cases = [("network", m, v) for m, v in NETWORK.items()] + [(o, m, v) for (o, m), v in OTHERS.items()]
    return cases


@pytest.mark.parametrize("owner,method,valid", _cases(), ids=[f"{o}.{m}" for o, m, _ in _cases()])
def test_arguments_are_taken_as_tensorrt_rtx_takes_them(owner, method, valid, rtx):
    for trt in (reference, rtx):  # the valid call works on both
        result, errors = _valid_call(trt, owner, method, valid)
        assert not errors, (trt.__name__, errors)
        if method.startswith("add_"):
            assert result is not None, trt.__name__
    count = len(valid(reference, _env(reference)))
    differences, refused = [], 0
    for index in range(count):
        for value in WRONG:
            if (method, index, value) in CRASHES_TENSORRT_RTX:
                continue
            ours = _call(reference, owner, method, valid, index, value)
            theirs = _call(rtx, owner, method, valid, index, value)
            refused += theirs == "TypeError"
            if ours != theirs:
                differences.append((index, value, f"reference {ours}, TensorRT-RTX {theirs}"))
    assert not differences
    # a method with parameters: TensorRT-RTX refused some wrong value, so the comparison could see a difference
    assert refused or count == 0, f"{owner}.{method}: TensorRT-RTX took every wrong value of {count} parameters"


def test_message_names_the_method_the_parameter_and_what_was_given():
    env = _env(reference)
    layers = env["network"].num_layers
    with pytest.raises(TypeError) as info:
        env["network"].add_activation(env["x"], 0)
    assert str(info.value) == ("INetworkDefinition.add_activation(): incompatible function arguments: type must be "
                               "ActivationType, got int")
    with pytest.raises(TypeError) as info:
        env["network"].add_lrn(env["x"], window=3.0, alpha=1e-4, beta=0.75, k=2.0)  # keywords are checked too
    assert str(info.value) == ("INetworkDefinition.add_lrn(): incompatible function arguments: "
                               "window must be int, got float")
    with pytest.raises(TypeError) as info:
        env["config"].set_memory_pool_limit(reference.MemoryPoolType.WORKSPACE, 2.0 ** 20)
    assert str(info.value) == ("IBuilderConfig.set_memory_pool_limit(): incompatible function "
                               "arguments: pool_size must be int, got float")
    assert env["network"].num_layers == layers  # nothing was added by the refused calls


def test_written_out_cases():
    """What TensorRT-RTX 1.7.1.116 did when probed (pybind11's casters), written out."""
    env = _env(reference)
    network, x = env["network"], env["x"]
    assert network.add_lrn(x, np.int64(3), 1, np.float32(0.75), True).window_size == 3  # ints take numpy ints
    assert network.add_lrn(x, np.float32(3.0), 1e-4, 0.75, 2.0).window_size == 3  # ... and numpy float32
    with pytest.raises(TypeError):
        network.add_lrn(x, np.float64(3.0), 1e-4, 0.75, 2.0)  # not float64, a Python float
    assert network.add_reduce(x, reference.ReduceOperation.SUM, 2, None).keep_dims is False  # bool takes None
    with pytest.raises(TypeError):
        network.add_reduce(x, reference.ReduceOperation.SUM, 2, "yes")
    assert tuple(network.add_pooling_nd(x, reference.PoolingType.MAX, np.array([2, 2])).window_size_nd) == (2, 2)
    with pytest.raises(TypeError):
        network.add_pooling_nd(x, reference.PoolingType.MAX, 2)  # a bare int is no Dims
    with pytest.raises(TypeError):
        network.add_pooling_nd(x, reference.PoolingType.MAX, (np.float32(2), 2))
    assert network.add_input(b"bytes", reference.float32, (1,)).name == "bytes"
    with pytest.raises(TypeError):
        network.add_concatenation(t for t in (x, x))  # a generator is no sequence
    assert network.add_concatenation((x, x)).num_inputs == 2
    with pytest.raises(TypeError, match=r"tensor 'x': dtype = 1: incompatible function arguments"):
        x.dtype = 1  # it made x an INT8 input
    x.dtype = reference.DataType.HALF
    assert x.dtype == reference.DataType.HALF


def test_every_checked_parameter_has_tensorrt_rtxs_type(rtx):
    """The annotations the check reads are the types of TensorRT-RTX's bindings, for every parameter of
    every method both have on the classes above (so no parameter goes unchecked)."""
    pairs = ([("INetworkDefinition", m) for m in NETWORK] + sorted({(_CLASS[o], m) for o, m in OTHERS})
             + [("Logger", "__init__")])
    problems = []
    for cls, method in pairs:
        ours = getattr(getattr(reference, cls), method)
        ours = getattr(ours, "__api_types__", {})
        theirs = _rtx_types(getattr(getattr(rtx, cls), method).__doc__)
        if ours != theirs:
            problems.append((cls, method, ours, theirs))
    assert not problems


_CLASS = {"builder": "Builder", "config": "IBuilderConfig", "profile": "IOptimizationProfile", "cache": "ITimingCache",
          "layer": "ILayer", "x": "ITensor", "trt_logger": "Logger", "loop": "ILoop", "conditional": "IIfConditional"}
_RTX_TYPES = {"typing.SupportsInt": "int", "typing.SupportsFloat": "float", "typing_extensions.Buffer": "Buffer",
              "collections.abc.Sequence[ITensor]": "Sequence[ITensor]",
              "collections.abc.Sequence[typing.SupportsInt]": "Sequence[int]"}
#: where TensorRT's null pointer is taken (probed: a None Weights bias is no bias, a None name or profile is
#: logged as an API usage error); pybind11's signatures do not say it
_NULLABLE = {("add_input", "name"), ("add_optimization_profile", "profile"), ("set_dimension_name", "name"),
             ("log", "msg"), ("add_einsum", "equation"), ("add_assertion", "message"),
             ("mark_weights_refittable", "name"), ("unmark_weights_refittable", "name"), ("set_weights_name", "name")}


def _rtx_types(doc: str) -> dict:
    line = doc.strip().splitlines()[0]
    if "(*args, **kwargs)" in line:  # pybind11 overloads: the one with the most parameters (optional ones given)
        line = max(re.findall(r"^\d+\. (\w+\(.*\) -> .*)$", doc, re.M), key=lambda sig: sig.count(":"))
    name, params = line.split("(", 1)[0], line.split("(", 1)[1].rsplit(") ->", 1)[0]
    out = {}
    for part in _split(params)[1:]:
        pname, rest = part.split(":", 1)
        annotation, _, default = rest.partition(" = ")
        text = annotation.strip().replace("tensorrt_rtx_bindings.tensorrt_rtx.", "")
        text = _RTX_TYPES.get(text, text)
        if default.strip() == "None" or (name, pname.strip()) in _NULLABLE:
            text += " | None"
        out[pname.strip()] = text
    return out


def _split(text: str) -> list[str]:
    parts, depth, cur = [], 0, ""
    for ch in text:
        depth += ch in "[(<" and 1 or (-1 if ch in "])>" else 0)
        if ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    return parts + [cur.strip()]


def test_annotations_read_by_the_check():
    """The check's table is what inspect shows (the wrapped methods keep their signatures)."""
    sig = inspect.signature(reference.INetworkDefinition.add_activation)
    assert list(sig.parameters) == ["self", "input", "type"]


class _Index:
    def __index__(self):
        return 3


class _Float:
    def __float__(self):
        return 3.0


class _Int:
    def __int__(self):
        return 3


#: numbers of the kinds pybind11's casters treat apart (layer attributes use the same casters as arguments)
EXOTIC = {"__index__": lambda trt: _Index(), "__float__": lambda trt: _Float(), "__int__": lambda trt: _Int(),
          "Fraction": lambda trt: fractions.Fraction(3), "Decimal": lambda trt: decimal.Decimal(3),
          "complex": lambda trt: 1j, "range": lambda trt: range(1, 3), "bytes": lambda trt: b"x",
          "float64": lambda trt: np.float64(3.0), "0-d array": lambda trt: np.array(3),
          "numpy bool": lambda trt: np.bool_(True), "enum": lambda trt: trt.SampleMode.WRAP, "dict": lambda trt: {1: 1},
          "generator": lambda trt: (i for i in (1, 2))}


@pytest.mark.parametrize("owner,attribute", ATTRIBUTES, ids=[a for _, a in ATTRIBUTES])
def test_attribute_setters_take_numbers_as_tensorrt_rtx_takes_them(owner, attribute, rtx):
    """Before, the setters took only Python and numpy numbers: Fraction(3), Decimal(3), an object with
    __index__ and a 0-d array were TypeErrors for ints and floats, an enum was a bool, a range no Dims."""
    ours = {k: set_attribute(reference, owner, attribute, v(reference)) for k, v in EXOTIC.items()}
    theirs = {k: set_attribute(rtx, owner, attribute, v(rtx)) for k, v in EXOTIC.items()}
    assert ours == theirs


def _property(trt, what: str, value):
    """'TypeError' or what a Dims constructor, a convolution's padding_nd, an input's shape or dtype became."""
    _, network, _ = new_network(trt)
    x = network.add_input("x", trt.float32, (1, 4, 6, 6))
    try:
        if what == "Dims":
            return tuple(trt.Dims(value))
        if what == "padding_nd":
            layer = network.add_convolution_nd(x, 2, (1, 1), _W)
            layer.padding_nd = value
            return tuple(layer.padding_nd)
        setattr(x, what, value)
        got = getattr(x, what)
        return got.name if what == "dtype" else tuple(got)
    except TypeError:
        return "TypeError"


@pytest.mark.parametrize("what", ["Dims", "padding_nd", "shape"])
def test_dims_and_tensor_properties_take_what_tensorrt_rtx_takes(what, rtx):
    """Before, `trt.Dims(3)` was (3,) and `trt.Dims("x")` a ValueError (TensorRT: TypeErrors), `padding_nd = 1`
    and `tensor.shape = b"ab"` were accepted. (TensorRT-RTX's ITensor.dtype is read-only; TensorRT 10's takes a
    DataType, and so does the reference's: `x.dtype = 1` is a TypeError, test_written_out_cases.)"""
    values = {**{k: v for k, v in WRONG.items() if k not in ("tensor", "tensors")}, **EXOTIC}
    ours, theirs = {}, {}
    for k, make in values.items():
        ours[k] = _property(reference, what, _value(make, reference))
        theirs[k] = _property(rtx, what, _value(make, rtx))
    assert ours == theirs


def _value(make, trt):
    params = inspect.signature(make).parameters
    return make(trt, {}) if len(params) == 2 else make(trt)


def test_logger_constructor_takes_what_tensorrt_rtx_takes(rtx):
    """Before, `trt.Logger(2)` was a WARNING logger (TensorRT: a TypeError)."""
    def make(trt, value):
        try:
            return trt.Logger(value).min_severity.name
        except TypeError:
            return "TypeError"
    values = {k: v for k, v in WRONG.items() if k not in ("tensor", "tensors")}
    ours = {k: make(reference, v(reference, {})) for k, v in values.items()}
    theirs = {k: make(rtx, v(rtx, {})) for k, v in values.items()}
    assert ours == theirs
    assert make(reference, reference.ILogger.Severity.ERROR) == make(rtx, rtx.ILogger.Severity.ERROR) == "ERROR"
    with pytest.raises(TypeError, match=r"^Logger\(\): incompatible constructor arguments: min_severity must be "
                                        r"ILogger.Severity, got int$"):
        reference.Logger(2)
