"""trtbuild.weights.provenance: an array is a state_dict key's values only when it is that key's memory, whole.

Expected answers come from numpy's own notion of the arrays (views share memory, slices and computed arrays do
not) and hand reasoning about which arrays are the key's unchanged values.
"""

from __future__ import annotations

import gc

import numpy as np
import pytest

from trtbuild.weights import WeightMap
from trtbuild.weights.provenance import alias, journal, key_of, origin_of, track


@pytest.fixture
def wm():
    rng = np.random.default_rng(0)
    return WeightMap({"layer.weight": rng.standard_normal((4, 3)).astype(np.float32),
                      "layer.flat": rng.standard_normal(12).astype(np.float32),
                      "half": rng.standard_normal(6).astype(np.float16)})


def test_a_read_and_its_reshapes_are_the_key(wm):
    w = wm.get("layer.weight")
    assert key_of(w) == "layer.weight"
    assert key_of(w.reshape(12)) == "layer.weight" and key_of(w.reshape(1, 4, 3)) == "layer.weight"
    assert key_of(wm.prefix("layer").get("flat", (3, 4))) == "layer.flat"  # the full key, through a prefix view


def test_slices_transposes_copies_and_computed_arrays_are_not(wm):
    w = wm.get("layer.weight")
    assert key_of(w[:2]) is None and key_of(w[1:]) is None
    assert key_of(w.T) is None and key_of(np.ascontiguousarray(w.T)) is None
    assert key_of(w * 1) is None and key_of(w.copy()) is None and key_of(w.astype(np.float64)) is None
    assert key_of(w.view(np.int32)) is None  # the same bytes as another type
    assert key_of(wm.get("layer.weight", copy=True)) is None  # the caller's to change
    assert key_of(np.zeros((4, 3), np.float32)) is None


def test_a_converted_read_is_the_key_and_reads_are_counted(wm):
    h = wm.get("half")  # float16 stored: get converts
    assert h.dtype == np.float32 and key_of(h) == "half"
    wm.get("half")
    wm.get("half", copy=True)
    assert origin_of(h).reads == 3  # a copy counts as a read (it may become a computed weight)
    assert origin_of(h).stored_shape == (6,) and origin_of(h).read_shape is None
    wm.get("half", (2, 3))
    assert origin_of(h).read_shape == (2, 3)


def test_an_exact_float64_copy_can_keep_the_key(wm):
    w = wm.get("layer.weight")
    wide = alias(w.astype(np.float64), w)
    assert key_of(wide) == "layer.weight" and key_of(wide.reshape(-1)) == "layer.weight"
    assert key_of(alias(np.ones(3), np.ones(3, np.float32))) is None  # an untracked source gives nothing


def test_an_array_that_died_is_not_matched_by_new_memory_at_its_address():
    a = np.arange(64, dtype=np.float32)
    track(a, "gone")
    address, nbytes = a.__array_interface__["data"][0], a.nbytes
    del a
    gc.collect()
    reused = False
    for _ in range(200):
        b = np.empty(nbytes // 4, np.float32)
        if b.__array_interface__["data"][0] == address:
            reused = True
            assert key_of(b) is None
            break
    if not reused:
        pytest.skip("the allocator did not hand out the freed address again")


def test_a_journal_notes_the_reads_made_while_it_is_open(wm):
    """Reads inside the block are the journal's (full keys, through a prefix view; raw too), with the stored array
    read; reads outside any journal are counted apart as loose; an inner journal takes its block's reads only."""
    wm.get("half")  # outside: loose
    with journal() as outer:
        wm.prefix("layer").get("weight")
        wm.get("layer.weight", copy=True)
        raw = wm.raw("half")
        with journal() as inner:
            wm.get("layer.flat")
        wm.get("half")
    assert outer.reads == {"layer.weight": 2, "half": 2} and inner.reads == {"layer.flat": 1}
    assert outer.values("half") is raw and outer.values("layer.flat") is None
    assert outer.values("layer.weight") is wm.raw("layer.weight")
    half = origin_of(wm.get("half"))  # outside again: loose
    assert half.reads == 3 and half.loose_reads == 2
    assert origin_of(wm.get("layer.weight")).loose_reads == 1
