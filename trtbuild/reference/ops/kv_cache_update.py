"""IKVCacheUpdateLayer: writes newly computed keys or values into a [B, N, S_max, H] cache; the output is the
updated cache. NVIDIA's KVCacheUpdate operator, KVCacheMode.LINEAR (its only mode):

- update_form PADDED_BHND (the default): update is [b, N, s, H] and, for each batch i < b and position t < s,
  output[i, :, write_indices[i] + t, :] = update[i, :, t, :];
- update_form PACKED_NHD (TensorRT 11): update is [total_tokens, N, H], the batches one after another, and
  update_lengths (input 3, set only through the attribute) is INT32 [b + 1] with the cumulative token counts, so
  batch i writes update[lengths[i]:lengths[i + 1]] from position write_indices[i] on.

Everything else of the cache is copied. "Assuming no out-of-bounds writes occur" (TensorRT 11's docs): a write past
S_max, before 0 or beyond the cache's batch, or lengths that are not a cumulative count, fail the run here.

What TensorRT-RTX 1.7 requires, checked where it does (definition, shape query or build): cache and update of one
type, FLOAT, HALF or BF16; write_indices rank 1 of the update's batch, INT32 (the operator page lists INT64 too, but
TensorRT-RTX's build refuses it: "Write indices must be of type int32"); a static S_max; the update's heads and head
size those of the cache, its batch and sequence no larger (padded); update_lengths only with PACKED_NHD. The cache
must be a network input and the output a network output (TensorRT updates the cache in place: the output "shares
the same device memory address with the cache input"), so one cache feeds one KV cache update.
"""

from __future__ import annotations

from ..core import ITensor, NetworkError
from ..enums import AttentionIOForm, DataType, KVCacheMode, LayerType
from .base import ILayer, param
from .common import f32, fail, need_float
from .registry import register

_LENGTHS = 3  # the input index of update_lengths


class IKVCacheUpdateLayer(ILayer):
    _TYPE = LayerType.KV_CACHE_UPDATE
    _MAX_INPUTS = 4
    _OPTIONAL_INPUTS = True  # update_lengths, set and cleared again, leaves an empty input 3 (as in TensorRT)
    cache_mode = param("cache_mode", KVCacheMode)
    update_form = param("update_form", AttentionIOForm)

    @classmethod
    def _type_label(cls) -> str:
        return "KVCacheUpdate"

    @property
    def update_lengths(self) -> ITensor | None:
        return self._inputs[_LENGTHS] if len(self._inputs) > _LENGTHS else None

    @update_lengths.setter
    def update_lengths(self, value) -> None:
        if value is not None:
            self._network._own(value, f"layer '{self.name}': update_lengths")
        while len(self._inputs) <= _LENGTHS:
            self._inputs.append(None)
        self._inputs[_LENGTHS] = value
        self._network._touch()

    def set_input(self, index: int, tensor: ITensor) -> None:
        if index == _LENGTHS:
            raise NetworkError(f"layer '{self.name}': input {_LENGTHS} is update_lengths; set it through the "
                               "update_lengths attribute")
        super().set_input(index, tensor)

    def _check_in_network(self) -> None:
        """What TensorRT-RTX checks when it builds: the update's shape for its form, and the in-place rules."""
        shapes = [tuple(t.shape) if t is not None else None for t in self._inputs]
        if AttentionIOForm(self._params["update_form"]) == AttentionIOForm.PACKED_NHD:
            _packed_shapes(self.name, *shapes[:3], shapes[_LENGTHS] if len(shapes) > _LENGTHS else None)
        else:
            _padded_shapes(self.name, *shapes[:3])
        cache, out = self._inputs[0], self._outputs[0]
        if not cache.is_network_input:
            fail(self.name, f"the cache '{cache.name}' is not a network input; TensorRT updates the cache in place, "
                            "so it must be one")
        if not out.is_network_output:
            fail(self.name, f"the output '{out.name}' is not a network output; TensorRT updates the cache in place, "
                            "so it must be one")
        sharing = [layer.name for layer in self._network._layers
                   if isinstance(layer, IKVCacheUpdateLayer) and layer is not self and layer._inputs[0] is cache]
        if sharing:
            fail(self.name, f"the cache '{cache.name}' also feeds the KV cache update '{sharing[0]}'; a cache is "
                            "updated in place by one layer only")


def _known(*dims) -> bool:
    return all(d != -1 for d in dims)


def infer(p, w, shapes, dtypes, name, plugin):
    cache, update, idx = (tuple(s) for s in shapes[:3])
    lengths = shapes[_LENGTHS] if len(shapes) > _LENGTHS else None
    packed = AttentionIOForm(p["update_form"]) == AttentionIOForm.PACKED_NHD
    if len(cache) != 4:
        fail(name, f"the cache has rank {len(cache)}; a KV cache update takes a rank-4 cache [batch, heads, "
                   "max sequence, head size]")
    if len(idx) != 1:
        fail(name, f"write_indices have rank {len(idx)}; they must be rank 1 [batch]")
    if len(update) not in (3, 4):
        fail(name, f"the update has rank {len(update)}; it is rank 4 (PADDED_BHND) or 3 (PACKED_NHD)")
    need_float(name, dtypes[0], "the cache")
    need_float(name, dtypes[1], "the update")
    if dtypes[1] != dtypes[0]:
        fail(name, f"the update has type {dtypes[1].name} but the cache has {dtypes[0].name}; they must be equal")
    if dtypes[2] != DataType.INT32:
        fail(name, f"write_indices have type {dtypes[2].name}; TensorRT-RTX builds INT32 write indices only")
    if cache[2] == -1:
        fail(name, "the cache's sequence dimension (dim 2) is dynamic; it must be static")
    if lengths is not None and not packed:
        fail(name, "update_lengths is set but update_form is PADDED_BHND; it is only valid with PACKED_NHD")
    if lengths is not None:
        if dtypes[_LENGTHS] != DataType.INT32:
            fail(name, f"update_lengths have type {dtypes[_LENGTHS].name}; they must be INT32")
        if len(lengths) != 1:
            fail(name, f"update_lengths have rank {len(lengths)}; they must be rank 1 [batch + 1]")
    return [cache], [dtypes[0]]


def _padded_shapes(name, cache, update, idx):
    if len(update) != 4:
        fail(name, f"the update has rank {len(update)}; with update_form PADDED_BHND it is [batch, heads, sequence, "
                   "head size]")
    for d, what in ((1, "head count"), (3, "head size")):
        if _known(update[d], cache[d]) and update[d] != cache[d]:
            fail(name, f"the update's {what} is {update[d]} but the cache's is {cache[d]}; they must be equal")
    if _known(update[0], idx[0]) and update[0] != idx[0]:
        fail(name, f"the update's batch is {update[0]} but write_indices have {idx[0]}; they must be equal")
    for d, what in ((0, "batch"), (2, "sequence length")):
        if _known(update[d], cache[d]) and update[d] > cache[d]:
            fail(name, f"the update's {what} {update[d]} is larger than the cache's {cache[d]}")


def _packed_shapes(name, cache, update, idx, lengths):
    if lengths is None:
        fail(name, "update_form is PACKED_NHD but update_lengths is not set")
    if len(update) != 3:
        fail(name, f"the update has rank {len(update)}; with update_form PACKED_NHD it is [total tokens, heads, "
                   "head size]")
    for d, c, what in ((1, 1, "head count"), (2, 3, "head size")):
        if _known(update[d], cache[c]) and update[d] != cache[c]:
            fail(name, f"the update's {what} is {update[d]} but the cache's is {cache[c]}; they must be equal")
    if _known(lengths[0], idx[0]) and lengths[0] != idx[0] + 1:
        fail(name, f"update_lengths have {lengths[0]} elements but write_indices {idx[0]}; there must be one more "
                   "(cumulative counts starting at 0)")


def _write(out, i, start, rows):
    """out[i, :, start:start + len, :] = rows ([N, len, H]), refusing a write outside the cache."""
    count = rows.shape[1]
    if not (0 <= i < out.shape[0] and 0 <= start and start + count <= out.shape[2]):
        raise IndexError(f"KV cache update: batch {i} writes positions [{start}, {start + count}) outside a cache of "
                         f"batch {out.shape[0]} and max sequence {out.shape[2]}")
    out[i, :, start:start + count] = rows


def run(p, w, inputs, plugin):
    out, update = f32(inputs[0]).clone(), f32(inputs[1])
    starts = inputs[2].long().tolist()
    lengths = inputs[_LENGTHS] if len(inputs) > _LENGTHS else None
    if AttentionIOForm(p["update_form"]) == AttentionIOForm.PACKED_NHD:
        bounds = lengths.long().tolist()
        for i, start in enumerate(starts):
            lo, hi = bounds[i], bounds[i + 1]
            if not 0 <= lo <= hi <= update.shape[0]:
                raise IndexError(f"KV cache update: update_lengths {bounds} are not cumulative counts of the "
                                 f"{update.shape[0]} tokens")
            _write(out, i, start, update[lo:hi].transpose(0, 1))
    else:
        for i, start in enumerate(starts):
            _write(out, i, start, update[i])
    return [out]


def add_kv_cache_update(self, cache: ITensor, update: ITensor, write_indices: ITensor,
                        cache_mode: KVCacheMode) -> IKVCacheUpdateLayer:
    return self._add(IKVCacheUpdateLayer, [cache, update, write_indices],
                     {"cache_mode": int(KVCacheMode(cache_mode)), "update_form": int(AttentionIOForm.PADDED_BHND)})


register(IKVCacheUpdateLayer, infer, run, adds=(add_kv_cache_update,))
