"""safetensors and .pt/.pth reading/writing, format selection, checkpoint forms, atomic writes."""

import os
import pickle
import stat

import numpy as np
import pytest
import safetensors.numpy
import safetensors.torch
import torch

from trtbuild.weights import (
    WeightMap,
    WeightsError,
    convert_weights,
    export_weights,
    format_for_path,
    read_weights,
    write_weights,
)
from trtbuild.weights import wts as wts_module


def mixed_tensors():
    rng = np.random.default_rng(3)
    return {
        "conv.weight": rng.standard_normal((4, 3, 3, 3)).astype(np.float32),
        "bn.running_var": np.array([1.0, -0.0, 1e-40, 3e38], dtype=np.float32),
        "bn.num_batches_tracked": np.array(7, dtype=np.int64),
        "half": np.array([0.5, -2.0, 65504.0], dtype=np.float16),
        "double": np.array([[1.0 / 3.0]], dtype=np.float64),
        "mask": np.array([True, False]),
    }


def assert_same_arrays(got, expected):
    assert set(got) == set(expected)
    for name, array in expected.items():
        assert got[name].dtype == array.dtype, name
        assert got[name].shape == array.shape, name
        assert got[name].tobytes() == array.tobytes(), name


# ---------------------------------------------------------------- round trips


@pytest.mark.parametrize("suffix", [".safetensors", ".pt", ".pth"])
def test_round_trip_keeps_dtype_shape_and_bits(tmp_path, suffix):
    tensors = mixed_tensors()
    path = tmp_path / f"w{suffix}"
    assert write_weights(path, tensors) == []
    got, notes = read_weights(path)
    assert notes == []
    assert_same_arrays(got, tensors)


def test_wts_round_trip_keeps_floats_as_float32_and_skips_the_rest(tmp_path):
    tensors = mixed_tensors()
    path = tmp_path / "w.wts"
    notes = write_weights(path, tensors)
    assert len(notes) == 1 and "bn.num_batches_tracked" in notes[0] and "mask" in notes[0]
    got, _ = read_weights(path)
    assert list(got) == ["conv.weight", "bn.running_var", "half", "double"]
    for name in got:
        expected = tensors[name].astype(np.float32).reshape(-1)
        np.testing.assert_array_equal(got[name].view(np.uint32), expected.view(np.uint32))


@pytest.mark.parametrize("suffix", [".safetensors", ".pt"])
def test_module_export_includes_buffers(tmp_path, suffix):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(2, 3, 1), torch.nn.BatchNorm2d(3), torch.nn.Linear(5, 2))
    model(torch.randn(4, 2, 5, 5))
    model(torch.randn(4, 2, 5, 5))
    path = tmp_path / f"m{suffix}"
    report = export_weights(model, path)
    assert report.tensors == 9 and report.values == sum(t.numel() for t in model.state_dict().values())
    wm = WeightMap.load(path)
    assert wm.raw("1.num_batches_tracked").dtype == np.int64 and int(wm.raw("1.num_batches_tracked")) == 2
    for name, tensor in model.state_dict().items():
        assert wm.raw(name).tobytes() == tensor.numpy().tobytes(), name


def test_safetensors_file_written_by_torch_is_readable(tmp_path):
    path = tmp_path / "t.safetensors"
    safetensors.torch.save_file({"w": torch.arange(6, dtype=torch.float32).reshape(2, 3)}, str(path))
    np.testing.assert_array_equal(WeightMap.load(path).get("w"), [[0, 1, 2], [3, 4, 5]])


@pytest.mark.parametrize("suffix", [".safetensors", ".pt"])
def test_bfloat16_is_widened_to_float32_with_a_note(tmp_path, suffix):
    tensor = torch.tensor([1.5, -3.0, 0.0078125], dtype=torch.bfloat16)
    path = tmp_path / f"b{suffix}"
    if suffix == ".pt":
        torch.save({"b": tensor}, path)
    else:
        safetensors.torch.save_file({"b": tensor}, str(path))
    wm = WeightMap.load(path)
    np.testing.assert_array_equal(wm.get("b"), np.array([1.5, -3.0, 0.0078125], dtype=np.float32))
    assert any("bfloat16" in note and "'b'" in note for note in wm.notes)


# ---------------------------------------------------------------- .pt checkpoint forms


def test_pt_checkpoint_with_state_dict_key(tmp_path):
    path = tmp_path / "ckpt.pth"
    torch.save({"epoch": 3, "state_dict": {"w": torch.ones(2)}, "optimizer": {"lr": 0.1}}, path)
    wm = WeightMap.load(path)
    assert wm.keys() == ["w"]
    assert any("checkpoint['state_dict']" in n and "'epoch'" in n for n in wm.notes)


def test_pt_checkpoint_with_model_key(tmp_path):
    path = tmp_path / "ckpt.pt"
    torch.save({"model": {"a.weight": torch.full((2, 2), 2.0)}, "step": 10}, path)
    np.testing.assert_array_equal(WeightMap.load(path).get("a.weight"), np.full((2, 2), 2.0))


def test_pt_non_tensor_entries_are_ignored_with_a_note(tmp_path):
    path = tmp_path / "sd.pt"
    torch.save({"w": torch.zeros(3), "version": 2, "names": ["a"]}, path)
    wm = WeightMap.load(path)
    assert wm.keys() == ["w"]
    assert any("'version' (int)" in n and "'names' (list)" in n for n in wm.notes)


def test_pt_without_tensors_or_not_a_dict_is_refused(tmp_path):
    empty = tmp_path / "empty.pt"
    torch.save({"epoch": 1}, empty)
    with pytest.raises(WeightsError, match="holds no tensors"):
        WeightMap.load(empty)
    listing = tmp_path / "list.pt"
    torch.save([torch.ones(1)], listing)
    with pytest.raises(WeightsError, match="expected a state_dict.*found list"):
        WeightMap.load(listing)


class SideEffect:
    """Unpickling this runs code (creates a file): weights_only loading must refuse it."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_pt_with_pickled_code_is_refused_and_never_executed(tmp_path):
    marker = tmp_path / "pwned"
    path = tmp_path / "evil.pt"
    torch.save({"w": torch.ones(2), "obj": SideEffect(str(marker))}, path)
    assert not marker.exists()
    with pytest.raises(WeightsError) as info:
        WeightMap.load(path)
    msg = str(info.value)
    assert "evil.pt" in msg and "weights_only=True" in msg and "open" in msg
    assert isinstance(info.value.__cause__, pickle.UnpicklingError)
    assert not marker.exists()


def test_pt_with_custom_class_instance_is_refused(tmp_path):
    path = tmp_path / "custom.pt"
    torch.save({"w": torch.ones(2), "cfg": SideEffectFree()}, path)
    with pytest.raises(WeightsError, match="SideEffectFree"):
        WeightMap.load(path)


class SideEffectFree:
    pass


# ---------------------------------------------------------------- format selection and bad files


def test_format_by_extension_and_override():
    assert [format_for_path(p) for p in ["a.wts", "b.SAFETENSORS", "c.pt", "d.pth"]] == [
        "wts", "safetensors", "pt", "pt"]
    assert format_for_path("weights.bin", "safetensors") == "safetensors"
    with pytest.raises(WeightsError, match="unknown weight file extension '.bin'"):
        format_for_path("weights.bin")
    with pytest.raises(WeightsError, match="extension '.wts' means wts, not pt"):
        format_for_path("x.wts", "pt")
    with pytest.raises(WeightsError, match="unknown weight format 'onnx'"):
        format_for_path("x.onnx", "onnx")


def test_unknown_extension_on_read_and_write(tmp_path):
    path = tmp_path / "w.npz"
    path.write_bytes(b"data")
    with pytest.raises(WeightsError, match="unknown weight file extension '.npz'"):
        WeightMap.load(path)
    with pytest.raises(WeightsError, match="unknown weight file extension '.npz'"):
        write_weights(tmp_path / "new.npz", {"w": np.ones(1, np.float32)})
    assert not (tmp_path / "new.npz").exists()


def test_missing_file(tmp_path):
    with pytest.raises(WeightsError, match="does not exist"):
        WeightMap.load(tmp_path / "nope.wts")


@pytest.mark.parametrize("suffix, match", [(".safetensors", "not a valid safetensors"),
                                           (".pt", "refused|not a readable PyTorch file")])
def test_corrupt_binary_files(tmp_path, suffix, match):
    path = tmp_path / f"junk{suffix}"
    path.write_bytes(b"\x00\x01garbage" * 10)
    with pytest.raises(WeightsError, match=match):
        WeightMap.load(path)


def test_conversion_pth_to_wts_to_safetensors(tmp_path):
    torch.manual_seed(5)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3))
    torch.save(model.state_dict(), tmp_path / "m.pth")
    report = convert_weights(tmp_path / "m.pth", tmp_path / "m.wts")
    assert report.tensors == 6 and any("num_batches_tracked" in n for n in report.notes)
    convert_weights(tmp_path / "m.wts", tmp_path / "m.safetensors")
    back = safetensors.numpy.load_file(str(tmp_path / "m.safetensors"))
    for name, tensor in model.state_dict().items():
        if tensor.is_floating_point():
            assert back[name].tobytes() == tensor.numpy().reshape(-1).tobytes()


# ---------------------------------------------------------------- atomic writes


def existing_file(tmp_path, name):
    path = tmp_path / name
    path.write_bytes(b"precious old contents")
    return path


def assert_untouched(tmp_path, path):
    assert path.read_bytes() == b"precious old contents"
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]


def test_failing_wts_write_leaves_existing_file_intact(tmp_path, monkeypatch):
    path = existing_file(tmp_path, "w.wts")
    real_line = wts_module.write_wts_line
    calls = []

    def failing_line(stream, name, values, *args):
        calls.append(name)
        if len(calls) == 2:
            raise RuntimeError("disk full (simulated)")
        return real_line(stream, name, values, *args)

    monkeypatch.setattr(wts_module, "write_wts_line", failing_line)
    with pytest.raises(RuntimeError, match="simulated"):
        write_weights(path, {"a": np.ones(3, np.float32), "b": np.ones(3, np.float32)})
    assert calls == ["a", "b"]  # the first tensor was written (to the temp file) before the failure
    assert_untouched(tmp_path, path)


def test_failing_safetensors_write_leaves_existing_file_intact(tmp_path, monkeypatch):
    path = existing_file(tmp_path, "w.safetensors")

    def half_write(tensors, filename, metadata=None):
        with open(filename, "wb") as handle:
            handle.write(b"half a header")
        raise OSError("simulated crash")

    monkeypatch.setattr(safetensors.numpy, "save_file", half_write)
    with pytest.raises(WeightsError, match="simulated crash"):
        write_weights(path, {"a": np.ones(3, np.float32)})
    assert_untouched(tmp_path, path)


def test_failing_pt_write_leaves_existing_file_intact(tmp_path, monkeypatch):
    path = existing_file(tmp_path, "w.pt")

    def half_save(obj, f, *args, **kwargs):
        with open(f, "wb") as handle:
            handle.write(b"PK\x03\x04 partial")
        raise KeyboardInterrupt

    monkeypatch.setattr(torch, "save", half_save)
    with pytest.raises(KeyboardInterrupt):
        write_weights(path, {"a": np.ones(3, np.float32)})
    assert_untouched(tmp_path, path)


def test_failing_write_to_new_path_leaves_nothing(tmp_path):
    with pytest.raises(WeightsError, match="bad name"):
        write_weights(tmp_path / "new.wts", {"bad name": np.ones(1, np.float32)})
    assert list(tmp_path.iterdir()) == []


def test_successful_write_replaces_file_with_umask_mode(tmp_path):
    path = existing_file(tmp_path, "w.wts")
    old = os.umask(0o022)
    try:
        write_weights(path, {"a": np.array([1.0], np.float32)})
    finally:
        os.umask(old)
    assert path.read_bytes() == b"1\na 1 3f800000\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert sorted(p.name for p in tmp_path.iterdir()) == ["w.wts"]


def test_write_into_missing_directory(tmp_path):
    with pytest.raises(WeightsError, match="does not exist"):
        write_weights(tmp_path / "no" / "w.wts", {"a": np.ones(1, np.float32)})
