"""The reference plan: a serialized network the reference runtime can load and run.

Layout: MAGIC | u64 header length | JSON header | u64 blob length | safetensors blob | sha256.
No pickle: the header is JSON and the weights are safetensors. The checksum makes truncated or
altered plans fail with a clear message.
"""

from __future__ import annotations

import hashlib
import math
import json
import struct

import numpy as np
from safetensors.numpy import load as st_load, save as st_save

from .core import NetworkError

MAGIC = b"TRTBREF\x01"
FORMAT_VERSION = 1


class PlanError(ValueError):
    """The bytes are not a valid reference plan."""


def _topological(network) -> list:
    produced_by = {id(t): layer for layer in network._layers for t in layer._outputs}
    needed, order, seen = set(), [], set()

    def visit(layer):
        if id(layer) in seen:
            return
        seen.add(id(layer))
        for t in layer._inputs:
            if t is not None and id(t) in produced_by:
                visit(produced_by[id(t)])
        order.append(layer)

    for t in network._outputs:
        if id(t) in produced_by:
            visit(produced_by[id(t)])
    needed.update(id(lay) for lay in order)
    return order


def serialize_network(network, profiles: list[dict], extra: dict) -> bytes:
    """Turn a validated network into plan bytes. Unused layers are pruned, as TensorRT does."""
    layers = _topological(network)
    ids: dict[int, int] = {}

    def tid(t) -> int:
        return ids.setdefault(id(t), len(ids))

    arrays: dict[str, np.ndarray] = {}
    inputs = [{"id": tid(t), "name": t.name, "dtype": int(t.dtype), "shape": list(t.shape)} for t in network._inputs]
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
                arrays[ref] = w._array  # stored bits; BF16 as uint16 patterns
                entry["weights"][key] = ref
                entry.setdefault("weight_types", {})[key] = int(w.dtype)
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
    outputs = [{"id": tid(t), "name": t.name, "dtype": int(t.dtype), "shape": list(t.shape)} for t in network._outputs]
    header = {"format": FORMAT_VERSION, "name": network.name, "inputs": inputs, "outputs": outputs,
              "layers": out_layers, "profiles": profiles, **extra}
    hj = json.dumps(header, separators=(",", ":")).encode()
    blob = st_save(arrays) if arrays else b""
    body = MAGIC + struct.pack("<Q", len(hj)) + hj + struct.pack("<Q", len(blob)) + blob
    return body + hashlib.sha256(body).digest()


def deserialize_plan(data: bytes) -> tuple[dict, dict[str, np.ndarray]]:
    """Parse plan bytes; raise PlanError saying what is wrong."""
    data = data if isinstance(data, bytes) else bytes(data)
    if len(data) < len(MAGIC) + 8 or not data.startswith(MAGIC):
        raise PlanError("not a trtbuild reference plan (bad magic bytes): was it built by real TensorRT, or is it another file?")
    if len(data) < len(MAGIC) + 16 + 32:
        raise PlanError(f"reference plan is truncated ({len(data)} bytes)")
    body, digest = data[:-32], data[-32:]
    (hlen,) = struct.unpack_from("<Q", body, len(MAGIC))
    pos = len(MAGIC) + 8
    if pos + hlen + 8 > len(body):
        raise PlanError(f"reference plan is truncated: header says {hlen} bytes, file has {len(body) - pos}")
    if hashlib.sha256(body).digest() != digest:
        raise PlanError("reference plan is corrupt or truncated (checksum mismatch)")
    header = json.loads(body[pos:pos + hlen])
    pos += hlen
    (blen,) = struct.unpack_from("<Q", body, pos)
    blob = body[pos + 8:pos + 8 + blen]
    if header.get("format") != FORMAT_VERSION:
        raise PlanError(f"reference plan format {header.get('format')} is not supported (this trtbuild reads {FORMAT_VERSION})")
    return header, (st_load(blob) if blen else {})


def check_profile(name: str, shape, profile_shapes) -> str | None:
    """None if `shape` fits [min, max] of the profile, else the reason."""
    mn, _, mx = profile_shapes
    if len(shape) != len(mn):
        return f"input '{name}': rank {len(shape)} differs from the engine's rank {len(mn)}"
    for i, (d, lo, hi) in enumerate(zip(shape, mn, mx)):
        if not lo <= d <= hi:
            return f"input '{name}': dimension {i} is {d}, outside the optimization profile range [{lo}, {hi}]"
    return None


def validate_profiles(network, profiles: list[dict]) -> None:
    """Each dynamic input needs a profile; profiles must satisfy min <= opt <= max and match static dims."""
    for t in network._inputs:
        dynamic = any(d < 0 for d in t.shape)
        if dynamic and not profiles:
            raise NetworkError(f"input '{t.name}' has dynamic shape {tuple(t.shape)}: add an optimization profile with set_shape")
        for k, prof in enumerate(profiles):
            if t.name not in prof:
                if dynamic:
                    raise NetworkError(f"optimization profile {k} has no shapes for dynamic input '{t.name}'")
                continue
            mn, opt, mx = prof[t.name]
            if not len(mn) == len(opt) == len(mx) == len(t.shape):
                raise NetworkError(f"optimization profile {k}, input '{t.name}': min/opt/max ranks must equal the input rank {len(t.shape)}")
            for i, (d, a, b, c) in enumerate(zip(t.shape, mn, opt, mx)):
                if not 1 <= a <= b <= c:
                    raise NetworkError(f"optimization profile {k}, input '{t.name}' dim {i}: need 1 <= min <= opt <= max, got {a}, {b}, {c}")
                if d >= 0 and not a == b == c == d:
                    raise NetworkError(f"optimization profile {k}, input '{t.name}' dim {i} is static ({d}) but the profile gives {a}/{b}/{c}")
    for k, prof in enumerate(profiles):
        _check_profile_shapes(network, k, prof)


def _shapes_at(network, which: int, prof: dict, on_error):
    """Shape inference of the needed layers with every input at its min (0), opt (1) or max (2)
    profile shape; on_error(layer, error, input shapes) gives the outputs where inference fails."""
    from .infer import infer_layer

    shapes = {id(t): tuple(prof[t.name][which]) if t.name in prof else tuple(t.shape) for t in network._inputs}
    dtypes = {id(t): t.dtype for t in network._inputs}
    for layer in _topological(network):
        ins = [None if t is None else shapes.get(id(t)) for t in layer._inputs]
        in_types = [None if t is None else dtypes.get(id(t), t.dtype) for t in layer._inputs]
        try:
            outs, dts = infer_layer(layer._TYPE, layer._params, layer._weights, ins, in_types, layer.name,
                                    plugin=getattr(layer, "_plugin", None))
        except NetworkError as e:
            outs, dts = on_error(layer, e, ins, in_types)
        for t, s, d in zip(layer._outputs, outs, dts):
            shapes[id(t)], dtypes[id(t)] = tuple(s), d
    return shapes


def _check_profile_shapes(network, k: int, prof: dict) -> None:
    """The build-time shape checks TensorRT-RTX makes with a profile ("kOPT values for profile 0 violate
    shape constraints"), as observed: a reshape or slice must work at the opt shapes; any other layer
    that fails at opt but works at max is rejected too (a dim that fails at max as well is taken to be
    1 there, left to run time); a scale layer's weight count must fit some input shape between min
    and max (a CHANNEL dim unknown at build time, or the volume an ELEMENTWISE scale covers)."""
    from .enums import LayerType, ScaleMode

    failures: list[dict] = [{}, {}, {}]
    shapes = []
    for which in range(3):
        def on_error(layer, error, ins, in_types, which=which):
            failures[which][id(layer)] = error
            return layer._infer()
        shapes.append(_shapes_at(network, which, prof, on_error))
    opt = {name: tuple(s[1]) for name, s in prof.items()}
    for layer in _topological(network):
        error = failures[1].get(id(layer))
        if error is None or layer._TYPE == LayerType.SCALE:
            continue
        if layer._TYPE in (LayerType.SHUFFLE, LayerType.SLICE) or id(layer) not in failures[2]:
            raise NetworkError(f"optimization profile {k}, at its opt shapes {opt}: {error}")
    for layer in _topological(network):
        if layer._TYPE != LayerType.SCALE:
            continue
        lo, hi = (shapes[which][id(layer._inputs[0])] for which in (0, 2))
        p = layer._params
        count = max(w.size for w in (layer._weights[key] for key in ("shift", "scale", "power")))
        mode, axis = ScaleMode(p["mode"]), p["channel_axis"] % len(lo)
        if not count or mode == ScaleMode.UNIFORM:
            continue
        end = axis + 1 if mode == ScaleMode.CHANNEL else len(lo)
        vol_lo, vol_hi = (math.prod(s[axis:end]) for s in (lo, hi))
        if not vol_lo <= count <= vol_hi:
            raise NetworkError(f"layer '{layer.name}': {count} weights per coefficient, but optimization profile {k} "
                               f"gives the {mode.name} dims from channel_axis {axis} volumes {vol_lo}..{vol_hi}")
