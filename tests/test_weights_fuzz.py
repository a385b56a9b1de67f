"""Fuzzing: arbitrary and mutated weight files raise WeightsError or parse to sane tensors, nothing else."""

import io
import tempfile
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trtbuild.weights import WeightMap, WeightsError, parse_wts, write_weights, write_wts

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FILE_FUZZ = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])

names = st.from_regex(r"[a-z][a-z0-9_]{0,6}(\.[a-z0-9_]{1,6}){0,3}", fullmatch=True)
bit_patterns = st.lists(st.integers(0, 2**32 - 1), max_size=12).map(
    lambda words: np.array(words, dtype=np.uint32).view(np.float32))
tensor_dicts = st.dictionaries(names, bit_patterns, min_size=0, max_size=5)

inserts = st.sampled_from([b" ", b"  ", b"\t", b"\n", b"\r\n", b"\n\n", b"0", b"g", b"\xff",
                           b"x 1 3f800000\n", b"7\n", b"-", b"  3f800000"])
mutation = st.one_of(
    st.tuples(st.just("flip"), st.integers(0, 10**6), st.integers(1, 255)),
    st.tuples(st.just("truncate"), st.integers(0, 10**6), st.just(0)),
    st.tuples(st.just("insert"), st.integers(0, 10**6), inserts),
    st.tuples(st.just("delete"), st.integers(0, 10**6), st.integers(1, 12)),
)


def wts_bytes(tensors):
    stream = io.BytesIO()
    write_wts(stream, tensors)
    return stream.getvalue()


def mutate(data: bytes, mutations) -> bytes:
    buf = bytearray(data)
    for kind, where, arg in mutations:
        at = where % (len(buf) + 1)
        if kind == "flip" and buf:
            buf[at % len(buf)] ^= arg
        elif kind == "truncate":
            del buf[at:]
        elif kind == "insert":
            buf[at:at] = arg
        elif kind == "delete":
            del buf[at:at + arg]
    return bytes(buf)


def parse_or_weights_error(data: bytes):
    """Parse; a WeightsError is an allowed outcome (returns None), any other exception fails the test."""
    try:
        out = parse_wts(data)
    except WeightsError as exc:
        assert str(exc)
        return None
    assert all(isinstance(k, str) and k for k in out)
    assert all(a.dtype == np.float32 and a.ndim == 1 for a in out.values())
    return out


@FUZZ
@given(st.binary(max_size=3000))
def test_arbitrary_bytes(data):
    parse_or_weights_error(data)


@FUZZ
@given(st.text(alphabet="0123456789abcdefABCDEFgx. \t\r\n-", max_size=400))
def test_arbitrary_wts_like_text(text):
    parse_or_weights_error(text.encode("ascii"))


@FUZZ
@given(tensor_dicts)
def test_valid_files_round_trip_bit_exactly(tensors):
    out = parse_wts(wts_bytes(tensors))
    assert list(out) == list(tensors)
    for name, values in tensors.items():
        np.testing.assert_array_equal(out[name].view(np.uint32), values.view(np.uint32))


@FUZZ
@given(tensor_dicts, st.lists(mutation, min_size=1, max_size=3))
def test_mutated_wts_files(tensors, mutations):
    out = parse_or_weights_error(mutate(wts_bytes(tensors), mutations))
    if out is not None:  # whatever parsed must survive a canonical rewrite unchanged
        again = parse_wts(wts_bytes(out))
        assert list(again) == list(out)
        for name in out:
            np.testing.assert_array_equal(again[name].view(np.uint32), out[name].view(np.uint32))


def load_or_weights_error(path: Path):
    try:
        wm = WeightMap.load(path, allow_nonfinite=True)
    except WeightsError as exc:
        assert str(exc)
        return None
    assert all(isinstance(k, str) for k in wm.keys())
    return wm


@pytest.mark.filterwarnings("ignore:Detected pickle protocol")
@FILE_FUZZ
@given(st.sampled_from([".wts", ".safetensors", ".pt"]), st.binary(max_size=600))
def test_arbitrary_bytes_in_every_format(suffix, data):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"fuzz{suffix}"
        path.write_bytes(data)
        load_or_weights_error(path)


def valid_file(suffix: str) -> bytes:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"seed{suffix}"
        if suffix == ".pt":
            torch.save({"w": torch.arange(6.0).reshape(2, 3), "n": torch.tensor(3)}, path)
        else:
            write_weights(path, {"w": np.arange(6, dtype=np.float32).reshape(2, 3),
                                 "n": np.array(3, dtype=np.int64)})
        return path.read_bytes()


VALID = {suffix: valid_file(suffix) for suffix in (".safetensors", ".pt")}


@FILE_FUZZ
@given(st.sampled_from(sorted(VALID)), st.lists(mutation, min_size=1, max_size=2))
def test_mutated_binary_files(suffix, mutations):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"fuzz{suffix}"
        path.write_bytes(mutate(VALID[suffix], mutations))
        load_or_weights_error(path)
