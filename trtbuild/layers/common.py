"""Small helpers every builder uses: naming, None checks, typed constants."""

from __future__ import annotations

import weakref

import numpy as np

from trtbuild.backend import trt_of
from trtbuild.weights.provenance import origin_of


class BuilderError(ValueError):
    """A builder was given parameters it cannot build; the message names the layer."""


_KEEP: dict[int, list] = {}


def keep_alive(network, array: np.ndarray) -> np.ndarray:
    """Hold `array` as long as `network` lives.

    Real TensorRT's trt.Weights does not copy numpy memory: the builder reads it by pointer at
    build time, so a temporary array freed before then silently corrupts the engine.
    """
    network_store(_KEEP, network, list).append(array)
    return array


def network_store(store: dict, network, empty):
    """`store`'s entry for `network` (keyed by id: TensorRT's network objects take no attributes), made by
    `empty()` on first use and dropped when the network is collected."""
    key = id(network)
    if key not in store:
        store[key] = empty()
        try:
            weakref.finalize(network, store.pop, key, None)
        except TypeError:  # no weakref support: keep the entry for the life of the process
            pass
    return store[key]


def named(layer, name: str):
    """Name a freshly added layer and its outputs; raise if TensorRT returned None.

    Real TensorRT returns None (and logs) when it rejects a layer; failing here names the layer
    instead of an AttributeError three lines later.
    """
    if layer is None:
        raise BuilderError(f"TensorRT rejected layer '{name}' (see the TensorRT log above for why)")
    layer.name = name
    for i in range(layer.num_outputs):
        layer.get_output(i).name = name if layer.num_outputs == 1 else f"{name}:{i}"
    return layer


def out(layer, name: str):
    """Name the layer and return its (first) output tensor."""
    return named(layer, name).get_output(0)


def np_dtype(network, tensor) -> np.dtype:
    """The numpy dtype that weights and constants combined with `tensor` must have.

    Strongly typed networks do not convert implicitly, so an fp16 tensor needs fp16 weights.
    BF16 has no numpy type; builders cast around such tensors instead.
    """
    trt = trt_of(network)
    dt = tensor.dtype
    if dt == trt.DataType.FLOAT:
        return np.dtype(np.float32)
    if dt == trt.DataType.HALF:
        return np.dtype(np.float16)
    raise BuilderError(f"tensor '{tensor.name}' has type {getattr(dt, 'name', dt)}; numpy weights exist for FLOAT "
                       "and HALF only (use trt_weights, which also makes BF16 weights)")


def weights(network, tensor, array) -> np.ndarray:
    """`array` as a contiguous numpy array in the type `tensor` needs, kept alive with the network.

    The result is a read-only view: an array that already has that type and layout is not copied,
    and neither TensorRT nor the reference backend copies a read-only array, so a model's weights
    are not duplicated while the network holds them. Others are converted through float64.
    An array that is a state_dict key's values (trtbuild.weights.provenance) is converted once per
    network and type, so that every layer using the key holds the same memory, which
    trtbuild.layers.weight_names.name_tracked_weights then names after the key."""
    return typed_array(network, np_dtype(network, tensor), array)


def typed_array(network, target, array, overflow_ok: bool = False) -> np.ndarray:
    """`array` in numpy type `target` (float32 or float16), read-only and kept alive with the network: what
    :func:`weights` makes for a tensor's type; a key's values are converted once per network (see there).
    Values beyond float16's range become inf, silently with `overflow_ok` (naive fp16 builds overflow on
    purpose), else with numpy's overflow warning."""
    arr = np.asarray(array)
    target = np.dtype(target)
    origin = origin_of(arr)
    if origin is not None:
        return _tracked(network, origin, arr, target.name,
                        lambda: arr if arr.dtype == target else _converted(arr, target, overflow_ok)
                        ).reshape(arr.shape)
    if arr.dtype != target:
        arr = _converted(arr, target, overflow_ok)
    view = np.ascontiguousarray(arr).view()
    view.flags.writeable = False
    return keep_alive(network, view)


def _converted(arr: np.ndarray, target: np.dtype, overflow_ok: bool) -> np.ndarray:
    if not overflow_ok:
        return np.asarray(arr, dtype=np.float64).astype(target)
    with np.errstate(over="ignore"):
        return np.asarray(arr, dtype=np.float64).astype(target)


class TrackedKey:
    """The uses of one state_dict key in one network: its Origin, the one array (or trt.Weights, for BF16) per
    type that every use of the key holds, the shape of its first use, how often this network used it whole
    (``uses``), and `mixed`: the key came from two stored tensors (two WeightMaps)."""

    def __init__(self, origin, use_shape):
        self.origin, self.held, self.mixed, self.uses = origin, {}, False, 0
        self.use_shape = tuple(int(d) for d in use_shape)

    @property
    def shape(self) -> tuple[int, ...]:
        """The shape a refit reads the key with: as stored (N-D), else as the builder read it (a .wts row read
        with WeightMap.get's shape, or used with the shape of its first use), so that a flat .wts row and a
        PyTorch state_dict's N-D tensor of the same key both fit."""
        o = self.origin
        if len(o.stored_shape) > 1:
            return o.stored_shape
        return o.read_shape or self.use_shape


_TRACKED: dict[int, dict] = {}


def tracked_keys(network) -> dict:
    """{state_dict key: TrackedKey} of the keys whose values `network`'s layers were given unchanged."""
    return dict(_TRACKED.get(id(network), {}))


def _tracked(network, origin, arr, tag: str, make):
    """The one read-only array (or Weights) of key `origin` in type `tag` for `network`, made by `make()` on
    first use; every call counts one whole use of the key."""
    uses = network_store(_TRACKED, network, dict)
    entry = uses.get(origin.key)
    if entry is None:
        entry = uses[origin.key] = TrackedKey(origin, np.shape(arr))
    elif entry.origin is not origin:
        entry.mixed = True
    origin.uses += 1
    entry.uses += 1
    held = entry.held.get(tag)
    if held is None:
        held = make()
        if isinstance(held, np.ndarray):
            held = np.ascontiguousarray(held).reshape(-1).view()
            held.flags.writeable = False
        entry.held[tag] = keep_alive(network, held)
    return held


def trt_weights(network, like, array):
    """trt.Weights holding `array` in the type of tensor `like` (FLOAT, HALF or BF16), its memory
    kept alive with the network. BF16 has no numpy type, so it goes through TensorRT's
    Weights(type, ptr, count) overload with the bf16 bit patterns (rounded to nearest even); a key's
    values (see :func:`weights`) get one such Weights per network, shared by every layer using them."""
    trt = trt_of(network)
    if like.dtype == trt.DataType.BF16:
        origin = origin_of(np.asarray(array))
        if origin is not None:
            return _tracked(network, origin, array, "bf16", lambda: _bf16_weights(network, array))
        return _bf16_weights(network, array)
    return trt.Weights(weights(network, like, array))


def _bf16_weights(network, array):
    import torch

    trt = trt_of(network)
    f32 = torch.from_numpy(np.array(array, dtype=np.float32))  # a copy: WeightMap.get's arrays are read-only
    bits = keep_alive(network, np.ascontiguousarray(f32.to(torch.bfloat16).view(torch.int16).numpy()))
    return trt.Weights(trt.DataType.BF16, bits.ctypes.data, bits.size)


def constant(network, array, like, name: str):
    """A constant tensor of `array`'s shape, typed like tensor `like` (FLOAT, HALF or BF16)."""
    trt = trt_of(network)
    shape = np.shape(array)
    return out(network.add_constant(trt.Dims(shape), trt_weights(network, like, array)), name)

