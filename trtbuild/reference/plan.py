"""The reference plan: a serialized network the reference runtime can load and run.

Layout: MAGIC | u64 header length | JSON header | u64 blob length | safetensors blob | sha256.
Serializing copies the weights once (into the plan bytes); loading copies them not at all (the
arrays are read-only views of the plan).
No pickle: the header is JSON and the weights are safetensors. The checksum makes truncated or
altered plans fail with a clear message.
"""

from __future__ import annotations

import hashlib
import math
import json
import struct

import numpy as np

from .enums import DataType
from .host_memory import IHostMemory, host_memory_from_parts
from .safetensors_blob import safetensors_parts, safetensors_views
from .layers import _is_int
from .debug import check_debug_header, debug_header, debug_roots
from .refit import RefitSpec, check_refit_header, plan_weight

MAGIC = b"TRTBREF\x01"
FORMAT_VERSION = 1


class PlanError(ValueError):
    """The bytes are not a valid reference plan. `stage` says which part of the plan is wrong:
    "container" (magic, lengths, checksum), "header" (JSON), "blob" (safetensors) or "graph"
    (rebuilding the layers); the message starts with it, except for the container."""

    def __init__(self, message: str, stage: str = "container"):
        super().__init__(_STAGE_TEXT[stage] + message)
        self.stage = stage


def _topological(network) -> list:
    produced_by = {id(t): layer for layer in network._layers for t in layer._outputs}
    needed, order, seen = set(), [], set()
    # A loop's next-iteration values (back edges) and a construct's other boundary layers are visited once the
    # walk in progress is done, not from inside it: the body between a recurrence and its next value may hold
    # a layer that is still waiting for its own inputs (on the walk's stack), which must not come after a
    # layer reading it.
    later: list = []

    def visit(layer):
        if id(layer) in seen:
            return
        seen.add(id(layer))
        back = getattr(layer, "_BACK_EDGES", ())  # a loop's next-iteration values: computed after the layer
        for i, t in enumerate(layer._inputs):
            if t is not None and id(t) in produced_by and i not in back:
                visit(produced_by[id(t)])
        order.append(layer)
        for other in [layer._inputs[i] for i in back if i < len(layer._inputs)]:
            if other is not None and id(other) in produced_by:
                later.append(produced_by[id(other)])
        later.extend(getattr(layer, "_companions", list)())  # a construct's boundary layers come together

    def walk(layer):
        visit(layer)
        while later:
            visit(later.pop(0))

    for t in network._outputs + debug_roots(network):
        if id(t) in produced_by:
            walk(produced_by[id(t)])
    for layer in network._layers:  # a layer without outputs (an assertion) is kept for what it checks
        if not layer._outputs:
            walk(layer)
    needed.update(id(lay) for lay in order)
    return order


def serialize_network(network, profiles: list[dict], extra: dict, refit: RefitSpec | None = None) -> IHostMemory:
    """Turn a validated network into plan bytes. Unused layers are pruned, as TensorRT does. `refit`: which
    weights a Refitter may replace, and whether they are left out (refit.py)."""
    layers = _topological(network)
    ids: dict[int, int] = {}

    def tid(t) -> int:
        return ids.setdefault(id(t), len(ids))

    arrays: dict[str, np.ndarray] = {}
    marks = network._weight_name_state()[2]
    from .shape_values import shape_input_names

    shape_inputs = shape_input_names(network)
    inputs = [{"id": tid(t), "name": t.name, "dtype": int(t.dtype), "shape": list(t.shape),
               **({"shape_tensor": True} if t.name in shape_inputs else {})} for t in network._inputs]
    out_layers = []
    for layer in layers:
        shapes, dtypes = layer._infer()
        entry = {"type": layer._TYPE.name, "name": layer.name, "params": layer._params,
                 "inputs": [tid(t) if t is not None else -1 for t in layer._inputs],
                 "outputs": [{"id": tid(t), "name": t.name, "dtype": int(d), "shape": list(s)}
                             for t, s, d in zip(layer._outputs, shapes, dtypes)],
                 "weights": {}}
        for key, w in layer._weights.items():
            if w.size:
                ref = f"l{len(out_layers)}.{key}"
                if plan_weight(entry, key, w, network._weights_name(w), refit, marks):
                    arrays[ref] = w._array  # stored bits; BF16 as uint16 patterns
                entry["weights"][key] = ref
                entry.setdefault("weight_types", {})[key] = int(w.dtype)
            elif w.dtype != DataType.FLOAT:  # no array, but its type is the type of an empty constant's output
                entry.setdefault("empty_weight_types", {})[key] = int(w.dtype)
        plugin = getattr(layer, "_plugin", None)
        if plugin is not None:
            c = plugin._creator
            fields = {}
            for k, v in plugin._fields.items():
                ref = f"l{len(out_layers)}.field.{k}"
                arrays[ref] = np.ascontiguousarray(v)
                fields[k] = ref
            entry["plugin"] = {"creator": c.name, "version": str(c.plugin_version), "namespace": c.plugin_namespace,
                               "name": plugin._name, "fields": fields}
        out_layers.append(entry)
    outputs = [{"id": tid(t), "name": t.name, "dtype": int(t.dtype), "shape": list(t.shape),
                **({"shape_tensor": True} if id(t) in network._shape_outputs else {})} for t in network._outputs]
    header = {"format": FORMAT_VERSION, "name": network.name, "inputs": inputs, "outputs": outputs,
              "layers": out_layers, "profiles": profiles, **extra, **debug_header(network, ids),
              **({"refit": refit.mode} if refit is not None else {})}
    return pack_plan(header, arrays)


def pack_plan(header: dict, arrays: dict[str, np.ndarray]) -> IHostMemory:
    """Plan bytes of a header and its weight arrays."""
    hj = json.dumps(header, separators=(",", ":")).encode()
    blob = safetensors_parts(arrays, at=len(MAGIC) + 16 + len(hj)) if arrays else []
    parts = [MAGIC, struct.pack("<Q", len(hj)), hj, struct.pack("<Q", sum(len(b) for b in blob)), *blob]
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part)
    return host_memory_from_parts(parts + [digest.digest()])  # the one copy of the weights this makes


def deserialize_plan(data) -> tuple[dict, dict[str, np.ndarray]]:
    """Parse plan bytes; raise PlanError saying what is wrong (its `stage` says where:
    "container" for magic, lengths and checksum, "header" for the JSON header, "blob" for the
    safetensors weights)."""
    data = memoryview(data).cast("B")  # any buffer (bytes, IHostMemory, a memory-mapped file): never copied
    if len(data) < len(MAGIC) + 8 or bytes(data[:len(MAGIC)]) != MAGIC:
        raise PlanError("not a trtbuild reference plan (bad magic bytes): was it built by real TensorRT, or is "
                        "it another file?")
    if len(data) < len(MAGIC) + 16 + 32:
        raise PlanError(f"reference plan is truncated ({len(data)} bytes)")
    body, digest = data[:-32], bytes(data[-32:])  # views: the weights are not copied
    (hlen,) = struct.unpack_from("<Q", body, len(MAGIC))
    pos = len(MAGIC) + 8
    if pos + hlen + 8 > len(body):
        raise PlanError(f"reference plan is truncated: header says {hlen} bytes, file has {len(body) - pos}")
    if hashlib.sha256(body).digest() != digest:
        raise PlanError("reference plan is corrupt or truncated (checksum mismatch)")
    try:
        header = json.loads(bytes(body[pos:pos + hlen]))
    except ValueError as e:  # JSONDecodeError and UnicodeDecodeError
        raise PlanError(f"the header is not valid UTF-8 JSON ({e})", "header") from None
    pos += hlen
    (blen,) = struct.unpack_from("<Q", body, pos)
    blob = body[pos + 8:pos + 8 + blen]
    if not isinstance(header, dict):
        raise PlanError(f"the header is a JSON {type(header).__name__}, not an object", "header")
    check_format(header)
    check_header(header)
    if pos + 8 + blen != len(body):
        raise PlanError(f"the header gives the blob {blen} bytes but {len(body) - pos - 8} bytes follow it", "blob")
    try:
        arrays = safetensors_views(blob) if blen else {}
    except ValueError as e:
        raise PlanError(f"the safetensors blob cannot be read ({e})", "blob") from None
    check_arrays(header, arrays)
    return header, arrays


def check_format(header: dict) -> None:
    """TensorRT's version-compatibility rule for the plan format: a plan of this trtbuild's format loads; one
    of an older format loads only if it was built version-compatible (BuilderFlag.VERSION_COMPATIBLE: the
    format's reader is kept for such plans); one of a newer format never does (compatibility is forward only,
    as a TensorRT 11 plan never loads on TensorRT 10). PlanError in one sentence otherwise."""
    fmt = header.get("format")
    if fmt == FORMAT_VERSION:
        return
    if not _is_int(fmt) or fmt < 0:
        raise PlanError(f"reference plan format {fmt!r} is not a plan format version (this trtbuild reads "
                        f"{FORMAT_VERSION})")
    if fmt > FORMAT_VERSION:
        raise PlanError(f"reference plan format {fmt} was written by a newer trtbuild than this one (which reads "
                        f"format {FORMAT_VERSION} and older version-compatible plans); version compatibility is "
                        "forward only: load it with that trtbuild or rebuild it with this one")
    if header.get("version_compatible") is not True:
        raise PlanError(f"reference plan format {fmt} was written by an older trtbuild and was not built "
                        f"version-compatible (BuilderFlag.VERSION_COMPATIBLE), so this trtbuild (format "
                        f"{FORMAT_VERSION}) cannot load it: rebuild the engine, with --version-compatible to "
                        "let later versions load it")


def plan_header(data) -> dict:
    """The JSON header of plan bytes, read without the checksum or the weights (for a plan that
    deserialize_plan has accepted, or to inspect one); PlanError if there is none."""
    data = memoryview(data).cast("B")
    if len(data) < len(MAGIC) + 8 or bytes(data[:len(MAGIC)]) != MAGIC:
        raise PlanError("not a trtbuild reference plan (bad magic bytes)")
    (hlen,) = struct.unpack_from("<Q", data, len(MAGIC))
    try:
        header = json.loads(bytes(data[len(MAGIC) + 8:len(MAGIC) + 8 + hlen]))
    except ValueError as e:
        raise PlanError(f"the header is not valid UTF-8 JSON ({e})", "header") from None
    if not isinstance(header, dict):
        raise PlanError(f"the header is a JSON {type(header).__name__}, not an object", "header")
    return header


#: the layer types that have no outputs (a construct's condition or trip limit)
_NO_OUTPUTS = frozenset({"CONDITION", "TRIP_LIMIT", "ASSERTION"})

_STAGE_TEXT = {"container": "", "header": "reference plan header: ", "blob": "reference plan weights blob: ",
               "graph": "reference plan graph: "}


def _need(ok: bool, what: str) -> None:
    if not ok:
        raise PlanError(what, "header")


def _check_tensor(t, where: str) -> None:
    from .enums import DataType

    _need(isinstance(t, dict), f"{where} is a {type(t).__name__}, not an object")
    for key in ("id", "name", "dtype", "shape"):
        _need(key in t, f"{where} has no '{key}' field")
    _need(_is_int(t["id"]) and t["id"] >= 0, f"{where} has id {t['id']!r}, not a non-negative integer")
    _need(isinstance(t["name"], str), f"{where} has name {t['name']!r}, not a string")
    _need(_is_int(t["dtype"]) and t["dtype"] in DataType._value2member_map_,
          f"{where} ('{t['name']}') has dtype {t['dtype']!r}, not a TensorRT DataType value")
    _need(isinstance(t["shape"], list) and len(t["shape"]) <= 8 and all(_is_int(d) and d >= -1 for d in t["shape"]),
          f"{where} ('{t['name']}') has shape {t['shape']!r}, not a list of at most 8 integers >= -1")


def check_header(header: dict) -> None:
    """Raise PlanError (stage "header") naming the first field that is missing, mistyped or refers
    to nothing: tensors, layer entries, tensor ids (each defined once, used after its definition),
    weight references and profiles."""
    from .enums import DataType, LayerType

    for key, kind in (("name", str), ("inputs", list), ("outputs", list), ("layers", list), ("profiles", list)):
        _need(key in header, f"no '{key}' field")
        _need(isinstance(header[key], kind), f"'{key}' is a {type(header[key]).__name__}, not a {kind.__name__}")
    _need(len(header["outputs"]) > 0, "the plan has no outputs")
    from .arithmetic import MODELS

    _need(header.get("profiling_verbosity", 0) in (0, 1, 2),
          f"'profiling_verbosity' is {header.get('profiling_verbosity')!r}, not a ProfilingVerbosity value")
    _need(header.get("arithmetic", MODELS[0]) in MODELS,
          f"'arithmetic' is {header.get('arithmetic')!r}, not one of {MODELS}")
    for key in ("version_compatible", "lean_runtime"):
        _need(isinstance(header.get(key, False), bool), f"'{key}' is {header.get(key)!r}, not true or false")
    _need(not header.get("lean_runtime") or header.get("version_compatible"),
          "'lean_runtime' is true but the plan is not version-compatible (only a version-compatible plan embeds it)")
    _need(header.get("hardware_compatibility_level", 0) in (0, 1, 2),
          f"'hardware_compatibility_level' is {header.get('hardware_compatibility_level')!r}, not a "
          "HardwareCompatibilityLevel value")
    from .ops.registry import op_for

    defined: dict[int, str] = {}
    later: list = []  # (layer, tensor id) of back edges
    names: set[str] = set()
    for i, t in enumerate(header["inputs"]):
        _check_tensor(t, f"inputs[{i}]")
        _need(t["id"] not in defined, f"inputs[{i}] ('{t['name']}') reuses tensor id {t['id']}")
        _need(t["name"] not in names, f"inputs[{i}] reuses the I/O tensor name '{t['name']}'")
        defined[t["id"]] = t["name"]
        names.add(t["name"])
    for k, entry in enumerate(header["layers"]):
        where = f"layers[{k}]"
        _need(isinstance(entry, dict), f"{where} is a {type(entry).__name__}, not an object")
        for key, kind in (("type", str), ("name", str), ("params", dict), ("inputs", list), ("outputs", list),
                          ("weights", dict)):
            _need(key in entry, f"{where} has no '{key}' field")
            _need(isinstance(entry[key], kind),
                  f"{where} '{key}' is a {type(entry[key]).__name__}, not a {kind.__name__}")
        where = f"{where} ('{entry['name']}')"
        _need(entry["type"] in LayerType.__members__, f"{where} has type {entry['type']!r}, not a TensorRT LayerType")
        back = getattr(getattr(op_for(LayerType[entry["type"]]), "cls", None), "_BACK_EDGES", ())
        for k, i in enumerate(entry["inputs"]):
            if k in back and _is_int(i):  # a loop's next-iteration value, computed after the layer
                later.append((where, i))
                continue
            _need(_is_int(i) and (i == -1 or i in defined),
                  f"{where} reads tensor id {i!r}, which no input or earlier layer defines")
        _need(len(entry["outputs"]) > 0 or entry["type"] in _NO_OUTPUTS, f"{where} has no outputs")
        for j, t in enumerate(entry["outputs"]):
            _check_tensor(t, f"{where} outputs[{j}]")
            _need(t["id"] not in defined, f"{where} outputs[{j}] redefines tensor id {t['id']}")
            defined[t["id"]] = t["name"]
        types = entry.get("weight_types", {})
        _need(isinstance(types, dict), f"{where} 'weight_types' is a {type(types).__name__}, not an object")
        for key, ref in entry["weights"].items():
            _need(isinstance(ref, str), f"{where} weight '{key}' refers to {ref!r}, not a blob tensor name")
        for key, v in types.items():
            _need(key in entry["weights"], f"{where} gives a type for weight '{key}', which it does not have")
            _need(_is_int(v) and v in DataType._value2member_map_,
                  f"{where} weight '{key}' has type {v!r}, not a TensorRT DataType value")
        if "plugin" in entry:
            spec = entry["plugin"]
            _need(isinstance(spec, dict), f"{where} 'plugin' is a {type(spec).__name__}, not an object")
            for key, kind in (("creator", str), ("version", str), ("namespace", str), ("name", str), ("fields", dict)):
                _need(isinstance(spec.get(key), kind),
                      f"{where} plugin '{key}' is {spec.get(key)!r}, not a {kind.__name__}")
            for key, ref in spec["fields"].items():
                _need(isinstance(ref, str), f"{where} plugin field '{key}' refers to {ref!r}, not a blob tensor name")
    for where, i in later:
        _need(i == -1 or i in defined, f"{where} reads tensor id {i!r}, which no input or layer defines")
    for i, t in enumerate(header["outputs"]):
        _check_tensor(t, f"outputs[{i}]")
        _need(t["id"] in defined, f"outputs[{i}] ('{t['name']}') is tensor id {t['id']}, which nothing defines")
        _need(t["name"] not in names, f"outputs[{i}] reuses the I/O tensor name '{t['name']}'")
        names.add(t["name"])
    check_debug_header(header, _need)
    check_refit_header(header, _need)
    inputs = {t["name"]: t for t in header["inputs"]}
    for k, prof in enumerate(header["profiles"]):
        _need(isinstance(prof, dict), f"profiles[{k}] is a {type(prof).__name__}, not an object")
        for name, shapes in prof.items():
            _need(name in inputs, f"profiles[{k}] names '{name}', which is not an input")
            rank = len(inputs[name]["shape"])
            _need(isinstance(shapes, list) and len(shapes) == 3
                  and all(isinstance(s, list) and len(s) == rank and all(_is_int(d) and d >= 1 for d in s)
                          for s in shapes)
                  and all(a <= b <= c for a, b, c in zip(*shapes)),
                  f"profiles[{k}] gives '{name}' {shapes!r}, not [min, opt, max] shapes of rank {rank} with 1 <= "
                  "min <= opt <= max")
            _need(all(d == -1 or s[i] == d for s in shapes for i, d in enumerate(inputs[name]["shape"])),
                  f"profiles[{k}] gives '{name}' {shapes!r}, which disagrees with its static dims "
                  f"{inputs[name]['shape']}")
    _check_shape_tensor_header(header, inputs)
    for name, t in inputs.items():
        if -1 in t["shape"]:
            _need(header["profiles"] and all(name in prof for prof in header["profiles"]),
                  f"input '{name}' has dynamic shape {t['shape']} but not every optimization profile (there are "
                  f"{len(header['profiles'])}) gives its shapes")


def _check_shape_tensor_header(header: dict, inputs: dict) -> None:
    """The shape tensor marks of the I/O tensors and the set_shape_input values of each profile."""
    for where in ("inputs", "outputs"):
        for t in header[where]:
            _need(t.get("shape_tensor", True) is True, f"{where} '{t['name']}' has shape_tensor "
                                                         f"{t.get('shape_tensor')!r}, not true")
            _need(not t.get("shape_tensor") or (len(t["shape"]) <= 1 and all(d >= 0 for d in t["shape"])),
                  f"{where} '{t['name']}' is a shape tensor of shape {t['shape']}, not 0-D or 1-D and static")
    shape_inputs = {name: t for name, t in inputs.items() if t.get("shape_tensor")}
    values = header.get("shape_values", [{} for _ in header["profiles"]])
    _need(isinstance(values, list) and len(values) == len(header["profiles"]),
          f"'shape_values' is {values!r}, not a list with one object per profile")
    for k, prof in enumerate(values):
        _need(isinstance(prof, dict), f"shape_values[{k}] is a {type(prof).__name__}, not an object")
        for name in shape_inputs:
            _need(name in prof, f"shape_values[{k}] has no values for shape tensor input '{name}'")
        for name, v in prof.items():
            _need(name in shape_inputs, f"shape_values[{k}] names '{name}', which is not a shape tensor input")
            count = math.prod(shape_inputs[name]["shape"])
            _need(isinstance(v, list) and len(v) == 3
                  and all(isinstance(s, list) and len(s) == count and all(_is_int(d) for d in s) for s in v)
                  and all(a <= b <= c for a, b, c in zip(*v)),
                  f"shape_values[{k}] gives '{name}' {v!r}, not [min, opt, max] lists of {count} integers with "
                  "min <= opt <= max")
    _need(not shape_inputs or header["profiles"], "the plan has shape tensor inputs but no optimization profiles")


def check_arrays(header: dict, arrays: dict) -> None:
    """Raise PlanError (stage "blob") if a weight reference names no blob tensor, or a blob tensor's
    numpy type disagrees with the weight type the header gives it."""
    from .core import _STORAGE
    from .enums import DataType

    for entry in header["layers"]:
        types = entry.get("weight_types", {})
        for key, ref in entry["weights"].items():
            if key in entry.get("stripped", {}):  # left out of a weight-stripped plan (refit.py)
                continue
            if ref not in arrays:
                raise PlanError(f"layer '{entry['name']}' weight '{key}' refers to '{ref}', which the "
                                "blob does not hold", "blob")
            dt = DataType(types.get(key, DataType.FLOAT))
            want = _STORAGE.get(dt)
            if want is None or arrays[ref].dtype != np.dtype(want):
                raise PlanError(f"layer '{entry['name']}' weight '{key}' is stored as "
                                f"{arrays[ref].dtype} but the header gives it type {dt.name}", "blob")
        for key, ref in entry.get("plugin", {}).get("fields", {}).items():
            if ref not in arrays:
                raise PlanError(f"layer '{entry['name']}' plugin field '{key}' refers to '{ref}', which the "
                                "blob does not hold", "blob")

