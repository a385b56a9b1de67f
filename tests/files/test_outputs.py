"""trtbuild.files.outputs: the kind of an existing file, sniffed from files that the real
producers wrote (safetensors, torch.save, onnx.save, matplotlib, TensorRT-RTX, the reference), and
check_outputs' rules."""

from __future__ import annotations

import json
import os
import pickle

import numpy as np
import pytest
import torch
from helpers.tiny_net import TINY_SHAPE, TinyNet, tiny_define

import trtbuild.reference as ref
from trtbuild.engine import build_plan, make_sidecar, save_engine
from trtbuild.files.outputs import (
    CALIBRATION,
    CALIBRATION_FORMAT,
    ENGINE,
    HTML,
    JSON,
    ONNX,
    PARITY_REPORT,
    PNG,
    PT,
    SAFETENSORS,
    SIDECAR,
    TIMING_CACHE,
    TRITON_MARKER,
    WTS,
    OutputPathError,
    check_outputs,
    file_kind,
)

WTS_TEXT = b"2\nconv1.weight 2 3f800000 c0000000\nconv1.bias 1 00000000\n"  # tensorrtx gen_wts.py layout


@pytest.fixture(scope="module")
def reference_plan():
    return build_plan(ref, tiny_define(TinyNet()), input_shape=TINY_SHAPE, progress=False)


def _onnx_bytes() -> bytes:
    from onnx import TensorProto, helper

    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
    return helper.make_model(graph, producer_name="test", opset_imports=[helper.make_opsetid("", 17)]) \
        .SerializeToString()


def _png(path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = plt.figure(figsize=(1, 1))
    fig.savefig(path, format="png")
    plt.close(fig)


def test_kind_of_files_written_by_their_own_producers(tmp_path, reference_plan):
    from safetensors.numpy import save_file

    state = {"w": torch.ones(2, 3)}
    files = {}
    save_file({"w": np.ones((2, 3), np.float32)}, tmp_path / "a.bin")
    files["a.bin"] = SAFETENSORS
    torch.save(state, tmp_path / "b.bin")
    files["b.bin"] = PT
    torch.save(state, tmp_path / "c.bin", _use_new_zipfile_serialization=False)
    files["c.bin"] = PT
    (tmp_path / "d.bin").write_bytes(WTS_TEXT)
    files["d.bin"] = WTS
    (tmp_path / "e.bin").write_bytes(_onnx_bytes())  # no .onnx extension: the header decides
    files["e.bin"] = ONNX
    (tmp_path / "f.bin").write_text(json.dumps({"outputs": [1, 2]}, indent=2))
    files["f.bin"] = JSON
    (tmp_path / "g.bin").write_text("<!DOCTYPE html><html><body>report</body></html>")
    files["g.bin"] = HTML
    _png(tmp_path / "h.bin")
    files["h.bin"] = PNG
    (tmp_path / "i.bin").write_bytes(bytes(reference_plan))
    files["i.bin"] = ENGINE
    cache = ref.Builder(ref.Logger()).create_builder_config().create_timing_cache(b"")
    (tmp_path / "j.bin").write_bytes(bytes(cache.serialize()))
    files["j.bin"] = TIMING_CACHE
    assert {name: file_kind(tmp_path / name)[0] for name in files} == files
    assert file_kind(tmp_path / "i.bin")[1] == "a reference engine"


def test_tensorrt_rtx_engine_is_an_engine(rtx, tmp_path):
    plan = build_plan(rtx, tiny_define(TinyNet()), input_shape=TINY_SHAPE, progress=False)
    (tmp_path / "m.engine").write_bytes(bytes(plan))
    assert file_kind(tmp_path / "m.engine") == (ENGINE, "a TensorRT-RTX engine")


def test_engine_of_unknown_header_with_a_matching_sidecar(tmp_path, reference_plan):
    """An engine whose first bytes are not known is still recognised by the sidecar that save_engine wrote."""
    path = save_engine(tmp_path / "x.engine", reference_plan, make_sidecar(ref, reference_plan))
    data = b"\x00\x11" + bytes(reference_plan)[2:]  # a header this module does not know
    path.write_bytes(data)
    side = json.loads((tmp_path / "x.engine.json").read_text())
    assert file_kind(path)[0] == "file of unknown content"
    import hashlib

    side["engine_sha256"] = hashlib.sha256(data).hexdigest()
    (tmp_path / "x.engine.json").write_text(json.dumps(side))
    assert file_kind(path)[0] == ENGINE


def test_check_outputs_rules(tmp_path):
    (tmp_path / "empty.engine").write_bytes(b"")
    (tmp_path / "notes.txt").write_text("my notes\n")
    (tmp_path / "t.cache").write_bytes(b"\x01\x02 a real TensorRT cache has no header we know")
    check_outputs([("--out", tmp_path / "empty.engine", ENGINE)])  # an empty file holds nothing to lose
    check_outputs([("--timing-cache", tmp_path / "t.cache", TIMING_CACHE)])  # TensorRT itself judges it
    with pytest.raises(OutputPathError, match=r"^--json .*notes.txt exists and is a file of unknown content, not a "
                                              r"JSON file, so it is not overwritten; choose another path or delete"):
        check_outputs([("--json", tmp_path / "notes.txt", JSON)])
    with pytest.raises(OutputPathError, match="is the same file as --json"):
        check_outputs([("--json", tmp_path / "a" / ".." / "r.json", JSON), ("--html", tmp_path / "r.json", HTML)])
    assert sorted(os.listdir(tmp_path)) == ["empty.engine", "notes.txt", "t.cache"]


@pytest.mark.parametrize("content", [b"\x08\x07\x12\x05hello, not a model", pickle.dumps({"a": 1}, protocol=2),
                                     b"\x10\x00\x00\x00\x00\x00\x00\x00{not json", b"\x00\x01\x02 binary"])
def test_look_alikes_are_of_unknown_content(tmp_path, content):
    """Bytes that merely start like ONNX, a pickle or safetensors are not taken for them (a real
    TensorRT timing cache, whose header is not known here, stays replaceable by a timing cache)."""
    path = tmp_path / "x.onnx"
    path.write_bytes(content)
    assert file_kind(path)[0] == "file of unknown content"
    check_outputs([("--timing-cache", path, TIMING_CACHE)])
    with pytest.raises(OutputPathError, match="file of unknown content, not an ONNX model"):
        check_outputs([("--out", path, ONNX)])


def test_json_files_are_told_apart_by_content(tmp_path, reference_plan):
    """A sidecar (save_engine), a parity report (Report.to_json, and one written before its "kind" key), a
    calibration file, export-triton's marker and other JSON are different kinds; only the same kind replaces one."""
    from trtbuild.parity import compare
    from trtbuild.quant.calibfile import FORMAT
    from trtbuild.serving.repository import MARKER

    assert CALIBRATION_FORMAT == FORMAT and MARKER == "trtbuild.json"
    save_engine(tmp_path / "x.engine", reference_plan, make_sidecar(ref, reference_plan))
    report = compare({"y": np.ones(3, np.float32)}, {"y": np.ones(3, np.float32)})
    report.to_json(tmp_path / "r.json")
    legacy = report.to_dict()
    del legacy["kind"]
    (tmp_path / "old-report.json").write_text(json.dumps(legacy))
    (tmp_path / "c.json").write_text(json.dumps({"format": "trtbuild-calibration", "format_version": 1}))
    (tmp_path / "trtbuild.json").write_text(json.dumps({"written_by": "trtbuild export-triton", "engine_sha256": "0"}))
    (tmp_path / "mine.json").write_text('{"engine_sha256": "my own notes"}')
    (tmp_path / "broken.json").write_text('{"format": "trtbuild-calibration", ')
    (tmp_path / "empty.json").write_text(" {}\n")
    kinds = {"x.engine.json": SIDECAR, "r.json": PARITY_REPORT, "old-report.json": PARITY_REPORT, "c.json": CALIBRATION,
             "trtbuild.json": TRITON_MARKER, "mine.json": JSON, "broken.json": JSON}
    assert {name: file_kind(tmp_path / name)[0] for name in kinds} == kinds
    assert file_kind(tmp_path / "c.json")[1] == "a trtbuild calibration file"
    assert file_kind(tmp_path / "empty.json") == ("empty file", "an empty JSON file")
    check_outputs([("--out", tmp_path / "empty.json", CALIBRATION)])  # {} holds nothing to lose
    for name, kind in kinds.items():
        check_outputs([("--out", tmp_path / name, kind)])  # the same kind replaces it
        for other in {SIDECAR, PARITY_REPORT, CALIBRATION, JSON} - {kind}:
            with pytest.raises(OutputPathError, match=f"exists and is a .*, not an? {other}, so it is not overwritten"):
                check_outputs([("--out", tmp_path / name, other)])


def test_output_ending_in_a_separator_or_under_a_file(tmp_path):
    (tmp_path / "calib.json").write_text("{}")
    with pytest.raises(OutputPathError, match=r"^--out .*newdir/ ends in a path separator, so it names a directory"):
        check_outputs([("--out", f"{tmp_path}/newdir/", ENGINE)])
    with pytest.raises(OutputPathError, match=r"^the parent .*calib.json of --out .*calib.json/a/x.engine is a file, "
                                              r"not a directory"):
        check_outputs([("--out", tmp_path / "calib.json" / "a" / "x.engine", ENGINE)])
    check_outputs([("--out", tmp_path / "new" / "dir" / "x.engine", ENGINE)])  # missing directories are created later
    assert sorted(os.listdir(tmp_path)) == ["calib.json"]
