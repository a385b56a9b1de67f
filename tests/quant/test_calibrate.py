"""Calibration in PyTorch (trtbuild.quant, `trtbuild calibrate`): the four methods against
hand-computed values and brute force written here, the hooks against tensors captured here, the
calibration file's refusals, the CLI with its three data sources, and the output guard."""

from __future__ import annotations

import hashlib
import json
import math
from collections import Counter

import numpy as np
import pytest
import torch
from scipy.stats import entropy as scipy_entropy
from torch import nn

from trtbuild.cli import main
from trtbuild.models import registry
from trtbuild.quant import AbsHistogram, calibrate, compute_amax, load_calibration, write_calibration
from trtbuild.quant.histogram import amax_entropy, amax_mse

SMALL_SHAPE = (3, 64, 64)  # resnet18 --small, per sample


# ---------------------------------------------------------------- methods

def _hist(*batches, bins=2048, histogram=True):
    h = AbsHistogram(bins, histogram=histogram)
    for b in batches:
        h.collect(torch.as_tensor(b, dtype=torch.float32))
    return h


def test_max_is_the_running_max_of_abs_over_batches():
    h = _hist([1.0, -3.0, 2.0], [[-0.5, 2.5]], [0.0], histogram=False)
    assert compute_amax(h, "max") == 3.0
    assert h.count == 6


@pytest.mark.parametrize("percentile", [99.0, 99.9, 99.99])
def test_percentile_matches_numpy_within_one_bin(percentile):
    gen = np.random.default_rng(0)
    a, b = gen.standard_normal(60_000), 2.0 * gen.standard_normal(60_000)  # the second batch grows the range
    h = _hist(a, b)
    amax = compute_amax(h, "percentile", percentile)
    expected = float(np.percentile(np.abs(np.concatenate([a, b])).astype(np.float32), percentile))
    width = float(np.abs(a).max()) / 2048
    assert expected - 1e-6 <= amax <= expected + width + 1e-6
    # the histogram holds every value once, with bins of the first batch's width
    assert h.counts.sum() == 120_000 and h.width == pytest.approx(width, rel=1e-6)


def _true_int8_mse(x: torch.Tensor, amax: float) -> float:
    scale = amax / 127.0
    q = torch.clamp(torch.round(x / scale), -128, 127) * scale  # torch.round: half to even
    return float(((q - x) ** 2).mean())


def test_mse_finds_the_brute_force_minimum_and_clips_an_outlier():
    gen = torch.Generator().manual_seed(0)
    x = torch.cat([torch.randn(200_000, generator=gen), torch.tensor([100.0])])
    amax = compute_amax(_hist(x), "mse")
    candidates = np.linspace(5.0, 100.0, 96)
    errors = [_true_int8_mse(x, float(a)) for a in candidates]
    best = float(candidates[int(np.argmin(errors))])
    # one outlier in 200k: the optimum is about 100 / (1 + 200000 / (127^2 * 12)) ~ 49, well below max
    assert 40 < best < 60 and amax < 0.65 * 100.0
    assert _true_int8_mse(x, amax) <= 1.02 * min(errors)
    assert _true_int8_mse(x, amax) < 0.5 * _true_int8_mse(x, 100.0)


def _entropy_brute_force(counts, edges, start=128):
    """TensorRT's legacy entropy calibration written plainly (loops), for the comparison."""
    bins = counts.astype(np.float64).copy()
    bins[0] = bins[1]
    results = []
    for i in range(start, len(bins) + 1):
        reference = bins[:i].copy()
        reference[i - 1] += bins[i:].sum()
        space = np.linspace(0, i, 129)
        group = np.digitize(range(i), space) - 1
        group[bins[:i] == 0] = -1
        sums, sizes = Counter(), Counter()
        for j in range(i):
            if group[j] != -1:
                sums[group[j]] += bins[j]
                sizes[group[j]] += 1
        candidate = np.array([sums[group[j]] / sizes[group[j]] if group[j] != -1 else 0.0 for j in range(i)])
        results.append((scipy_entropy(reference, candidate), i))
    best = min(kl for kl, _ in results)
    return float(edges[max(i for kl, i in results if kl == best)])


def test_entropy_matches_a_brute_force_kl_search_and_clips_outliers():
    gen = np.random.default_rng(2)
    x = np.abs(np.concatenate([gen.laplace(size=50_000), [30.0, -28.0]]))  # bulk up to ~10, two outliers
    counts, edges = np.histogram(x, bins=512, range=(0, x.max()))
    amax = amax_entropy(counts.astype(np.float64), edges)
    assert amax == pytest.approx(_entropy_brute_force(counts, edges), rel=1e-12)
    assert amax < 0.4 * x.max()


def test_the_histogram_is_numpys_histogram():
    gen = np.random.default_rng(2)
    x = np.abs(gen.standard_normal(10_000)).astype(np.float32)
    h = _hist(x, bins=512)
    counts, _ = np.histogram(x, bins=512, range=(0, float(x.max())))
    assert h.counts.sum() == counts.sum()
    assert np.abs(h.counts - counts).sum() <= 4  # float32 vs float64 bin boundaries at most


def test_mse_on_a_histogram_is_the_bin_centre_a_plain_loop_finds():
    """amax_mse searches in chunks; this loop tries every candidate centre (bin 128 on) one by one."""
    gen = np.random.default_rng(2)
    x = np.abs(gen.standard_normal(10_000)).astype(np.float32)
    counts, edges = np.histogram(x, bins=512, range=(0, float(x.max())))
    centres = (edges[1:] + edges[:-1]) / 2
    errors = {}
    for i in range(128, 512):
        scale = centres[i] / 127
        q = np.clip(np.round(centres / scale), -128, 127) * scale
        errors[i] = float((counts * (q - centres) ** 2).sum())
    best = min(errors, key=errors.get)
    assert 256 < best < 511  # in the second chunk of 256 candidates, and not the last bin (max)
    assert amax_mse(counts.astype(np.float64), edges) == centres[best]


def test_percentile_mse_entropy_clip_below_max_on_outliers_and_max_does_not():
    gen = torch.Generator().manual_seed(3)
    x = torch.cat([torch.randn(100_000, generator=gen), torch.tensor([60.0, -55.0])])
    h = _hist(x[:50_000], x[50_000:])
    assert compute_amax(h, "max") == 60.0
    for method in ("percentile", "entropy"):
        assert compute_amax(h, method, 99.9) < 0.5 * 60.0, method
    # mse weighs the two outliers' clipping error against 100k rounding errors: the optimum is ~40 here
    assert 30.0 < compute_amax(h, "mse") < 50.0


def test_an_all_zero_tensor_gets_amax_1_and_is_listed():
    model = nn.Sequential(nn.ReLU(), nn.Linear(4, 2))
    calib = calibrate(model, [-torch.ones(2, 4)], "percentile")
    assert calib.activations["1.input"] == 1.0 and "1.input" in calib.all_zero


# ---------------------------------------------------------------- hooks

def _capture(model, names, x, pre=False):
    got = {}
    handles = []
    for name in names:
        module = model.get_submodule(name)
        if pre:
            handles.append(module.register_forward_pre_hook(
                lambda m, a, n=name: got.__setitem__(n, float(a[0].abs().max()))))
        else:
            handles.append(module.register_forward_hook(
                lambda m, a, o, n=name: got.__setitem__(n, float(o.abs().max()))))
    with torch.no_grad():
        model(x)
    for h in handles:
        h.remove()
    return got


RESNET18_ADDS = {f"layer{s}.{b}.add": [f"layer{s}.{b}.bn2.output",
                                        ("maxpool" if (s, b) == (1, 0) else f"layer{s}.0.downsample" if b == 0
                                         else f"layer{s}.0") + ".output"]
                 for s in (1, 2, 3, 4) for b in (0, 1)}


def test_hooks_record_every_conv_linear_input_and_the_residual_add_inputs_of_resnet18():
    model = registry.get_torch_model("resnet18", small=True)
    x = torch.rand(2, *SMALL_SHAPE) * 2 - 1
    calib = calibrate(model, [x], "max", model_name="resnet18")
    convs = [n for n, m in model.named_modules() if isinstance(m, (nn.Conv2d, nn.Linear))]
    assert len(convs) == 21
    inputs = _capture(model, convs, x, pre=True)
    assert {k: v for k, v in calib.activations.items() if k.endswith(".input")} == {f"{n}.input": v
                                                                                     for n, v in inputs.items()}
    assert calib.adds == RESNET18_ADDS
    producers = sorted({k[:-len(".output")] for keys in RESNET18_ADDS.values() for k in keys})
    outputs = _capture(model, producers, x)
    assert {k: v for k, v in calib.activations.items() if k.endswith(".output")} == {f"{n}.output": v
                                                                                      for n, v in outputs.items()}
    for name in convs:
        w = model.get_submodule(name).weight.detach().abs()
        assert calib.weights[f"{name}.weight"] == w.reshape(w.shape[0], -1).amax(1).tolist()
    assert calib.shapes["activations"]["fc.input"] == [64] and calib.shapes["weights"]["conv1.weight"] == [8, 3, 7, 7]


class UserNet(nn.Module):
    def __init__(self, width=6):
        super().__init__()
        self.conv1 = nn.Conv2d(3, width, 3, padding=1)
        self.relu1 = nn.ReLU()
        self.conv2 = nn.Conv2d(width, width, 3, padding=1)
        self.gn = nn.GroupNorm(2, width)
        self.fc = nn.Linear(width, 3)

    def forward(self, x):
        y = self.relu1(self.conv1(x))
        y = y + self.gn(self.conv2(y))  # a residual add at the top level
        y = y + torch.sin(y)            # an input no module returned
        return self.fc(y.mean((2, 3)))


def test_hooks_on_a_user_network_name_the_adds_and_their_inputs():
    torch.manual_seed(0)
    model = UserNet().eval()
    x = torch.randn(3, 3, 8, 8)
    calib = calibrate(model, [x[:2], x[2:]], "max")
    assert calib.adds == {"add": ["relu1.output", "gn.output"], "add_1": ["add_1.input0", "add_1.input1"]}
    with torch.no_grad():
        y = model.relu1(model.conv1(x))
        g = model.gn(model.conv2(y))
        z = y + g
        expected = {"conv1.input": x, "conv2.input": y, "relu1.output": y, "gn.output": g, "add_1.input0": z,
                    "add_1.input1": torch.sin(z), "fc.input": (z + torch.sin(z)).mean((2, 3))}
        assert set(calib.activations) == set(expected)
        for key, t in expected.items():
            assert calib.activations[key] == pytest.approx(float(t.abs().max()), rel=1e-6), key


class TinyViT(nn.Module):
    """A class token concatenated before a position-embedding add, then one residual block."""

    def __init__(self, dim=8, patches=4):
        super().__init__()
        self.embed = nn.Linear(3, dim)
        self.cls_token = nn.Parameter(torch.randn(1, 1, dim))
        self.pos_embed = nn.Parameter(torch.randn(1, patches + 1, dim))
        self.proj = nn.Linear(dim, dim)
        self.head = nn.Linear(dim, 2)

    def forward(self, x):  # x: B x patches x 3
        x = self.embed(x)
        x = torch.cat((self.cls_token.expand(x.shape[0], -1, -1), x), dim=1) + self.pos_embed
        x = x + self.proj(x)
        return self.head(x[:, 0])


@pytest.mark.parametrize("batch", [1, 4])
def test_an_add_of_a_parameter_is_no_residual_add_whatever_the_batch(tmp_path, batch):
    torch.manual_seed(0)
    model = TinyViT().eval()
    x = torch.randn(batch, 4, 3)
    calib = calibrate(model, [x], "max", model_name="vit")
    assert calib.adds == {"add": ["add.input0", "proj.output"]}  # residual adds alone are numbered
    assert set(calib.shapes["activations"]) == {"embed.input", "proj.input", "head.input", "add.input0",
                                                "proj.output"}
    with torch.no_grad():
        tokens = torch.cat((model.cls_token.expand(batch, -1, -1), model.embed(x)), dim=1) + model.pos_embed
        assert calib.activations["add.input0"] == pytest.approx(float(tokens.abs().max()), rel=1e-6)
    calib.data = {"sample_shape": [4, 3]}
    path = write_calibration(calib, tmp_path / "vit.json")
    assert load_calibration(path, model).adds == calib.adds  # checked against a forward at batch 1


class _InPlaceBlock(nn.Module):
    """torchvision ResNet's form: ``out += identity`` then an in-place ReLU on the same tensor."""

    def __init__(self):
        super().__init__()
        self.conv, self.relu = nn.Conv2d(4, 4, 3, padding=1), nn.ReLU(inplace=True)

    def forward(self, x):
        out = self.conv(x)
        out += x
        return self.relu(out)


class _Inverted(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Sequential(nn.Conv2d(4, 4, 3, padding=1), nn.BatchNorm2d(4))

    def forward(self, x):
        return x + self.conv(x)


def test_module_adds_names_the_modules_that_return_their_own_add_unchanged():
    from trtbuild.quant.record import module_adds

    torch.manual_seed(0)
    model = nn.Sequential(_InPlaceBlock(), _Inverted(), nn.ReLU()).eval()
    assert module_adds(model, torch.randn(2, 4, 5, 5)) == {"1": "1.add"}  # block 0's sum went through its ReLU
    calib = calibrate(model, [torch.randn(2, 4, 5, 5)], "max")
    assert calib.adds == {"0.add": ["0.conv.output", "0.add.input1"], "1.add": ["0.output", "1.conv.output"]}
    assert calib.add_sources == {"0.add": ["0.conv", None], "1.add": [None, "1.conv.0"]}  # conv, BN folded


# ---------------------------------------------------------------- the file

@pytest.fixture(scope="module")
def resnet_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("calib") / "r18.json"
    model = registry.get_torch_model("resnet18", small=True)
    calib = calibrate(model, [torch.rand(2, *SMALL_SHAPE)], "max", model_name="resnet18")
    calib.small, calib.data = True, {"sample_shape": list(SMALL_SHAPE)}
    write_calibration(calib, path)
    return path


def _edited(tmp_path, source, edit):
    data = json.loads(source.read_text())
    edit(data)
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(data))
    return path


def test_the_file_loads_for_its_network(resnet_file):
    calib = load_calibration(resnet_file, registry.get("resnet18"), small=True)
    assert calib.model == "resnet18" and len(calib.weights) == 21
    assert load_calibration(resnet_file, registry.get("resnet18")).small is True  # the file's size variant
    assert load_calibration(resnet_file, registry.get_torch_model("resnet18", small=True)).model == "resnet18"


def test_the_file_is_refused_for_another_model_or_size(resnet_file):
    with pytest.raises(ValueError, match=r"made for model 'resnet18', not 'resnet50'"):
        load_calibration(resnet_file, registry.get("resnet50"), small=True)
    with pytest.raises(ValueError, match=r"small variant"):
        load_calibration(resnet_file, registry.get("resnet18"), small=False)


def test_the_file_is_refused_for_a_network_of_other_tensors(tmp_path):
    torch.manual_seed(0)
    calib = calibrate(UserNet(6).eval(), [torch.randn(1, 3, 8, 8)], "max", model_name="usernet")
    calib.data = {"sample_shape": [3, 8, 8]}
    path = write_calibration(calib, tmp_path / "u.json")
    with pytest.raises(ValueError, match=r"another network.*tensor conv2.input is 4x8x8 in the network but "
                                         r"6x8x8 in the file"):
        load_calibration(path, UserNet(4).eval())


@pytest.mark.parametrize("edit, message", [
    (lambda d: d.update(fingerprint="0" * 64), "fingerprint"),
    (lambda d: d["shapes"]["weights"].update({"conv1.weight": [9, 3, 7, 7]}), "fingerprint"),
    (lambda d: d["activations"].update({"conv1.input": float("nan")}), r"gives tensor conv1\.input the amax nan"),
    (lambda d: d["activations"].update({"fc.input": 0.0}), r"gives tensor fc\.input the amax 0\.0"),
    (lambda d: d["weights"]["fc.weight"].__setitem__(0, -1.0), r"gives weight fc\.weight the amax -1\.0"),
    (lambda d: d.update(format_version=2), r"format version 2"),
    (lambda d: d.pop("format"), "not a trtbuild calibration file"),
    (lambda d: d["activations"].pop("conv1.input"), "no amax for conv1.input"),
    (lambda d: d["add_sources"].update({"layer1.0.add": ["layer1.0.conv2"]}), r"\"add_sources\" entry"),
])
def test_edited_files_are_refused_in_one_sentence(tmp_path, resnet_file, edit, message):
    path = _edited(tmp_path, resnet_file, edit)
    with pytest.raises(ValueError, match=message) as info:
        load_calibration(path, registry.get("resnet18"), small=True)
    assert str(path) in str(info.value) and "\n" not in str(info.value)


# ---------------------------------------------------------------- the CLI

def _run(*argv):
    return main(["calibrate", *argv, "--no-progress"])


def test_cli_folder_of_npy_and_pt(tmp_path, capsys):
    gen = torch.Generator().manual_seed(0)
    data = tmp_path / "data"
    data.mkdir()
    samples = [torch.rand((2, *SMALL_SHAPE), generator=gen) * 4 - 2, torch.rand(SMALL_SHAPE, generator=gen)]
    np.save(data / "a.npy", samples[0].numpy())
    torch.save(samples[1], data / "b.pt")
    (data / "notes.txt").write_text("ignored")
    out = tmp_path / "c.json"
    assert _run("resnet18", "--small", "--data", str(data), "--method", "percentile", "--out", str(out)) == 0
    d = json.loads(out.read_text())
    assert d["data"]["kind"] == "folder" and d["data"]["samples"] == 3 and d["data"]["batches"] == 2
    digest = hashlib.sha256(b"float32 3x64x64\n")
    for s in samples:
        digest.update(s.numpy().tobytes())
    assert d["data"]["sha256"] == digest.hexdigest()
    assert d["method"] == {"name": "percentile", "percentile": 99.99, "num_bins": 2048}
    # the 99.99th percentile of |x| over both files, to within one bin (max |x| of the first batch / 2048)
    everything = torch.cat([samples[0], samples[1][None]]).abs().numpy()
    expected = float(np.percentile(everything, 99.99))
    width = float(everything[:2].max()) / 2048
    assert expected - 1e-6 <= d["activations"]["conv1.input"] <= expected + width + 1e-6
    load_calibration(out, registry.get("resnet18"), small=True)
    assert "wrote" in capsys.readouterr().out


def test_cli_folder_errors_name_the_file(tmp_path, capsys):
    data = tmp_path / "data"
    data.mkdir()
    np.save(data / "a.npy", np.zeros((3, 64, 63), np.float32))
    out = tmp_path / "c.json"
    assert _run("resnet18", "--small", "--data", str(data), "--out", str(out)) == 1
    err = capsys.readouterr().err
    assert "a.npy has shape 3x64x63" in err and "3x64x64" in err and not out.exists()
    np.save(data / "a.npy", np.full((1, *SMALL_SHAPE), 200, np.uint8))  # raw pixels, not the model's float input
    assert _run("resnet18", "--small", "--data", str(data), "--out", str(out)) == 1
    assert "a.npy has dtype uint8, not a floating-point type" in capsys.readouterr().err and not out.exists()
    np.save(data / "a.npy", np.full((1, *SMALL_SHAPE), np.nan, np.float32))
    assert _run("resnet18", "--small", "--data", str(data), "--out", str(out)) == 1
    assert "a.npy holds NaN" in capsys.readouterr().err and not out.exists()
    (data / "a.npy").unlink()
    torch.save({"x": torch.zeros(SMALL_SHAPE)}, data / "b.pt")
    assert _run("resnet18", "--small", "--data", str(data), "--out", str(out)) == 1
    assert "b.pt is of type dict, not a tensor" in capsys.readouterr().err
    (data / "b.pt").write_text("not a checkpoint")
    assert _run("resnet18", "--small", "--data", str(data), "--out", str(out)) == 1
    assert "b.pt cannot be read" in capsys.readouterr().err and not out.exists()
    (tmp_path / "d.py").write_text("N = 3\n")
    assert _run("resnet18", "--small", "--data", f"{tmp_path / 'd.py'}:N", "--out", str(out)) == 1
    assert "d.py:N is of type int, not an iterable" in capsys.readouterr().err and not out.exists()


def test_cli_iterable_with_labels_and_batching(tmp_path):
    (tmp_path / "calib_set.py").write_text(
        "import torch\n"
        "g = torch.Generator().manual_seed(1)\n"
        "ITEMS = [(torch.rand(3, 64, 64, generator=g) * 3, i % 10) for i in range(5)]\n")
    out = tmp_path / "c.json"
    ref = f"{tmp_path / 'calib_set.py'}:ITEMS"
    assert _run("resnet18", "--small", "--data", ref, "--batch-size", "2", "--batches", "2", "--out", str(out)) == 0
    d = json.loads(out.read_text())
    gen = torch.Generator().manual_seed(1)
    items = [torch.rand(3, 64, 64, generator=gen) * 3 for _ in range(5)]
    assert d["data"]["kind"] == "iterable" and d["data"]["samples"] == 4 and d["data"]["batches"] == 2
    assert d["activations"]["conv1.input"] == pytest.approx(float(torch.stack(items[:4]).max()), rel=1e-7)


def test_cli_random_is_labelled_and_uses_the_weights_given(tmp_path, capsys):
    from trtbuild.weights import export_weights

    weights = tmp_path / "w.wts"
    model = registry.get_torch_model("resnet18", seed=1, small=True)
    export_weights(model, weights)
    out = tmp_path / "c.json"
    assert _run("resnet18", "--small", "--data", "random", "--batches", "2", "--batch-size", "3", "--seed", "5",
                "--weights", str(weights), "--precision", "int8", "--out", str(out)) == 0
    assert "RANDOM" in capsys.readouterr().out
    d = json.loads(out.read_text())
    assert d["data"]["kind"] == "random" and "RANDOM" in d["data"]["description"] and d["data"]["samples"] == 6
    assert d["precision"] == "int8" and str(weights) in d["weights_source"]
    assert 0.99 < d["activations"]["conv1.input"] <= 1.0  # uniform in resnet's value range [-1, 1]
    w = model.conv1.weight.detach().abs()
    assert d["weights"]["conv1.weight"] == pytest.approx(w.reshape(w.shape[0], -1).amax(1).tolist(), rel=1e-7)


def test_cli_output_guard(tmp_path, capsys):
    data = tmp_path / "data"
    data.mkdir()
    np.save(data / "a.npy", np.ones(SMALL_SHAPE, np.float32))
    before = (data / "a.npy").read_bytes()
    assert _run("resnet18", "--small", "--data", str(data), "--out", str(data / "a.npy")) == 1
    assert "same file as the input --data" in capsys.readouterr().err and (data / "a.npy").read_bytes() == before
    html = tmp_path / "r.html"
    html.write_text("<!DOCTYPE html><html></html>")
    assert _run("resnet18", "--small", "--data", str(data), "--out", str(html)) == 1
    assert "not a calibration file" in capsys.readouterr().err and html.read_text().startswith("<!DOCTYPE")
    old = tmp_path / "old.json"
    old.write_text("{}")
    # an empty JSON object holds nothing to lose
    assert _run("resnet18", "--small", "--data", str(data), "--out", str(old)) == 0
    assert json.loads(old.read_text())["format"] == "trtbuild-calibration"
    assert not [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_cli_user_network_function(tmp_path):
    net = tmp_path / "tinynet.py"
    net.write_text(
        "import torch\nfrom torch import nn\n"
        "def make_model():\n"
        "    return nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 6 * 6, 2))\n"
        "def tinynet(network, weights, x):\n    raise NotImplementedError\n")
    out = tmp_path / "c.json"
    try:
        assert _run(f"{net}:tinynet", "--input", "input:1x3x8x8", "--torch", f"{net}:make_model", "--data", "random",
                    "--batches", "1", "--out", str(out)) == 0
    finally:
        registry.unregister("tinynet")
    d = json.loads(out.read_text())
    assert set(d["activations"]) == {"0.input", "3.input"} and d["model"] == "tinynet"
    assert d["shapes"]["weights"] == {"0.weight": [4, 3, 3, 3], "3.weight": [2, 144]}
    assert math.isclose(d["activations"]["0.input"], 1.0, rel_tol=0.02)


def test_ctrl_c_leaves_the_existing_file_untouched(tmp_path, capsys):
    (tmp_path / "stop.py").write_text(
        "import torch\n"
        "def items():\n"
        "    yield torch.zeros(3, 64, 64)\n"
        "    raise KeyboardInterrupt\n")
    out = tmp_path / "c.json"
    mine = '{"format": "trtbuild-calibration", "mine": 1}'  # a calibration file: the one kind --out may replace
    out.write_text(mine)
    assert _run("resnet18", "--small", "--data", f"{tmp_path / 'stop.py'}:items", "--out", str(out)) == 130
    assert "interrupted" in capsys.readouterr().err
    assert out.read_text() == mine
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "__pycache__") == ["c.json", "stop.py"]
