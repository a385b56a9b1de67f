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


# -- valid header and count, malformed body -------------------------------------------------------
# Random bytes almost all stop at the header line. These files have a valid header and tensor
# count and well-formed lines, in canonical or loose spacing, with one defect in the body.

BODY_DEFECTS = ("count_more", "count_less", "name_not_utf8", "name_whitespace", "no_count", "bad_count",
                "values_mismatch", "bad_word", "duplicate")


@st.composite
def malformed_bodies(draw, defects=BODY_DEFECTS):
    """(defect, file bytes): a .wts file whose header is a valid count, with one defect (of `defects`) in the
    body."""
    tensors = draw(st.lists(st.tuples(names, st.lists(st.integers(0, 2**32 - 1), max_size=6)),
                            min_size=1, max_size=4, unique_by=lambda t: t[0]))
    sep = draw(st.sampled_from([b" ", b"  ", b"\t", b" \t "]))
    words = [[b"%08x" % w for w in ws] for _, ws in tensors]
    heads = [[name.encode(), str(len(ws)).encode()] for name, ws in tensors]
    defect = draw(st.sampled_from(defects))
    i = draw(st.integers(0, len(tensors) - 1))
    count = len(tensors)
    if defect == "count_more":
        count += draw(st.integers(1, 3))
    elif defect == "count_less":
        count = draw(st.integers(0, len(tensors) - 1))
    elif defect == "name_not_utf8":
        heads[i][0] = draw(st.sampled_from([b"\xff", b"\xc3", b"\x80"])) + heads[i][0]
    elif defect == "name_whitespace":  # Unicode whitespace that bytes.split does not split at
        heads[i][0] += draw(st.sampled_from(["\u00a0", "\u2003", "\u3000", "\x1c", "\x85"])).encode() + b"x"
    elif defect == "no_count":
        heads[i], words[i] = heads[i][:1], []
    elif defect == "bad_count":
        heads[i][1] = draw(st.sampled_from(["-1", "1.0", "x", "+1", "0x1", "\u0661", "1e2"])).encode()
    elif defect == "values_mismatch":
        n = len(words[i])
        heads[i][1] = str(draw(st.integers(0, n + 3).filter(lambda c: c != n))).encode()
    elif defect == "bad_word":
        if not words[i]:
            words[i], heads[i][1] = [b"3f800000"], b"1"
        j = draw(st.integers(0, len(words[i]) - 1))
        words[i][j] = draw(st.sampled_from([b"3f80000", b"3f8000000", b"0x3f8000", b"3f80000g", b"zzzzzzzz",
                                            b"3f800000,", b"3F80_000", b"\xff\xff\xff\xff\xff\xff\xff\xff"]))
    else:  # duplicate: another line with a name already used
        heads.append([heads[i][0], b"0"])
        words.append([])
        count += 1
    eol = draw(st.sampled_from([b"\n", b"\r\n"]))
    lines = [sep.join(h + w) for h, w in zip(heads, words)]
    if draw(st.booleans()):  # blank lines are allowed anywhere after the header
        lines.insert(draw(st.integers(0, len(lines))), b"")
    return defect, str(count).encode() + eol + eol.join(lines) + eol


def _refused_with_one_sentence(data: bytes, path: Path) -> WeightsError:
    path.write_bytes(data)
    try:
        WeightMap.load(path, allow_nonfinite=True)
    except WeightsError as exc:  # any other exception fails the test
        message = str(exc)
        assert message.startswith(str(path)) and "\n" not in message, message
        return exc
    raise AssertionError("a malformed .wts file was accepted")


@settings(max_examples=400, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(malformed_bodies())
def test_malformed_wts_bodies_raise_weights_error_naming_the_file(case):
    defect, data = case
    with tempfile.TemporaryDirectory() as tmp:
        _refused_with_one_sentence(data, Path(tmp) / "body.wts")


def test_the_body_fuzz_reaches_every_defect_and_can_fail(monkeypatch):
    """The fuzz above can fail: with a parser that decodes tensor names without its checks, it sees
    a UnicodeDecodeError escape and a name with whitespace accepted (and it generates every defect)."""
    from trtbuild.weights import wts

    monkeypatch.setattr(wts, "_decode_name", lambda raw, lineno, source: raw.decode("utf-8"))
    seen, failures = set(), {}

    def trial(case):
        defect, data = case
        seen.add(defect)
        with tempfile.TemporaryDirectory() as tmp:
            try:
                _refused_with_one_sentence(data, Path(tmp) / "body.wts")
            except Exception as e:  # noqa: BLE001 - collected, the test asserts below
                failures[defect] = type(e).__name__

    for defect in BODY_DEFECTS:  # each defect drawn on its own, so that every one is reached whatever the draws
        settings(max_examples=30, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])(
            given(malformed_bodies(defects=(defect,)))(trial))()
    assert seen == set(BODY_DEFECTS), seen
    assert failures == {"name_not_utf8": "UnicodeDecodeError", "name_whitespace": "AssertionError"}, failures
