"""The public surface of trtbuild.reference, in the same shape as dump_api.py's dump of the
real bindings: classes with their members (kind, parameter names), enums with their values,
module-level functions and values.

Members count when a trtbuild class defines them (class attributes, methods, properties, nested
classes) or when a sample instance carries them as public instance attributes (set in __init__);
members inherited from Python builtins (bytes, tuple, list, int, IntEnum) do not.
"""

from __future__ import annotations

import enum
import inspect

import numpy as np


def _ours(klass) -> bool:
    return klass.__module__.startswith("trtbuild")


def params_of(fn) -> list[list]:
    """[[name, has_default], ...] of a Python callable without `self`; *args/**kwargs keep their stars."""
    sig = inspect.signature(fn)
    out = []
    for p in sig.parameters.values():
        if p.name == "self":
            continue
        star = "*" if p.kind == p.VAR_POSITIONAL else "**" if p.kind == p.VAR_KEYWORD else ""
        out.append([star + p.name, p.default is not p.empty])
    return out


def _is_enum(cls) -> bool:
    return isinstance(cls, type) and issubclass(cls, enum.Enum)


def class_members(cls) -> dict[str, dict]:
    """{name: {"kind": ..., "params": [...] for methods}} for the public members trtbuild defines."""
    members: dict[str, dict] = {}
    for klass in cls.__mro__:
        if not _ours(klass):
            continue
        for name, raw in vars(klass).items():
            if name.startswith("_") or name in members:
                continue
            if _is_enum(cls) and name in cls.__members__:
                continue  # enum members are compared by value, separately
            if isinstance(raw, property):
                members[name] = {"kind": "property", "owner": klass.__name__}
            elif isinstance(raw, (staticmethod, classmethod)):
                members[name] = {"kind": "method", "params": params_of(raw.__func__), "owner": klass.__name__}
            elif isinstance(raw, type):
                members[name] = {"kind": "class", "owner": klass.__name__}
            elif inspect.isfunction(raw):
                members[name] = {"kind": "method", "params": params_of(raw), "owner": klass.__name__}
            else:
                members[name] = {"kind": "value", "owner": klass.__name__}
    return members


def init_params(cls) -> list[list] | None:
    """The constructor's parameters if a trtbuild class defines __init__ or __new__, else None."""
    for klass in cls.__mro__:
        if not _ours(klass):
            return None
        if "__init__" in vars(klass):
            return params_of(vars(klass)["__init__"])
        if "__new__" in vars(klass):
            return params_of(vars(klass)["__new__"])[1:]  # drop cls
    return None


def sample_instances(trt) -> list:
    """One instance of (nearly) every reference class, built through the public API, so that
    attributes set in __init__ are checked too."""
    logger = trt.Logger(trt.Logger.WARNING)
    builder = trt.Builder(logger)
    network = builder.create_network(1 << int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED))
    config = builder.create_builder_config()
    profile = builder.create_optimization_profile()
    x = network.add_input("x", trt.float32, (1, 4, 6, 6))
    f32 = np.float32
    layers = [
        network.add_scale(x, trt.ScaleMode.UNIFORM, np.ones(1, f32)),
        network.add_reduce(x, trt.ReduceOperation.SUM, 2, True),
        network.add_elementwise(x, x, trt.ElementWiseOperation.SUM),
        network.add_unary(x, trt.UnaryOperation.ABS),
        network.add_activation(x, trt.ActivationType.RELU),
        network.add_convolution_nd(x, 4, (1, 1), np.ones(16, f32)),
        network.add_deconvolution_nd(x, 4, (1, 1), np.ones(16, f32)),
        network.add_pooling_nd(x, trt.PoolingType.MAX, (2, 2)),
        network.add_lrn(x, 3, 1e-4, 0.75, 1.0),
        network.add_shuffle(x),
        network.add_concatenation([x, x]),
        network.add_slice(x, (0, 0, 0, 0), (1, 4, 6, 6), (1, 1, 1, 1)),
        network.add_padding_nd(x, (1, 1), (1, 1)),
        network.add_softmax(x),
        network.add_cast(x, trt.float16),
        network.add_identity(x),
        network.add_constant((1, 4, 1, 1), np.ones(4, f32)),
    ]
    mat = network.add_input("m", trt.float32, (2, 3))
    layers.append(network.add_matrix_multiply(mat, trt.MatrixOperation.NONE, mat, trt.MatrixOperation.TRANSPOSE))
    scale = network.add_constant((1, 4, 1, 1), np.ones(4, f32)).get_output(0)
    layers.append(network.add_normalization(x, scale, scale, 1 << 2 | 1 << 3))
    q_scale = network.add_constant((), np.ones((), f32)).get_output(0)
    layers.append(network.add_quantize(x, q_scale, trt.DataType.INT8))
    layers.append(network.add_dequantize(layers[-1].get_output(0), q_scale, trt.float32))
    network.mark_output(layers[4].get_output(0))
    plan = builder.build_serialized_network(network, config)
    runtime = trt.Runtime(logger)
    engine = runtime.deserialize_cuda_engine(plan)
    context = engine.create_execution_context()
    cache = config.create_timing_cache(b"")
    return [trt.ILogger(), logger, builder, network, config, profile, x, *layers, plan, runtime, engine, context, cache,
            trt.Weights(np.ones(2, f32)), trt.Dims((1, 2)), trt.Permutation((1, 0)), trt.IProgressMonitor(),
            trt.PluginField("f", np.ones(1, f32), trt.PluginFieldType.FLOAT32), trt.PluginFieldCollection(),
            trt.get_plugin_registry()]


def instance_attributes(obj) -> set[str]:
    """Public attributes an instance carries in its __dict__."""
    return {k for k in getattr(obj, "__dict__", {}) if not k.startswith("_")}


def surface(trt, with_instances: bool = True) -> dict:
    """The reference API in dump_api.py's layout (classes, functions, values), for names in __all__.
    with_instances=False skips building sample objects (no instance attributes; for test ids)."""
    classes, functions, values = {}, {}, {}
    pending = [(name, getattr(trt, name)) for name in trt.__all__]
    while pending:
        name, obj = pending.pop()
        if isinstance(obj, type):
            entry = {"kind": "enum" if _is_enum(obj) else "class", "members": class_members(obj),
                     "init": init_params(obj), "class": obj}
            if _is_enum(obj):
                entry["enum"] = {k: int(v) for k, v in obj.__members__.items()}
            classes[name] = entry
            for member, info in entry["members"].items():
                if info["kind"] == "class":
                    pending.append((f"{name}.{member}", getattr(obj, member)))
        elif callable(obj):
            functions[name] = params_of(obj)
        else:
            values[name] = {"type": type(obj).__name__, "int": int(obj)}
    by_class = {entry["class"]: name for name, entry in classes.items()}
    for inst in sample_instances(trt) if with_instances else []:
        name = by_class.get(type(inst))
        if name is None:
            continue
        for attr in instance_attributes(inst):
            classes[name]["members"].setdefault(attr, {"kind": "instance attribute", "owner": type(inst).__name__})
    return {"classes": classes, "functions": functions, "values": values}
