"""`trtbuild debug precision`: the search finds a planted fp16-sensitive L2Norm (tensorrtx's plain
composition, whose sum of squares overflows fp16) early or late in a user network, an int8 layer
whose calibrated input range was shrunk 10x, nothing when there is nothing to find, and refuses in
one sentence when even fp32 everywhere fails. Each found set is confirmed by an independent parity
run with --keep; the CLI prints the trials and a --keep option, writes --json, guards its output
and respects --max-builds. Networks: tests/helpers/precision_net.py (hand-known module names)."""

from __future__ import annotations

import json
from pathlib import Path

from helpers import precision_net as P
import pytest

import trtbuild.reference as ref_trt
from trtbuild.cli import main
from trtbuild.debug import PrecisionSearchError, search_precision
from trtbuild.engine import quant_plan
from trtbuild.parity import check_model_parity
from trtbuild.parity.options import ParityOptions
from trtbuild.quant import calibrate_data, random_source, write_calibration

NET = str(Path(__file__).resolve().parents[1] / "helpers" / "precision_net.py")
#: the candidates of the networks, in network order: every planned conv and the planned norm
EARLY_ORDER = ["conv1", "norm", "conv2", "conv3", "conv4", "conv5", "conv6"]
LATE_ORDER = ["conv1", "conv2", "conv3", "conv4", "conv5", "norm", "conv6"]


def _parity(spec, precision, keep=(), calibration=None):
    module = spec.torch_factory(0, False)
    quant = quant_plan(spec, precision, calibration, keep, module=module)
    return check_model_parity(spec, ref_trt, precision=precision, module=module, quant=quant)


@pytest.mark.parametrize("spec, order", [(P.EARLY, EARLY_ORDER), (P.LATE, LATE_ORDER)], ids=["early", "late"])
def test_search_finds_the_planted_fp16_norm(spec, order):
    trials = []
    result = search_precision(spec, ref_trt, "fp16", on_trial=lambda n, t: trials.append((n, t.kept, t.passed)))
    assert result.candidates == order
    assert result.kept == ["norm"] and result.keep_option == "fp32:norm" and result.complete
    assert not result.before.passed and result.after.passed
    assert result.before.outputs[0].cosine < 0.95 and result.after.outputs[0].cosine > 0.9999
    # nothing kept, all kept, then bisection: at most 2 + 3 (prefixes of 7) + 3 (suffixes) + 1 (pruning) builds
    assert trials[0][1:] == ((), False) and trials[1][1:] == (tuple(order), True)
    assert len(trials) == result.builds <= 9 and [n for n, _, _ in trials] == list(range(1, len(trials) + 1))
    assert len({frozenset(k) for _, k, _ in trials}) == len(trials)  # no kept set built twice
    # independent parity runs: fp16 fails as it is, passes with --keep fp32:norm, fails keeping every other module
    assert not _parity(spec, "fp16").passed
    assert _parity(spec, "fp16", ["fp32:norm"]).passed
    assert not _parity(spec, "fp16", ["fp32:" + ",".join(n for n in order if n != "norm")]).passed


def test_nothing_to_keep_when_fp16_passes():
    result = search_precision(P.PLAIN, ref_trt, "fp16")
    assert result.kept == [] and result.keep_option is None and result.builds == 1 and result.before.passed
    assert "passes parity with nothing kept" in result.summary()


def test_all_kept_failing_names_the_layers_left_in_fp16_in_one_sentence():
    with pytest.raises(PrecisionSearchError) as e:
        search_precision(P.WRONG, ref_trt, "fp16")
    msg = str(e.value)
    assert msg.startswith("even with all 7 candidate modules kept in fp32 (the modules the builder asks its "
                          "quantization plan about), parity of 'prec_wrong' fails")
    # the constant and the add the builder plants are no candidates and still computed in fp16
    assert "but 2 layers that no candidate covers still computed in fp16 and were not searched (one, wrong)" in msg
    assert "no choice" not in msg and msg.count(". ") == 0 and "\n" not in msg


def test_a_failure_outside_the_candidates_is_not_called_unfixable():
    """The norm is built without trtbuild.layers.planned: keeping every candidate (the convs) leaves it
    in fp16, where it overflows, so the search must not conclude that no choice of layers can fix it."""
    module = P.UNPLANNED.torch_factory(0, False)
    assert check_model_parity(P.UNPLANNED, ref_trt, precision="fp32", module=module).passed  # the builder is right
    assert not check_model_parity(P.UNPLANNED, ref_trt, precision="fp16", module=module).passed
    with pytest.raises(PrecisionSearchError) as e:
        search_precision(P.UNPLANNED, ref_trt, "fp16")
    msg = str(e.value)
    assert "no choice" not in msg and "\n" not in msg
    assert "still computed in fp16 and were not searched (norm/" in msg
    assert "build them through trtbuild.layers.planned" in msg


def test_all_kept_failing_with_nothing_left_in_the_reduced_type_says_no_choice_can_fix_it(tmp_path):
    module = P.WRONG.torch_factory(0, False)
    source = random_source((3, 8, 8), 2, 4, P.WRONG.value_range, seed=0)
    calib = write_calibration(calibrate_data(module, source, "max", model_name="prec_wrong"), tmp_path / "c.json")
    with pytest.raises(PrecisionSearchError) as e:
        search_precision(P.WRONG, ref_trt, "int8", calibration=calib)
    msg = str(e.value)
    assert "so no choice of int8 layers can fix it" in msg and msg.count(". ") == 0 and "\n" not in msg


@pytest.fixture
def shrunk_calibration(tmp_path):
    """int8 calibration of PLAIN (seeded random data), and a copy with conv4's input range shrunk 10x."""
    module = P.PLAIN.torch_factory(0, False)
    source = random_source((3, 8, 8), 2, 4, P.PLAIN.value_range, seed=0)
    good = write_calibration(calibrate_data(module, source, "max", model_name="prec_plain"), tmp_path / "calib.json")
    data = json.loads(Path(good).read_text())
    data["activations"]["conv4.input"] /= 10
    shrunk = tmp_path / "shrunk.json"
    shrunk.write_text(json.dumps(data))
    return good, shrunk


def test_int8_search_finds_the_layer_whose_range_was_shrunk(shrunk_calibration):
    good, shrunk = shrunk_calibration
    assert _parity(P.PLAIN, "int8", calibration=good).passed  # the honest calibration passes
    assert not _parity(P.PLAIN, "int8", calibration=shrunk).passed
    result = search_precision(P.PLAIN, ref_trt, "int8", calibration=shrunk)
    assert result.candidates == [f"conv{i}" for i in range(1, 7)]
    assert result.kept == ["conv4"] and not result.before.passed and result.after.passed
    assert _parity(P.PLAIN, "int8", ["fp32:conv4"], calibration=shrunk).passed
    assert not _parity(P.PLAIN, "int8", ["fp32:conv1,conv2,conv3,conv5,conv6"], calibration=shrunk).passed


def test_int8_search_prunes_a_window_to_the_two_layers_that_need_fp32(tmp_path, shrunk_calibration):
    """Two ranges shrunk (conv2, conv5): the bisections give the window conv2..conv5, and pruning
    must drop conv3 and conv4, which pass parity either way."""
    good, _ = shrunk_calibration
    data = json.loads(Path(good).read_text())
    for key in ("conv2.input", "conv5.input"):
        data["activations"][key] /= 10
    two = tmp_path / "two.json"
    two.write_text(json.dumps(data))
    result = search_precision(P.PLAIN, ref_trt, "int8", calibration=two)
    assert result.kept == ["conv2", "conv5"] and result.complete and result.after.passed
    assert ("conv2", "conv3", "conv4", "conv5") in [t.kept for t in result.trials]  # the window bisection found
    # independent parity runs: both kept passes, either alone fails
    assert _parity(P.PLAIN, "int8", ["fp32:conv2,conv5"], calibration=two).passed
    assert not _parity(P.PLAIN, "int8", ["fp32:conv2"], calibration=two).passed
    assert not _parity(P.PLAIN, "int8", ["fp32:conv5"], calibration=two).passed


def test_bad_options_are_refused():
    with pytest.raises(PrecisionSearchError, match="--max-builds 1: the search needs at least 2 builds"):
        search_precision(P.EARLY, ref_trt, "fp16", max_builds=1)
    with pytest.raises(PrecisionSearchError, match="--precision fp32: debug precision searches fp16, bf16"):
        search_precision(P.EARLY, ref_trt, "fp32")
    with pytest.raises(ValueError, match="--precision int8 needs a calibration file"):
        search_precision(P.EARLY, ref_trt, "int8")


# --- the command line -----------------------------------------------------------------------------

def _cli(capsys, *argv):
    code = main(["debug", "precision", *argv, "--backend", "reference"])
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_prints_trials_and_the_keep_option_and_writes_json(tmp_path, capsys):
    code, out, err = _cli(capsys, f"{NET}:LATE", "--precision", "fp16", "--json", str(tmp_path / "r" / "s.json"))
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("backend: reference (PyTorch)")
    assert lines[2].startswith("trial 1: kept nothing -> FAIL (worst output 'out': max |err| ")
    assert lines[3].startswith("trial 2: kept conv1, conv2, …, conv6 (7 modules) -> PASS")
    assert "candidates (7, network order): " + ", ".join(LATE_ORDER) in lines
    assert "result: keep 1 of 7 candidate modules in fp32: norm (" in out
    assert lines[-2] == "for trtbuild build: --keep fp32:norm"
    data = json.loads((tmp_path / "r" / "s.json").read_text())
    assert data["kept"] == ["norm"] and data["keep_option"] == "fp32:norm" and data["complete"] is True
    assert data["builds"] == len(data["trials"]) == sum(line.startswith("trial ") for line in lines)
    assert data["before"]["passed"] is False and data["after"]["passed"] is True
    assert data["trials"][0]["kept"] == [] and data["trials"][1]["kept"] == LATE_ORDER


def test_cli_max_builds_stops_with_the_smallest_passing_set(tmp_path, capsys):
    code, out, err = _cli(capsys, f"{NET}:EARLY", "--precision", "fp16", "--max-builds", "3", "--json",
                          str(tmp_path / "s.json"))
    assert code == 0, err
    data = json.loads((tmp_path / "s.json").read_text())
    assert data["builds"] == 3 and data["complete"] is False
    # trial 3 keeps the first 3 of 7 candidates (conv1, norm, conv2), which passes: the smallest passing set
    assert data["kept"] == ["conv1", "norm", "conv2"] and data["after"]["passed"] is True
    assert "stopped at --max-builds 3, so this passing set may not be the smallest" in out
    assert _parity(P.EARLY, "fp16", ["fp32:" + ",".join(data["kept"])]).passed


def test_cli_errors_and_output_guard(tmp_path, capsys):
    net = tmp_path / "net.py"
    net.write_text(Path(NET).read_text())
    before = net.read_bytes()
    code, out, err = _cli(capsys, f"{net}:EARLY", "--precision", "fp16", "--json", str(net))
    assert code == 1 and net.read_bytes() == before and "trial" not in out
    assert f"--json {net} is the same file as the model file {net} (of {net}:EARLY)" in err, err
    code, out, err = _cli(capsys, f"{NET}:WRONG", "--precision", "fp16", "--json", str(tmp_path / "w.json"))
    assert code == 1 and err.startswith("trtbuild: error: even with all 7 candidate modules kept in fp32")
    assert not (tmp_path / "w.json").exists()
    code, out, err = _cli(capsys, f"{NET}:EARLY", "--precision", "fp16", "--max-builds", "1")
    assert code == 1 and "--max-builds 1: the search needs at least 2 builds" in err
    code, out, err = _cli(capsys, f"{NET}:EARLY", "--precision", "fp16", "--calibration", str(tmp_path / "c.json"))
    assert code == 1 and "--calibration applies to --precision int8 or fp8 only" in err


def test_weights_file_is_what_every_trial_builds_and_compares(tmp_path):
    from trtbuild.weights import export_weights

    path = tmp_path / "early.wts"
    export_weights(P.EARLY.torch_factory(3, False), path)  # other weights than the seeded (seed 0) model's
    result = search_precision(P.EARLY, ref_trt, "fp16", weights=path)
    assert result.kept == ["norm"]
    assert all(t.report.meta["weights"] == str(path) for t in result.trials)


def test_cli_refuses_tensorrt_rtx_where_its_engines_cannot_run(rtx, capsys):
    from trtbuild.engine.rtx import can_run_here

    runs, why = can_run_here(rtx)
    if runs:
        pytest.skip("this GPU runs TensorRT-RTX engines")
    code = main(["debug", "precision", f"{NET}:EARLY", "--precision", "fp16", "--backend", "tensorrt-rtx"])
    out, err = capsys.readouterr()
    assert code == 1 and out.startswith("backend: tensorrt-rtx") and "trial" not in out
    assert err.strip() == (f"trtbuild: error: debug precision runs every trial's engine, and TensorRT-RTX engines "
                           f"cannot run here ({why}); use --backend reference, or run this on a GPU TensorRT-RTX "
                           "supports")


def _recording_parity(monkeypatch) -> list:
    """The `parity` every trial's check_model_parity call gets, recorded (the calls still run)."""
    import trtbuild.parity

    seen, real = [], trtbuild.parity.check_model_parity

    def recording(*args, **kwargs):
        seen.append(kwargs.get("parity"))
        return real(*args, **kwargs)
    monkeypatch.setattr(trtbuild.parity, "check_model_parity", recording)
    return seen


def test_the_search_judges_every_trial_with_one_parity_options(monkeypatch):
    seen = _recording_parity(monkeypatch)
    result = search_precision(P.EARLY, ref_trt, "fp16", seed=3, value_range=(-2, 2), atol=0.05, rtol=0.01)
    want = ParityOptions(seed=3, value_range=(-2.0, 2.0), atol=0.05, rtol=0.01)
    assert len(seen) == result.builds >= 2 and all(p == want for p in seen)  # the shorthand makes one
    typed = ParityOptions(seed=3, value_range=(-2, 2), atol=0.05, rtol=0.01)
    seen.clear()
    again = search_precision(P.EARLY, ref_trt, "fp16", parity=typed)
    assert all(p is typed for p in seen) and len(seen) == again.builds
    assert (again.kept, again.builds) == (result.kept, result.builds)
    assert again.before.outputs[0].max_abs == result.before.outputs[0].max_abs  # the same inputs and engines


def test_parity_options_and_their_keywords_are_refused_together_in_one_sentence(monkeypatch):
    seen = _recording_parity(monkeypatch)
    with pytest.raises(ValueError, match=r"^search_precision: pass either parity=ParityOptions\(\.\.\.\) or keyword "
                                         r"arguments \(atol, seed\), not both$"):
        search_precision(P.PLAIN, ref_trt, "fp16", parity=ParityOptions(), seed=1, atol=0.1)
    with pytest.raises(ValueError, match=r"^search_precision: parity must be a ParityOptions, got dict$"):
        search_precision(P.PLAIN, ref_trt, "fp16", parity={"seed": 1})
    with pytest.raises(ValueError, match=r"^search_precision judges the model's outputs, so parity.layerwise must "
                                         r"be False \(compare layer by layer with `trtbuild parity --layerwise`\)$"):
        search_precision(P.PLAIN, ref_trt, "fp16", parity=ParityOptions(layerwise=True))
    with pytest.raises(ValueError, match=r"^parity option seed must be an integer, got 1.5$"):
        search_precision(P.PLAIN, ref_trt, "fp16", seed=1.5)
    assert seen == []  # refused before any build
