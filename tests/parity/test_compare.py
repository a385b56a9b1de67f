"""trtbuild.parity.compare against hand-computed values, and the report renderings."""

from __future__ import annotations

import json
import math
import sys

import numpy as np
import pytest
import torch

from trtbuild.parity import Report, compare, compare_tensor, default_tolerances
from trtbuild.parity.layerwise import find_jump, layerwise_rows


def test_element_fails_only_if_it_exceeds_both_tolerances():
    expected = np.array([1.0, 100.0, 0.0, 10.0])
    actual = np.array([1.5, 100.5, 0.05, 10.0])
    # diffs 0.5, 0.5, 0.05, 0; atol 0.1, rtol 0.01 -> rtol bounds 0.01, 1.0, 0, 0.1
    s = compare_tensor("t", actual, expected, atol=0.1, rtol=0.01)
    assert s.failed == 1 and not s.passed  # only element 0 exceeds both 0.1 and 0.01
    assert s.max_abs == pytest.approx(0.5)
    assert s.mean_abs == pytest.approx((0.5 + 0.5 + 0.05) / 4)
    assert s.max_rel == math.inf  # 0.05 off an expected 0
    assert s.mean_rel == pytest.approx((0.5 + 0.005 + 0.0) / 3)  # over nonzero expected
    # smallest atol passing with rtol=0.01: elements failing rtol are 0 (0.5) and 2 (0.05) -> 0.5
    assert s.min_atol == pytest.approx(0.5)
    # smallest rtol passing with atol=0.1: elements over atol are 0 (rel 0.5) and 1 (rel 0.005) -> 0.5
    assert s.min_rtol == pytest.approx(0.5)
    assert compare_tensor("t", actual, expected, atol=s.min_atol, rtol=0.01).passed
    assert compare_tensor("t", actual, expected, atol=0.1, rtol=s.min_rtol).passed
    assert not compare_tensor("t", actual, expected, atol=0.1, rtol=0.49).passed


def test_percentile_cosine_and_relative_l2():
    expected = np.arange(1, 201, dtype=np.float64)
    actual = expected.copy()
    actual[-1] += 3.0  # one element off by 3, rel 0.015
    actual[-2] += 2.0  # one off by 2, rel 2/199
    s = compare_tensor("t", actual, expected, atol=0.0, rtol=0.0)
    assert s.failed == 2 and s.count == 200
    assert s.p99_abs == 2.0  # the 99th percentile of 198 zeros, a 2 and a 3 (no interpolation) is 2
    assert s.max_rel == pytest.approx(0.015)
    cos = float(actual @ expected / (np.linalg.norm(actual) * np.linalg.norm(expected)))
    assert s.cosine == pytest.approx(cos)
    assert s.rel_l2 == pytest.approx(np.sqrt(13.0) / np.linalg.norm(expected))
    assert s.expected_max_abs == 200.0


def test_nan_and_inf_counts_are_separate():
    expected = np.array([np.nan, np.inf, 1.0, 2.0, 3.0])
    actual = np.array([np.nan, np.inf, np.nan, -np.inf, 3.0])
    s = compare_tensor("t", actual, expected, atol=1e-3, rtol=1e-3, allow_nonfinite=True)
    assert (s.nan_actual, s.nan_expected, s.inf_actual, s.inf_expected) == (2, 1, 2, 1)
    assert s.failed == 2  # NaN vs 1.0 and -inf vs 2.0; matching NaN and matching inf pass (allowed)
    assert s.max_abs == math.inf and s.min_atol == math.inf and s.rel_l2 == math.inf
    s = compare_tensor("t", actual, expected, atol=1e-3, rtol=1e-3)
    assert s.failed == 4  # by default every non-finite actual value fails
    assert s.max_abs == math.inf and s.min_atol == math.inf and s.rel_l2 == math.inf


def test_inf_expected_with_finite_actual_fails():
    s = compare_tensor("t", np.array([1e30]), np.array([np.inf]), atol=1.0, rtol=1.0)
    assert s.failed == 1


def test_identical_and_all_zero():
    s = compare_tensor("t", torch.zeros(3, 4), torch.zeros(3, 4), atol=0, rtol=0)
    assert s.passed and s.cosine == 1.0 and s.rel_l2 == 0.0 and s.max_rel == 0.0
    s = compare_tensor("t", torch.ones(3), torch.zeros(3), atol=0, rtol=0)
    assert not s.passed and s.cosine == 0.0


def test_half_and_bfloat16_inputs():
    x = torch.tensor([1.0, 2.0, 3.0])
    s = compare_tensor("t", x.bfloat16(), x, atol=0, rtol=0)
    assert s.passed  # exactly representable
    s = compare_tensor("t", torch.tensor([1.0009765625]).half(), torch.tensor([1.0]), atol=0, rtol=5e-4)
    assert not s.passed and s.max_rel == pytest.approx(0.0009765625)


def test_relative_atol_scales_with_expected():
    expected = np.array([0.001, -0.002, 0.0005])
    actual = expected + np.array([1e-5, 0.0, 0.0])
    absolute = compare_tensor("t", actual, expected, atol=1e-4, rtol=0.0)
    relative = compare_tensor("t", actual, expected, atol=1e-4, rtol=0.0, atol_relative=True)
    assert absolute.passed and absolute.atol == 1e-4
    assert relative.atol == pytest.approx(2e-7) and not relative.passed  # 1e-4 * max|expected| = 2e-7 < 1e-5


def test_shape_mismatch_and_missing_output():
    s = compare_tensor("t", np.zeros((2, 3)), np.zeros((3, 3)), 1, 1)
    assert not s.passed and "shape mismatch" in s.note
    s = compare_tensor("t", np.zeros((6,)), np.zeros((2, 3)), 1, 1)
    assert not s.passed and "shape mismatch: actual (6,) vs expected (2, 3)" in s.note
    report = compare({"a": np.zeros(2)}, {"a": np.zeros(2), "b": np.ones(2)}, 1e-3, 1e-3)
    assert [r.passed for r in report.outputs] == [True, False] and not report.passed
    assert "missing from the actual outputs" in report.outputs[1].note
    with pytest.raises(ValueError, match="no expected"):
        compare({"a": np.zeros(2)}, {"a": np.zeros(2)}, names=["zzz"])
    with pytest.raises(ValueError, match=r"^atol must be a finite number >= 0, got -1\.0$"):
        compare({}, {}, atol=-1)


def test_histogram_counts_every_element():
    rng = np.random.default_rng(0)
    expected = rng.random(1000)
    actual = expected + np.where(rng.random(1000) < 0.5, 0.0, 10.0 ** rng.uniform(-8, -2, 1000))
    actual[0] = np.nan
    s = compare_tensor("t", actual, expected, 1e-3, 1e-3)
    h = s.hist
    assert h["zeros"] + h["nonfinite"] + sum(h["counts"]) == 1000
    assert h["nonfinite"] == 1 and len(h["edges"]) == len(h["counts"]) + 1


def test_default_tolerances():
    assert default_tolerances("fp16") == (1e-2, 1e-2)
    assert default_tolerances("int8") == (0.1, 0.1) and default_tolerances("fp8") == (0.2, 0.2)  # README's budget
    with pytest.raises(ValueError, match="int4"):
        default_tolerances("int4")


@pytest.fixture
def report():
    expected = {"logits": np.linspace(-1, 1, 50), "boxes": np.ones((2, 4))}
    actual = {"logits": expected["logits"] + 1e-3, "boxes": np.ones((2, 4)) * 1.5}
    return compare(actual, expected, atol=1e-2, rtol=1e-2, meta={"model": "m<1>", "backend": "reference",
                                                                  "precision": "fp16"})


def test_table(report):
    text = report.to_table()
    lines = text.splitlines()
    assert lines[0] == "parity: model=m<1> backend=reference precision=fp16 atol=0.01 rtol=0.01"
    row = next(line for line in lines if line.startswith("boxes"))
    assert row.split()[-1] == "FAIL" and "8/8" in row
    assert next(line for line in lines if line.startswith("logits")).split()[-1] == "PASS"
    assert lines[-1] == "result: FAIL (failing outputs: boxes)"


def test_json(report, tmp_path):
    path = tmp_path / "sub" / "r.json"
    report.to_json(path)
    data = json.loads(path.read_text())
    assert data["passed"] is False and data["atol_mode"] == "absolute"
    boxes = data["outputs"][1]
    assert boxes["name"] == "boxes" and boxes["max_abs"] == pytest.approx(0.5) and boxes["failed"] == 8
    logits = data["outputs"][0]
    # every logit is off by 1e-3, so the largest relative error is at the smallest |expected| (linspace(-1, 1, 50)
    # has no zero: 1/49 is the smallest magnitude)
    assert logits["name"] == "logits" and logits["max_abs"] == pytest.approx(1e-3, rel=1e-6)
    assert logits["max_rel"] == pytest.approx(1e-3 * 49, rel=1e-6) and logits["failed"] == 0


def test_html_has_tables_and_inline_svg(report, tmp_path):
    text = report.to_html(tmp_path / "r.html")
    assert (tmp_path / "r.html").read_text() == text
    assert text.startswith("<!DOCTYPE html>") and text.count("<svg") == 2
    assert "m&lt;1&gt;" in text and "<script" not in text
    assert 'class="fail"' in text


def test_png_is_written_with_matplotlib(report, tmp_path):
    # matplotlib is in the `test` extra: without it this fails rather than skipping the real PNG path
    import matplotlib.image

    path = tmp_path / "sub" / "r.png"
    assert report.to_png(path) is True
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and not list(path.parent.glob("*.tmp*"))
    img = matplotlib.image.imread(path)
    # one histogram panel per output: figsize (6, 2.2 * 2) inches at 100 dpi, and not a blank canvas
    assert img.shape[:2] == (440, 600) and img[..., :3].std() > 0.01


def test_png_without_matplotlib_writes_nothing(report, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` raises ImportError
    assert report.to_png(tmp_path / "r.png") is False
    assert not (tmp_path / "r.png").exists()


def test_tensors_that_could_not_be_compared_show_no_error_statistics():
    """A size mismatch, a missing output or a module that never ran compares no value: no max_abs of
    inf, no cosine of 1.000000 and no rel_l2 of 0 in the table or the JSON, and the row is a jump."""
    report = compare({"y": np.zeros((2, 3)), "z": np.ones(2)},
                     {"y": np.zeros((3, 3)), "z": np.ones(2), "w": np.ones(2)})
    y, z, w = report.outputs
    for row in (y, w):
        assert not row.passed
        assert all(math.isnan(getattr(row, k)) for k in ("max_abs", "mean_abs", "p99_abs", "max_rel", "rel_l2",
                                                         "cosine", "min_atol", "min_rtol"))
    assert y.failed == 9 and z.passed and z.cosine == pytest.approx(1.0)
    line = next(line for line in report.to_table().splitlines() if line.startswith("y "))
    assert "inf" not in line and "1.000000" not in line and "n/a" in line and line.split()[-1] == "FAIL"
    d = _strict_json(report.to_json())["outputs"][0]
    assert d["max_abs"] is None and d["cosine"] is None and d["rel_l2"] is None
    rows = layerwise_rows({"a": torch.ones(2), "b": torch.ones(3)}, {"a": torch.ones(2), "b": torch.ones(2)},
                          {"a": "a", "b": "b", "c": "never"}, ["a", "b"], {}, 1e-5, 1e-5)
    assert [r.passed for r in rows] == [True, False] and math.isnan(rows[1].cosine) and find_jump(rows) == "b"
    never = layerwise_rows({"c": torch.ones(2)}, {}, {"c": "never"}, ["c"], {}, 1e-5, 1e-5)[0]
    assert not never.passed and math.isnan(never.max_abs) and math.isnan(never.cosine)


def test_empty_report_does_not_pass():
    assert not Report([], 1e-3, 1e-3).passed


def test_equal_size_shape_mismatch_fails_the_report():
    """An output of the right size but the wrong shape (here transposed) is a FAIL, not a note."""
    expected = np.arange(6, dtype=np.float32).reshape(2, 3)
    report = compare({"y": expected.T.copy()}, {"y": expected}, 1e3, 1e3)
    assert not report.passed and not report.outputs[0].passed
    assert "shape mismatch: actual (3, 2) vs expected (2, 3)" in report.outputs[0].note


def _strict_json(text: str) -> dict:
    """json.loads that refuses NaN/Infinity (not JSON; many parsers reject them)."""
    def refuse(constant):
        raise AssertionError(f"the report holds the non-JSON constant {constant}")
    return json.loads(text, parse_constant=refuse)


def test_json_report_spells_non_finite_statistics_out():
    """inf becomes "inf", -inf "-inf" and NaN null, so the report is strict JSON; atol_mode and layers say
    what the run was (values written by hand: y's error is inf, z's relative error is 1/0)."""
    report = compare({"y": np.array([np.inf, 1.0]), "z": np.array([1.0, 2.0])},
                     {"y": np.array([1.0, 1.0]), "z": np.array([0.0, 2.0])})
    d = _strict_json(report.to_json())
    y, z = d["outputs"]
    assert [y[k] for k in ("max_abs", "mean_abs", "max_rel", "rel_l2", "min_atol", "min_rtol")] == ["inf"] * 6
    assert (z["max_abs"], z["mean_abs"], z["max_rel"], z["min_atol"], z["min_rtol"]) == (1.0, 0.5, "inf", 1.0, "inf")
    assert d["atol_mode"] == "absolute" and d["layers"] is None
    relative = _strict_json(compare({"y": np.ones(2)}, {"y": np.ones(2)}, atol_relative=True).to_json())
    assert relative["atol_mode"] == "relative to max |expected| per tensor"
    stats = compare_tensor("t", np.ones(2), np.ones(2), 1e-4, 1e-3)
    stats.cosine, stats.min_atol, stats.expected_max_abs = math.nan, -math.inf, 2
    assert (stats.to_dict()["cosine"], stats.to_dict()["min_atol"], stats.to_dict()["expected_max_abs"]) == \
        (None, "-inf", 2)
    report.layers = [stats]  # a layerwise run's rows
    assert _strict_json(report.to_json())["layers"] == [stats.to_dict()]


def _argmax_rows(scores, actual_idx, atol=1e-3, rtol=0.0):
    """The index row and the score row for `actual_idx` against PyTorch's argmax of `scores`."""
    from trtbuild.parity.compare import judge_argmax_ties

    scores = torch.tensor(scores, dtype=torch.float64)
    expected_idx = scores.argmax(-1).to(torch.int32)
    actual_idx = torch.tensor(actual_idx, dtype=torch.int32)
    score_row = compare_tensor("log_probs", scores, scores, atol, rtol)
    row = compare_tensor("labels", actual_idx, expected_idx, 0.0, 0.0)
    judge_argmax_ties(row, actual_idx, expected_idx, scores, score_row)
    return row


def test_an_argmax_index_that_flips_at_a_near_tie_passes_and_any_other_difference_fails():
    scores = [[0.5, 0.5004, 0.1], [0.9, 0.0, 0.2]]          # PyTorch's argmax: 1, then 0
    assert _argmax_rows(scores, [1, 0]).passed                    # equal indices
    tie = _argmax_rows(scores, [0, 0])                            # 0.5 vs 0.5004: within atol 1e-3
    assert tie.passed and tie.failed == 0 and tie.max_abs == 1.0  # the statistics stay as measured
    assert "1 of the 1 indices" in tie.note and "'log_probs'" in tie.note
    assert _argmax_rows(scores, [0, 0], atol=1e-4).failed == 1    # the same flip beyond a tighter tolerance
    wrong = _argmax_rows(scores, [2, 0])                          # 0.1 vs 0.5004: a real difference
    assert not wrong.passed and wrong.failed == 1 and "0 of the 1" in wrong.note
    outside = _argmax_rows(scores, [1, 3])                        # no class 3
    assert not outside.passed and outside.failed == 1


def test_a_near_tie_within_the_relative_tolerance_passes():
    scores = [[-100.0, -100.5, -300.0]]
    assert _argmax_rows(scores, [1], atol=0.0, rtol=1e-2).passed       # 0.5 <= 0.01 * 100
    assert not _argmax_rows(scores, [1], atol=0.0, rtol=1e-3).passed   # 0.5 > 0.1


def test_the_crnn_labels_are_judged_as_the_argmax_of_its_log_probs():
    from trtbuild.engine import get_spec

    assert get_spec("crnn").argmax_of == {"labels": "log_probs"}
