"""WeightMap: typed access, shapes, prefix views, usage tracking, missing names, NaN/Inf checks."""

import numpy as np
import pytest
import torch

from trtbuild.weights import WeightMap, WeightsError


def small_map(**kwargs):
    return WeightMap(
        {
            "conv1.weight": np.arange(24, dtype=np.float32).reshape(2, 3, 2, 2),
            "layer1.0.conv1.weight": np.full(4, 2.0, dtype=np.float32),
            "layer1.0.bn1.running_var": np.array([1.0, 2.0], dtype=np.float64),
            "layer1.0.bn1.num_batches_tracked": np.array(5, dtype=np.int64),
            "layer1.1.conv1.weight": np.array([0.5, -1.0], dtype=np.float16),
            "fc.bias": np.zeros(3, dtype=np.float32),
        },
        source="small.wts",
        **kwargs,
    )


def test_get_returns_contiguous_float32_in_stored_shape():
    wm = small_map()
    w = wm.get("conv1.weight")
    assert w.dtype == np.float32 and w.shape == (2, 3, 2, 2) and w.flags.c_contiguous
    np.testing.assert_array_equal(w.reshape(-1), np.arange(24))


def test_get_reshapes_flat_tensors_with_explicit_shape_and_minus_one():
    wm = WeightMap({"flat": np.arange(24, dtype=np.float32), "scalar": np.array(2.0, dtype=np.float32)})
    assert wm.get("flat", (6, 4)).shape == (6, 4)
    assert wm.get("flat", (2, -1)).shape == (2, 12)
    np.testing.assert_array_equal(wm.get("flat", (2, 3, 2, 2)), np.arange(24, dtype=np.float32).reshape(2, 3, 2, 2))
    assert wm.get("scalar", (1,)).shape == (1,) and wm.get("scalar", (1, 1)).tolist() == [[2.0]]
    assert small_map().get("fc.bias", 3).shape == (3,)
    assert small_map().get("conv1.weight", (2, -1, 2, 2)).shape == (2, 3, 2, 2)  # its own shape


def test_stored_nd_shape_that_differs_is_refused_naming_both_shapes():
    """A safetensors file with conv1.weight stored (3, 8, 7, 7) where (8, 3, 7, 7) is expected has the
    right element count, but transposed channels: reshaping it would silently scramble the weights."""
    wm = WeightMap({"conv1.weight": np.zeros((3, 8, 7, 7), dtype=np.float32)}, source="bad.safetensors")
    for shape in ((8, 3, 7, 7), (8, -1, 7, 7), (3 * 8 * 49,)):
        with pytest.raises(WeightsError) as info:
            wm.get("conv1.weight", shape)
        msg = str(info.value)
        assert "'conv1.weight'" in msg and "(3, 8, 7, 7)" in msg and "bad.safetensors" in msg
    assert "(8, 3, 7, 7)" in str(pytest.raises(WeightsError, wm.get, "conv1.weight", (8, 3, 7, 7)).value)
    assert wm.used() == []


def test_get_converts_float16_and_float64():
    wm = small_map()
    half = wm.get("layer1.1.conv1.weight")
    assert half.dtype == np.float32
    np.testing.assert_array_equal(half, [0.5, -1.0])
    np.testing.assert_array_equal(wm.get("layer1.0.bn1.running_var"), np.array([1.0, 2.0], dtype=np.float32))


def test_get_from_fortran_ordered_source_is_c_contiguous():
    src = np.asfortranarray(np.arange(6, dtype=np.float32).reshape(2, 3))
    out = WeightMap({"w": src}).get("w")
    assert out.flags.c_contiguous
    np.testing.assert_array_equal(out, [[0, 1, 2], [3, 4, 5]])


def test_get_copy_detaches_from_the_map():
    wm = small_map()
    copied = wm.get("fc.bias", copy=True)
    copied[:] = 9.0
    np.testing.assert_array_equal(wm.get("fc.bias"), [0.0, 0.0, 0.0])


def test_count_mismatch_names_the_tensor_and_both_counts():
    wm = small_map()
    with pytest.raises(WeightsError) as info:
        wm.get("conv1.weight", (2, 3, 3, 3))
    msg = str(info.value)
    assert "'conv1.weight'" in msg and "(2, 3, 3, 3)" in msg and "54 values" in msg
    assert "found 24 values" in msg and "(2, 3, 2, 2)" in msg and "small.wts" in msg
    with pytest.raises(WeightsError, match="does not fit"):
        wm.get("conv1.weight", (5, -1))
    with pytest.raises(WeightsError, match="invalid shape"):
        wm.get("conv1.weight", (-1, -1))
    assert wm.used() == []  # failed reads do not count as used


def test_missing_name_suggests_closest_names():
    wm = small_map()
    with pytest.raises(WeightsError) as info:
        wm.get("conv1.wieght")
    msg = str(info.value)
    assert "'conv1.wieght' not found in small.wts" in msg and "closest names: 'conv1.weight'" in msg


def test_missing_name_in_prefix_view_reports_full_and_relative_name():
    wm = small_map()
    with pytest.raises(WeightsError) as info:
        wm.prefix("layer1.0").get("conv2.weight")
    msg = str(info.value)
    assert "'layer1.0.conv2.weight' not found" in msg
    assert "looked up as 'conv2.weight' under prefix 'layer1.0'" in msg
    assert "'layer1.0.conv1.weight'" in msg


def test_missing_name_without_close_match_says_how_many_tensors():
    with pytest.raises(WeightsError, match="'zzz' not found in small.wts; it holds 6 tensors"):
        small_map().get("zzz")


def test_integer_tensor_refused_by_get_but_available_raw():
    wm = small_map()
    with pytest.raises(WeightsError, match="'layer1.0.bn1.num_batches_tracked'.*int64.*raw"):
        wm.get("layer1.0.bn1.num_batches_tracked")
    raw = wm.raw("layer1.0.bn1.num_batches_tracked")
    assert raw.dtype == np.int64 and raw.shape == () and int(raw) == 5


def test_mapping_protocol():
    wm = small_map()
    assert len(wm) == 6
    assert wm.keys()[0] == "conv1.weight" and list(wm) == wm.keys()
    assert "fc.bias" in wm and wm.has("fc.bias") and "fc.weight" not in wm and 3 not in wm
    items = dict(wm.items())
    assert items["layer1.0.bn1.running_var"].dtype == np.float64
    assert wm.shape_of("conv1.weight") == (2, 3, 2, 2)
    assert wm.used() == []  # none of the above marks weights used


def test_prefix_view_has_relative_names_and_shares_usage():
    wm = small_map()
    block = wm.prefix("layer1.0")
    assert block.keys() == ["conv1.weight", "bn1.running_var", "bn1.num_batches_tracked"]
    assert len(block) == 3 and "conv1.weight" in block and "fc.bias" not in block
    assert wm.prefix("layer1.0.").keys() == block.keys()  # trailing dot optional
    assert wm.prefix("layer1").prefix("0").keys() == block.keys()  # nesting
    assert wm.prefix("layer1.1").keys() == ["conv1.weight"]  # 'layer1.1' does not match 'layer1.10'
    np.testing.assert_array_equal(block.get("conv1.weight"), [2.0, 2.0, 2.0, 2.0])
    assert block.used() == ["conv1.weight"]
    assert wm.used() == ["layer1.0.conv1.weight"]
    assert "layer1.0.conv1.weight" not in wm.unused() and "conv1.weight" in wm.unused()
    assert block.unused() == ["bn1.running_var", "bn1.num_batches_tracked"]
    with pytest.raises(WeightsError, match="prefix"):
        wm.prefix("")


def test_prefix_does_not_match_partial_components():
    wm = WeightMap({"layer1.0.w": np.ones(1, np.float32), "layer10.0.w": np.ones(1, np.float32)})
    assert wm.prefix("layer1").keys() == ["0.w"]


def test_used_and_unused_cover_all_names_and_mark_used():
    wm = small_map()
    wm.get("conv1.weight")
    wm.raw("layer1.0.bn1.num_batches_tracked")
    wm.mark_used("fc.bias")
    assert wm.used() == ["conv1.weight", "layer1.0.bn1.num_batches_tracked", "fc.bias"]
    assert wm.unused() == ["layer1.0.conv1.weight", "layer1.0.bn1.running_var", "layer1.1.conv1.weight"]
    with pytest.raises(WeightsError, match="'nope' not found"):
        wm.mark_used("nope")


def test_nonfinite_values_are_counted_and_refused(tmp_path):
    bad = np.array([1.0, np.nan, np.inf, -np.inf, 2.0, np.nan], dtype=np.float32)
    with pytest.raises(WeightsError) as info:
        WeightMap({"ok": np.ones(2, np.float32), "bn.running_var": bad}, source="m.wts")
    msg = str(info.value)
    assert "'bn.running_var'" in msg and "4 non-finite values of 6" in msg
    assert "2 NaN, 2 Inf" in msg and "flat index 1" in msg and "allow_nonfinite" in msg
    wm = WeightMap({"bn.running_var": bad}, allow_nonfinite=True)
    assert np.isnan(wm.get("bn.running_var")).sum() == 2
    path = tmp_path / "nan.wts"
    path.write_bytes(b"1\nw 2 7fc00000 3f800000\n")
    with pytest.raises(WeightsError, match="nan.wts: tensor 'w' has 1 non-finite"):
        WeightMap.load(path)
    assert np.isnan(WeightMap.load(path, allow_nonfinite=True).get("w")[0])


def test_from_module_snapshots_parameters_and_buffers():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(1, 2, 1), torch.nn.BatchNorm2d(2))
    wm = WeightMap.from_module(model)
    assert wm.keys() == list(model.state_dict())
    with torch.no_grad():
        model[0].weight.fill_(7.0)  # later changes to the module do not leak into the snapshot
    assert not np.any(wm.get("0.weight") == 7.0)
    np.testing.assert_array_equal(wm.get("1.running_var"), [1.0, 1.0])


def test_from_state_dict_accepts_numpy_and_rejects_other_values():
    wm = WeightMap.from_state_dict({"a": np.ones(2), "b": torch.zeros(1)})
    np.testing.assert_array_equal(wm.get("a"), [1.0, 1.0])
    with pytest.raises(WeightsError, match="entry 'c' is a list"):
        WeightMap.from_state_dict({"c": [1.0, 2.0]})


def test_constructor_rejects_bad_names_and_values():
    with pytest.raises(WeightsError, match="non-empty string"):
        WeightMap({"": np.ones(1)})
    with pytest.raises(WeightsError, match="'w' is a list"):
        WeightMap({"w": [1.0]})


def test_save_from_prefix_view_writes_relative_names(tmp_path):
    wm = small_map()
    path = tmp_path / "block.safetensors"
    wm.prefix("layer1.0").save(path)
    back = WeightMap.load(path)
    assert sorted(back.keys()) == ["bn1.num_batches_tracked", "bn1.running_var", "conv1.weight"]
    assert back.raw("bn1.running_var").dtype == np.float64
