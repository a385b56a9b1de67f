"""The streaming .wts reader: same tensors and errors as parse_wts, bounded memory."""

import tracemalloc

import numpy as np
import pytest

from trtbuild.weights import WeightMap, WeightsError, parse_wts, write_wts
from trtbuild.weights import wts_stream
from trtbuild.weights.formats import read_weights


def write_file(path, data: bytes):
    path.write_bytes(data)
    return path


@pytest.fixture
def small_blocks(monkeypatch):
    """Tiny read blocks and decode steps, so words and lines straddle every boundary."""
    monkeypatch.setattr(wts_stream, "READ_BLOCK", 5)
    monkeypatch.setattr(wts_stream, "DECODE_WORDS", 3)


@pytest.fixture
def no_fallback(monkeypatch):
    """The streaming decoder itself must read the file: a fallback to parse_wts (which would give the
    same tensors, so the comparison could not fail) is an error here."""
    def fallback(*args, **kwargs):
        raise AssertionError("read_wts fell back to parse_wts for a canonical file")

    monkeypatch.setattr(wts_stream, "parse_wts", fallback)


CANONICAL = [
    b"3\nconv1.weight 5 3f800000 c0000000 3f000000 80000000 3dcccccd\nempty 0\nb 2 7f800001 ffbadbad\n",
    b"2\na 2  3f800000 40400000\nb 1  00000001\n",  # gen_wts.py: two spaces after the count
    b"1\nw 7 00000001 00000002 00000003 00000004 00000005 00000006 00000007",  # no final newline
    b"1\nw 1 3F800000\n\n  \n",  # uppercase hex, trailing blank lines
]


@pytest.mark.parametrize("data", CANONICAL)
def test_stream_reader_gives_parse_wts_tensors_bit_exactly(tmp_path, small_blocks, no_fallback, data):
    got = wts_stream.read_wts(write_file(tmp_path / "w.wts", data))
    expected = parse_wts(data)
    assert list(got) == list(expected)
    for name in expected:
        assert got[name].dtype == np.float32
        np.testing.assert_array_equal(got[name].view(np.uint32), expected[name].view(np.uint32))


@pytest.mark.parametrize("end", [b"\n", b""], ids=["newline", "no-final-newline"])
def test_stream_reader_decodes_a_hand_written_file(tmp_path, small_blocks, no_fallback, end):
    """Ends with an empty tensor (as trtbuild writes one): still the fast path, not the whole file read at once."""
    got = wts_stream.read_wts(write_file(tmp_path / "w.wts", b"2\nx 4 3f800000 c0000000 80000000 7f7fffff\ny 0" + end))
    np.testing.assert_array_equal(got["x"].view(np.uint32), [0x3F800000, 0xC0000000, 0x80000000, 0x7F7FFFFF])
    assert got["y"].shape == (0,)


def test_files_the_writer_wrote_take_the_fast_path_whatever_the_block_sizes(tmp_path, monkeypatch, no_fallback):
    """Random tensors (empty ones too, last or not; with and without the final newline) written by
    write_wts, read with random tiny blocks: the stream decoder reads every one, bit for bit."""
    import io

    rng = np.random.default_rng(0)
    for trial in range(200):
        monkeypatch.setattr(wts_stream, "READ_BLOCK", int(rng.integers(1, 50)))
        monkeypatch.setattr(wts_stream, "DECODE_WORDS", int(rng.integers(1, 6)))
        tensors = {f"t{i}": rng.standard_normal(int(rng.integers(0, 12))).astype(np.float32)
                   for i in range(int(rng.integers(1, 5)))}
        stream = io.BytesIO()
        write_wts(stream, tensors)
        data = stream.getvalue()[:-1] if trial % 3 == 0 else stream.getvalue()
        got = wts_stream.read_wts(write_file(tmp_path / "w.wts", data))
        assert list(got) == list(tensors), trial
        for name, values in tensors.items():
            np.testing.assert_array_equal(got[name].view(np.uint32), values.view(np.uint32))


BAD = [
    b"2\na 1 3f800000\n",  # truncated: fewer lines than the header
    b"1\na 1 3f800000\nb 1 3f800000\n",  # more lines than the header
    b"1\na 7 00000001 00000002 00000003 0000z004 00000005 00000006 00000007\n",  # bad hex in the 2nd chunk
    b"1\na 3 00000001 00000002\n",  # fewer values than the count
    b"2\na 1 3f800000\na 1 3f800000\n",  # duplicate name
    b"1\na 99999999999999 3f800000\n",  # absurd count: nothing is allocated for it
    b"1\r\na 1\t3f800000\r\n",  # other whitespace: fine, read the slow way
    b"",
]


@pytest.mark.parametrize("data", BAD)
def test_stream_reader_falls_back_to_parse_wts_with_the_same_result_or_error(tmp_path, small_blocks, data):
    path = write_file(tmp_path / "w.wts", data)
    try:
        expected = parse_wts(data, source=str(path))
    except WeightsError as e:
        with pytest.raises(WeightsError) as info:
            wts_stream.read_wts(path)
        assert str(info.value) == str(e)
        return
    got = wts_stream.read_wts(path)
    assert {k: v.tolist() for k, v in got.items()} == {k: v.tolist() for k, v in expected.items()}


def test_reading_a_wts_file_does_not_hold_its_text_in_memory(tmp_path):
    """Before, the whole file (9 bytes per value) and a str copy of the largest line were held
    while decoding: ~120 MB here. Streaming needs the 16 MB of arrays and a few MB of buffers."""
    values = np.linspace(-1, 1, 4_000_000, dtype=np.float32)
    path = tmp_path / "big.wts"
    with open(path, "wb") as f:
        write_wts(f, {"big": values, "small": values[:10]})
    tracemalloc.start()
    try:
        tensors, _ = read_weights(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    np.testing.assert_array_equal(tensors["big"], values)
    assert peak < values.nbytes + 24_000_000, f"reading peaked at {peak} bytes for {values.nbytes} bytes of weights"


def test_weightmap_load_reads_through_the_stream_reader(tmp_path, monkeypatch):
    path = write_file(tmp_path / "w.wts", b"1\nfc.bias 2 3f800000 bf800000\n")
    monkeypatch.setattr(wts_stream, "parse_wts", None)  # the fallback is not taken for a canonical file
    np.testing.assert_array_equal(WeightMap.load(path).get("fc.bias"), [1.0, -1.0])
