"""Check at build time, by defining the network again from perturbed weights, that every weight name says what
its weights hold, and bake every key whose values went into weights no name covers.

Why: the names come from following arrays (trtbuild.weights.provenance) and from what the builders declare
(trtbuild.layers.weight_names), and both can be fooled: a key's array used whole in one layer and ``* 2`` in
another, a key a named Conv+BN fold reads also read into a computed weight, a builder that scales a named slice
(``dataclasses.replace(w, q_weight=w.q_weight * 0.5)``). A refit of such a network would be accepted and compute
with stale or wrong weights. Perturbing the weights and comparing the two networks weight slot by weight slot
(same layer index and role) sees every such case, whatever code made the weights:

- a named slot must hold exactly ``source_values(source, perturbed state)`` in its type (a few ulps: folds are
  computed in float64 and cast), else its name is wrong: it is cleared and every key of its source is baked;
- an unnamed slot whose values changed depends on a key that names cover: the keys are found by bisection over
  those keys (each step defines the network once more, perturbing half of a group), within
  ``2 * ceil(log2(n + 1)) + 4`` extra definitions; when they run out, every key of the groups still open is baked.
  Halves find the keys that change a slot alone; keys that change one only together (a weight computed from two
  keys' values) would be dropped, so the keys left are perturbed once more at the end, and all baked if an
  unnamed slot still changes.

The perturbed values are a context-local overlay (trtbuild.weights.provenance.overlaid) that every WeightMap read
of the second definition answers with: the user's arrays are never written, a build in another thread reading the
same WeightMap meanwhile reads its own values, and a WeightMap made inside the network function reads them too
(the overlay is keyed by state_dict key). Each float key's element v becomes ``s * v * (1 + u) + t`` (float64,
cast back; u uniform in [0.1, 0.2], s = -1 on a random half, |t| uniform in [0.3, 0.4] with a random sign,
seeded by the key): one perturbation that has no common fixed point (an affine map ``v * (1 + u) + u`` keeps
v = -1), moves values both up and down (so clamps, ``np.maximum``, masks and signs of either side move), flips
signs, and changes every value by at least 0.1 or 10 %, which survives fp16 rounding; a BatchNorm
``running_var`` becomes ``v * (1 + u) + |t|`` (it stays positive). A second definition is the cost, paid by
refittable builds only. A definition that fails, has another structure, or whose layers' attributes differ
(trtbuild.engine.cache_key.network_structure: an activation's alpha, a padding, a reshape computed from a key's
values) cannot be compared: every key names cover is baked then. So is every such key when a weight slot's
values cannot be read from Python (TensorRT's BF16 weights): an unchecked slot never passes.

Limits: the network function must depend only on the weights it reads (a weight computed from a key and cached
across calls is not recomputed from the perturbed values), and a plain numpy array handed to a layer beside a
WeightMap is not traced to any key.
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass

import numpy as np

from trtbuild.backend import trt_of
from trtbuild.weights.provenance import overlaid

from .cache_key import network_structure
from trtbuild.layers.common import network_store
from trtbuild.layers.weight_names import (_MEMORY, _memory, bake, baked_keys, journal_of, source_values, unname,
                                          weight_sources)

#: the weights of each layer type, by the attributes TensorRT's Python API gives them
_ROLES = {"CONVOLUTION": ("kernel", "bias"), "DECONVOLUTION": ("kernel", "bias"),
          "SCALE": ("shift", "scale", "power"), "CONSTANT": ("weights",)}
_CLASSES = {"CONVOLUTION": "IConvolutionLayer", "DECONVOLUTION": "IDeconvolutionLayer", "SCALE": "IScaleLayer",
            "CONSTANT": "IConstantLayer"}
_EPS = {"FLOAT": 2.0 ** -23, "HALF": 2.0 ** -10, "BF16": 2.0 ** -7}

_VERIFIED: dict[int, bool] = {}


@dataclass
class Slot:
    """One weights of a layer: (layer index, role), the weights object, its values (None where Python cannot
    see them), their TensorRT type name and the name set_weights_name gave them (or None)."""

    where: tuple
    weights: object
    values: np.ndarray | None
    dtype: str
    name: str | None


def slots(network) -> list[Slot]:
    """Every non-empty weights of `network`'s layers, in layer order."""
    out = []
    by_memory = {m: n for n, m in _MEMORY.get(id(network), {}).items() if m is not None}
    for index in range(network.num_layers):
        layer = network.get_layer(index)
        held = getattr(layer, "_weights", None)
        if isinstance(held, dict):  # the reference keeps every layer's weights by role, and their names
            items = sorted(held.items())
            name_of = network._weights_name
        else:
            kind = layer.type.name
            if kind not in _ROLES:
                continue
            layer.__class__ = getattr(trt_of(network), _CLASSES[kind])
            items = [(role, getattr(layer, role, None)) for role in _ROLES[kind]]

            def name_of(w):
                return by_memory.get(_memory(w))  # the key _MEMORY records a name's weights under
        for role, w in items:
            if w is None or not getattr(w, "size", 0):
                continue
            values, dtype = _values(w)
            out.append(Slot((index, role), w, values, dtype, name_of(w)))
    return out


def _values(w) -> tuple[np.ndarray | None, str]:
    dtype = None if isinstance(w, np.ndarray) else getattr(getattr(w, "dtype", None), "name", None)
    try:
        arr = w.numpy() if hasattr(w, "numpy") else w
    except (TypeError, ValueError, KeyError):
        arr = None
    if not isinstance(arr, np.ndarray):  # TensorRT's BF16 Weights have no numpy view
        return None, str(dtype)
    arr = arr.reshape(-1).copy()  # TensorRT's arrays view memory the network holds; a perturbed one is dropped
    if not isinstance(dtype, str):  # TensorRT's layers give numpy arrays
        dtype = {"float32": "FLOAT", "float16": "HALF"}.get(str(arr.dtype), str(arr.dtype))
    return arr, dtype


def perturbed(key: str, value: np.ndarray) -> np.ndarray:
    """`value` changed deterministically (seeded by `key`): ``s * v * (1 + u) + t`` per element, u uniform in
    [0.1, 0.2], s = -1 on a random half of the elements, t uniform in [0.3, 0.4] with a random sign; a BatchNorm
    ``running_var`` becomes ``v * (1 + u) + t`` (positive). See the module doc for why this shape."""
    rng = np.random.default_rng(zlib.crc32(key.encode()))
    shape = np.shape(value)
    u = rng.uniform(0.1, 0.2, size=shape)
    t = rng.uniform(0.3, 0.4, size=shape)
    s = np.where(rng.random(size=shape) < 0.5, -1.0, 1.0)
    if key.endswith("running_var"):
        s = np.ones(shape)
    else:
        t = t * np.where(rng.random(size=shape) < 0.5, -1.0, 1.0)
    return np.ascontiguousarray((s * np.asarray(value, dtype=np.float64) * (1 + u) + t).astype(value.dtype))


def _holds(slot: Slot, want: np.ndarray) -> bool:
    """Whether `slot` holds `want` (float32 values) in its type, within a few ulps (False where Python cannot
    read the slot's values)."""
    if slot.values is None:
        return False
    if slot.values.size != want.size:
        return False
    want = want.reshape(-1).astype(np.float64)
    if slot.dtype == "BF16":
        import torch

        want = torch.from_numpy(want.astype(np.float32)).to(torch.bfloat16).float().numpy().astype(np.float64)
    elif slot.dtype == "HALF":
        want = want.astype(np.float16).astype(np.float64)
    eps = _EPS.get(slot.dtype)
    if eps is None:
        return False
    got = slot.values.astype(np.float64)
    scale = float(np.abs(want).max()) if want.size else 0.0
    return bool(np.all(np.abs(got - want) <= 16 * eps * (np.abs(want) + 1e-3 * scale) + 1e-30))


def _same_structure(a: list[Slot], b: list[Slot]) -> bool:
    return len(a) == len(b) and all(x.where == y.where and x.dtype == y.dtype and
                                    (x.values is None) == (y.values is None) and
                                    (x.values is None or x.values.size == y.values.size) for x, y in zip(a, b))


def verified(network) -> bool:
    """Whether :func:`verify_names` checked `network`."""
    return bool(_VERIFIED.get(id(network)))


def verify_names(network, redefine) -> None:
    """Check `network`'s weight names by defining it again (`redefine()`: a DefinedNetwork of the same
    definition, on the same backend) from perturbed values; clear wrong names and bake keys (see the module doc)."""
    book = journal_of(network)
    sources = weight_sources(network)
    network_store(_VERIFIED, network, lambda: True)
    maps = list(book.maps.values()) if book is not None else []
    if not maps or not sources:
        return
    state = {}
    for wm in maps:
        state.update(wm._store)
    before = slots(network)
    trt = trt_of(network)
    structure = network_structure(network, trt)

    def candidates() -> list[str]:
        baked = set(baked_keys(network))
        covered = {k for s in weight_sources(network).values() for k in s.keys}
        return sorted(k for k in covered - baked if k in state and np.asarray(state[k]).dtype.kind == "f")

    def bake_all(subset) -> None:
        bake(network, {k: state[k] for k in subset})

    keys = candidates()
    if any(s.values is None for s in before):  # a slot Python cannot read cannot be checked
        return bake_all(keys)
    values = {k: perturbed(k, np.asarray(state[k])) for k in keys}

    def define(subset) -> list[Slot] | None:
        with overlaid({k: values[k] for k in subset}):
            try:
                other = redefine()  # held while its slots are read: TensorRT's builder owns the network's memory
            except Exception:  # noqa: BLE001 - a definition the perturbed values break cannot be compared
                return None
        after = slots(other.network)
        if not _same_structure(before, after) or network_structure(other.network, trt) != structure:
            return None  # other layers, or a layer attribute computed from the values: not comparable
        return after

    after = define(keys)
    if after is None:
        return bake_all(keys)
    perturbed_state = {**state, **values}
    wrong = set()
    for old, new in zip(before, after):
        source = sources.get(old.name) if old.name is not None else None
        if source is None or old.name in wrong:
            continue
        try:
            want = source_values(source, perturbed_state)
        except (KeyError, ValueError):
            want = None
        if want is None or not _holds(new, want):
            wrong.add(old.name)
    for old in before:
        if old.name in wrong:
            network.set_weights_name(old.weights, None)
    for name in wrong:
        unname(network, name)
    unnamed = [i for i, s in enumerate(before) if s.name is None or s.name in wrong]

    def dirty(result) -> bool:
        return result is None or any(not np.array_equal(before[i].values, result[i].values) for i in unnamed)

    if wrong:
        keys = candidates()
        after = define(keys) if keys else None
    if not keys or not dirty(after):
        return
    _bisect(keys, define, dirty, bake_all)
    left = candidates()  # keys that act only together with a key baked alone are not found by halves
    if left and dirty(define(left)):
        bake_all(left)


def _bisect(keys: list[str], define, dirty, bake_all) -> None:
    """Bake the keys (of `keys`, which together dirty an unnamed slot) that dirty one alone, by halves."""
    budget = 2 * math.ceil(math.log2(len(keys) + 1)) + 4
    groups = [keys]
    while groups:
        group = groups.pop()
        if len(group) == 1:
            bake_all(group)
            continue
        if budget < 2:
            bake_all([k for g in (group, *groups) for k in g])
            return
        half = len(group) // 2
        found = []
        for part in (group[:half], group[half:]):
            budget -= 1
            if dirty(define(part)):
                found.append(part)
        groups.extend(found or [group[:half], group[half:]])  # neither half alone: the keys act together
