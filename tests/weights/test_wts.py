"""tensorrtx .wts format: exact bytes, layouts, bit-exact round trips and every parse error."""

import io

import numpy as np
import pytest
import torch

from trtbuild.weights import WeightMap, WeightsError, export_weights, parse_wts, write_weights, write_wts


def bits(values):
    return np.asarray(values, dtype=np.float32).view(np.uint32)


def from_bits(words):
    return np.array(words, dtype=np.uint32).view(np.float32)


# ---------------------------------------------------------------- exact format


def test_writer_emits_hand_written_tensorrtx_text():
    tensors = {
        "conv1.weight": np.array([1.0, -2.0, 0.5, -0.0, 0.1], dtype=np.float32),
        "edge": from_bits([0x00000001, 0x007FFFFF, 0x7F7FFFFF, 0x7F800000, 0xFF800000]),
        "empty": np.zeros(0, dtype=np.float32),
    }
    stream = io.BytesIO()
    assert write_wts(stream, tensors) == []
    assert stream.getvalue() == (
        b"3\n"
        b"conv1.weight 5 3f800000 c0000000 3f000000 80000000 3dcccccd\n"
        b"edge 5 00000001 007fffff 7f7fffff 7f800000 ff800000\n"
        b"empty 0\n"
    )


def test_writer_flattens_in_c_order_and_casts_float64():
    stream = io.BytesIO()
    write_wts(stream, {"w": np.array([[1.0, 2.0], [-2.0, 0.5]], dtype=np.float64)})
    assert stream.getvalue() == b"1\nw 4 3f800000 40000000 c0000000 3f000000\n"


@pytest.mark.parametrize("sep", [b" ", b"  "], ids=["one-space", "two-spaces"])
def test_reads_one_and_two_spaces_after_count(sep):
    data = b"2\nfc.weight 3" + sep + b"3f800000 c0000000 3f000000\nfc.bias 1" + sep + b"bf800000\n"
    out = parse_wts(data)
    assert list(out) == ["fc.weight", "fc.bias"]
    np.testing.assert_array_equal(out["fc.weight"], [1.0, -2.0, 0.5])
    np.testing.assert_array_equal(out["fc.bias"], [-1.0])
    assert out["fc.weight"].dtype == np.float32


def test_reads_gen_wts_two_space_file_with_trailing_space_on_empty_tensor():
    # gen_wts.py writes f"{k} {len(vr)} " and then " " + hex per value.
    data = b"2\na 2  3f800000 40400000\nb 0 \n"
    out = parse_wts(data)
    np.testing.assert_array_equal(out["a"], [1.0, 3.0])
    assert out["b"].shape == (0,)


def test_reads_crlf_tabs_uppercase_blank_lines_and_missing_final_newline():
    data = b"\r\n2\r\n\r\nw\t2   3F800000\tC0000000 \r\n  b 1 3f000000"
    out = parse_wts(data)
    np.testing.assert_array_equal(out["w"], [1.0, -2.0])
    np.testing.assert_array_equal(out["b"], [0.5])


def test_names_with_dots_and_digits_survive():
    stream = io.BytesIO()
    write_wts(stream, {"layer1.0.downsample.1.running_var": np.ones(2, np.float32), "0": np.zeros(1, np.float32)})
    assert list(parse_wts(stream.getvalue())) == ["layer1.0.downsample.1.running_var", "0"]


# ---------------------------------------------------------------- bit-exact round trips


def special_bit_patterns():
    return [
        0x80000000,  # -0.0
        0x00000001, 0x00000ABC, 0x007FFFFF, 0x807FFFFF,  # subnormals
        0x7F7FFFFF, 0xFF7FFFFF, 0x7E800000,  # +-max, 2**126
        0x00800000, 0x3F800000, 0xC0000000,
    ]


def test_torch_to_wts_to_weightmap_is_bit_exact(tmp_path):
    gen = torch.Generator().manual_seed(1234)
    weight = torch.randn(8, 3, 5, 5, generator=gen) * 1e3
    bias = torch.randn(8, generator=gen) * 1e-30
    special = torch.from_numpy(from_bits(special_bit_patterns()))
    big = torch.randn(1000, generator=gen) * 3e37
    source = {"conv.weight": weight, "conv.bias": bias, "special": special, "big": big}
    path = tmp_path / "rt.wts"
    export_weights(source, path)
    wm = WeightMap.load(path)
    for name, tensor in source.items():
        got = wm.get(name, tuple(tensor.shape))
        expected = tensor.numpy().astype(np.float32)
        assert got.shape == expected.shape
        np.testing.assert_array_equal(got.view(np.uint32), expected.view(np.uint32))
    assert wm.unused() == []


def test_random_bit_patterns_round_trip_including_nan_payloads():
    rng = np.random.default_rng(7)
    words = rng.integers(0, 2**32, size=20000, dtype=np.uint64).astype(np.uint32)
    words[:4] = [0x7FC00001, 0xFFBADBAD, 0x7F800001, 0xFF800000]  # NaN payloads, signalling NaN, -inf
    values = words.view(np.float32)
    stream = io.BytesIO()
    write_wts(stream, {"x": values})
    out = parse_wts(stream.getvalue())
    np.testing.assert_array_equal(out["x"].view(np.uint32), words)


def test_module_export_skips_integer_buffers_and_keeps_bn_stats(tmp_path):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4))
    model(torch.randn(2, 3, 8, 8))  # training step: running stats move away from 0/1
    path = tmp_path / "m.wts"
    report = export_weights(model, path)
    assert report.format == "wts" and report.tensors == 6
    assert any("1.num_batches_tracked" in note for note in report.notes)
    wm = WeightMap.load(path)
    assert "1.num_batches_tracked" not in wm
    for name in ["0.weight", "0.bias", "1.weight", "1.bias", "1.running_mean", "1.running_var"]:
        expected = model.state_dict()[name].numpy()
        np.testing.assert_array_equal(wm.get(name, expected.shape).view(np.uint32), expected.view(np.uint32))
    assert not np.allclose(wm.get("1.running_mean"), 0.0)


# ---------------------------------------------------------------- parse errors


def parse_error(data):
    with pytest.raises(WeightsError) as info:
        parse_wts(data, source="t.wts")
    return str(info.value)


def test_error_empty_file():
    assert "empty file" in parse_error(b"")
    assert "empty file" in parse_error(b"\n \n")


@pytest.mark.parametrize("header", [b"two", b"-1", b"2.0", b"conv1.weight 1 3f800000"])
def test_error_header_not_an_integer(header):
    msg = parse_error(header + b"\nw 1 3f800000\n")
    assert "line 1" in msg and "tensor count" in msg and header.decode()[:10] in msg


def test_error_truncated_file_fewer_lines_than_header():
    msg = parse_error(b"3\na 1 3f800000\nb 1 3f800000\n")
    assert "truncated file" in msg and "3 tensors" in msg and "only 2" in msg and "'b'" in msg


def test_error_more_lines_than_header():
    msg = parse_error(b"1\na 1 3f800000\nextra.bias 1 3f800000\n")
    assert "header count mismatch" in msg and "1 tensors" in msg and "line 3" in msg and "extra.bias" in msg


def test_error_truncated_line_fewer_values_than_count():
    msg = parse_error(b"1\nfc.weight 3 3f800000 3f800000\n")
    assert "truncated line 2" in msg and "'fc.weight'" in msg and "3 values" in msg and "holds 2" in msg


def test_error_truncated_in_the_middle_of_a_word():
    msg = parse_error(b"1\nfc.weight 2 3f800000 3f80")
    assert "line 2, column 22" in msg and "'fc.weight'" in msg and "'3f80'" in msg
    assert "value 2 of 2" in msg and "looks truncated" in msg


def test_error_more_values_than_count():
    msg = parse_error(b"1\nfc.bias 1 3f800000 3f800000\n")
    assert "count mismatch" in msg and "'fc.bias'" in msg and "1 values" in msg and "holds 2" in msg


def test_error_split_word_with_canonical_line_length():
    # Same length as a valid 2-value line and spaces at the separator positions,
    # but the first word is split in two: must not be decoded as 7 bytes.
    msg = parse_error(b"1\nw 2 3f80  00 3f800000\n")
    assert "count mismatch" in msg and "'w'" in msg and "'3f80' at line 2, column 5" in msg


def test_error_no_count_and_bad_count():
    assert "'lonely' has no value count" in parse_error(b"1\nlonely\n")
    msg = parse_error(b"1\nw x1 3f800000\n")
    assert "value count of tensor 'w'" in msg and "'x1'" in msg


# Columns are 1-based byte positions of the bad word's first character, counted by hand.
@pytest.mark.parametrize(
    "line, column, word, index",
    [
        (b"conv1.bias 3 3f800000 3f8g0000 00000000", 23, "3f8g0000", 2),  # fast-path layout
        (b"conv1.bias 3  3f800000 3f800000 0x800000", 33, "0x800000", 3),  # two spaces
        (b"conv1.bias 3 3f800000 3f80000 000000000", 23, "3f80000", 2),  # 7 + 9 digits
        (b"conv1.bias 3 3f800000\t3f800000  zz", 33, "zz", 3),  # irregular spacing
        (b"conv1.bias 3 \xff3f80000 3f800000 3f800000", 14, "\\xff3f80000", 1),  # non-ASCII
    ],
)
def test_error_malformed_hex_reports_line_and_column(line, column, word, index):
    msg = parse_error(b"2\nconv1.weight 1 3f800000\n" + line + b"\n")
    assert f"line 3, column {column}" in msg
    assert word in msg and "'conv1.bias'" in msg and f"value {index} of 3" in msg
    assert "8 hex digits" in msg


def test_error_duplicate_names():
    msg = parse_error(b"3\na 1 3f800000\nb 1 3f800000\na 1 3f800000\n")
    assert "duplicate tensor name 'a'" in msg and "lines 2 and 4" in msg


def test_error_name_not_utf8():
    msg = parse_error(b"1\nw\xff 1 3f800000\n")
    assert "line 2" in msg and "UTF-8" in msg


def test_error_source_is_the_file_path(tmp_path):
    path = tmp_path / "bad.wts"
    path.write_bytes(b"1\nw 2 3f800000\n")
    with pytest.raises(WeightsError, match="bad.wts: truncated line 2"):
        WeightMap.load(path)


# ---------------------------------------------------------------- writer errors


@pytest.mark.parametrize("name", ["conv 1.weight", "a\tb", "a\nb", "trailing ", "", "nbsp\u00a0x"])
def test_writer_rejects_names_with_whitespace(tmp_path, name):
    path = tmp_path / "out.wts"
    with pytest.raises(WeightsError) as info:
        write_weights(path, {"ok": np.ones(1, np.float32), name: np.ones(1, np.float32)})
    assert repr(name) in str(info.value)
    assert not path.exists() and list(tmp_path.iterdir()) == []


def test_writer_rejects_whitespace_names_when_streaming():
    stream = io.BytesIO()
    with pytest.raises(WeightsError, match="whitespace"):
        write_wts(stream, {"ok": np.ones(1, np.float32), "bad name": np.ones(1, np.float32)})
    assert stream.getvalue() == b""


def test_reader_refuses_names_the_writer_cannot_write(tmp_path):
    """A name holding a non-ASCII-space whitespace character (here \\x1c) is refused on reading,
    because the writer could not write it back (a case the fuzz test finds)."""
    path = tmp_path / "odd.wts"
    path.write_bytes(b"1\na\x1cb 1 3f800000\n")
    with pytest.raises(WeightsError, match=r"line 2: tensor name 'a\\x1cb' contains a whitespace character"):
        WeightMap.load(path)


# ---------------------------------------------------------------- chunked writer (speed and memory)


def struct_pack_wts(tensors):
    """A gen_wts.py-style writer: one struct.pack per value (one space after the count, as ours)."""
    import struct

    lines = [f"{len(tensors)}\n"]
    for name, values in tensors.items():
        flat = np.asarray(values, dtype=np.float32).reshape(-1)
        lines.append(f"{name} {flat.size}" + "".join(" " + struct.pack(">f", float(v)).hex() for v in flat) + "\n")
    return "".join(lines).encode("ascii")


EDGE_WORDS = [0x00000000, 0x80000000, 0x00000001, 0x80000001, 0x007FFFFF, 0x00800000, 0x7F7FFFFF, 0xFF7FFFFF,
              0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00000, 0x7FC00001, 0x3F800000, 0xBDCCCCCD, 0x0000FFFF,
              0xFFFF0000, 0x12345678, 0x9ABCDEF0]


def test_writer_matches_struct_pack_writer_on_edge_values_across_chunk_boundaries(monkeypatch):
    from trtbuild.weights import wts as wts_module

    monkeypatch.setattr(wts_module, "WRITE_CHUNK", 7)  # tensors span several chunks, last one partial
    rng = np.random.default_rng(3)
    tensors = {
        "edges": from_bits(EDGE_WORDS),
        "random": (rng.standard_normal((3, 5, 2)) * 1e3).astype(np.float64),  # cast to float32 chunk by chunk
        "exact_chunk": from_bits(EDGE_WORDS[:7]),
        "one": np.array(-0.0, dtype=np.float16),
        "empty": np.zeros((0, 3), dtype=np.float32),
        "strided": from_bits(EDGE_WORDS).reshape(-1, 1)[::2],
    }
    stream = io.BytesIO()
    write_wts(stream, tensors)
    assert stream.getvalue() == struct_pack_wts(tensors)


def test_writer_matches_hand_written_file_for_signalling_nan_and_boundary_bits():
    stream = io.BytesIO()
    write_wts(stream, {"w": from_bits([0x7F800001, 0xFFBADBAD, 0x00010000, 0x0000FFFF, 0xFFFFFFFF])})
    assert stream.getvalue() == b"1\nw 5 7f800001 ffbadbad 00010000 0000ffff ffffffff\n"


def test_writer_memory_stays_bounded_for_a_large_tensor():
    """The previous writer held the tensor's whole text (9 bytes per value) and a byte-swapped copy:
    ~160 MB for this 16 MB tensor; the chunked writer needs about a megabyte."""
    import tracemalloc

    values = np.arange(4_000_000, dtype=np.float32)
    sink = _CountingSink()
    tracemalloc.start()
    try:
        write_wts(sink, {"big": values})
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert sink.size == len(b"1\nbig 4000000\n") + 9 * values.size
    assert peak < 4_000_000, f"the writer allocated {peak} bytes at peak"


class _CountingSink:
    """A binary stream that keeps only the byte count (so the test measures the writer alone)."""

    def __init__(self):
        self.size = 0

    def write(self, data):
        self.size += memoryview(data).nbytes
        return memoryview(data).nbytes
