"""`trtbuild inspect A B` on sidecars that differ deep inside: refit records, named weights, profiles and long lists
read as the one field that changed, not as two whole values.

Engines are built here by `trtbuild build` on the reference backend; expected lines are written out by hand from
what each pair was built with (resnet18 names 42 weights: 20 convs, each with the bias of the BatchNorm folded into
it, and fc's weight and bias), with sizes and checksums read from the files themselves."""

from __future__ import annotations

import hashlib
import json
import shutil
import textwrap
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from trtbuild.cli import main
from trtbuild.engine.inspect import inspect_engine
from trtbuild.engine.inspect_diff import diff_reports

NET = textwrap.dedent('''
    from trtbuild.layers.basic import relu
    from trtbuild.layers.planned import planned_conv


    def one(network, weights, x):
        y = planned_conv(network, x, weights.get("conv1.weight"), weights.get("conv1.bias"), "conv1", None, padding=1)
        return {"y": relu(network, y, "relu1")}


    def two(network, weights, x):
        y = planned_conv(network, one(network, weights, x)["y"], weights.get("conv2.weight"), None, "conv2", None,
                         padding=1)
        return {"y": y}
    ''')


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("inspect_diff")
    (root / "net.py").write_text(NET)
    g = torch.Generator().manual_seed(0)
    save_file({"conv1.weight": torch.randn(4, 3, 3, 3, generator=g), "conv1.bias": torch.randn(4, generator=g),
               "conv2.weight": torch.randn(4, 4, 3, 3, generator=g)}, root / "w.safetensors")
    r18 = ["build", "resnet18", "--small", "--backend", "reference", "--no-progress"]
    net = ["--input", "x:1x3x8x8", "--weights", "w.safetensors", "--backend", "reference", "--no-progress"]
    builds = {"identical": [*r18, "--refit"], "any": [*r18, "--refit", "any"],
              "one": ["build", "net.py:one", *net, "--refit", "any"],
              "two": ["build", "net.py:two", *net, "--refit", "any"],
              "p1": ["build", "net.py:one", *net, "--profile", "1x3x8x8,2x3x8x8,4x3x8x8",
                     "--profile", "1x3x16x16,1x3x16x16,2x3x16x16"],
              "p2": ["build", "net.py:one", *net, "--profile", "1x3x8x8,2x3x8x8,4x3x8x8",
                     "--profile", "1x3x16x16,2x3x16x16,4x3x16x16"]}
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(root)
        for name, argv in builds.items():
            assert main([*argv, "-o", f"{name}.engine"]) == 0, name
    return root


def lines(root: Path, a: str, b: str) -> list[str]:
    return [d.text() for d in diff_reports(inspect_engine(root / f"{a}.engine"), inspect_engine(root / f"{b}.engine"))]


def file_facts(root: Path, name: str) -> tuple[int, str]:
    data = (root / f"{name}.engine").read_bytes()
    return len(data), hashlib.sha256(data).hexdigest()


def test_refit_identical_vs_any_is_the_mode_and_the_build_checksums(built):
    (size_a, sha_a), (size_b, sha_b) = file_facts(built, "identical"), file_facts(built, "any")
    sizes = [f"engine plan_bytes: {size_a} -> {size_b}", f"sidecar engine_bytes: {size_a} -> {size_b}"]
    if size_a == size_b:  # the plans' lengths may or may not differ with the flag's name in their header
        sizes = ["", ""]
    expected = [sizes[0], "sidecar refit.mode: identical -> any",
                "sidecar refit.built: only in A ({42 entries})",  # identical records each named weight's checksum
                f"sidecar engine_sha256: {sha_a} -> {sha_b}", sizes[1]]
    assert lines(built, "identical", "any") == [line for line in expected if line]


def test_refit_pair_as_json_keeps_whole_values_at_each_path(built, capsys):
    assert main(["inspect", str(built / "identical.engine"), str(built / "any.engine"), "--json"]) == 1
    diffs = json.loads(capsys.readouterr().out)["differences"]
    assert {"section": "sidecar", "item": "refit.mode", "a": "identical", "b": "any", "change": "changed"} in diffs
    built_record = next(d for d in diffs if d["item"] == "refit.built")
    assert built_record["change"] == "removed" and built_record["b"] is None
    assert len(built_record["a"]) == 42 and {"conv1.weight", "fc.bias"} <= set(built_record["a"])
    assert not any(d["item"] in ("refit", "refit.weights") for d in diffs)


def test_one_extra_named_weight_is_one_line_per_section(built):
    (size_a, sha_a), (size_b, sha_b) = file_facts(built, "one"), file_facts(built, "two")
    assert lines(built, "one", "two") == [
        f"engine plan_bytes: {size_a} -> {size_b}",
        "engine layers: 2 -> 3",
        "layer conv2: only in B (CONVOLUTION)",
        "weight conv2.weight: only in B (conv2)",
        "sidecar model: one -> two",
        "sidecar network: one -> two",
        "sidecar unused_weights: [conv2.weight] -> []",
        "sidecar refit.weights[conv2.weight]: only in B ({name: conv2.weight, keys: [conv2.weight], fold: copy, "
        "shapes: [[4,4,3,3]]})",
        f"sidecar engine_sha256: {sha_a} -> {sha_b}",
        f"sidecar engine_bytes: {size_a} -> {size_b}"]


def test_a_changed_second_profile_names_its_fields(built):
    (_, sha_a), (_, sha_b) = file_facts(built, "p1"), file_facts(built, "p2")
    assert lines(built, "p1", "p2") == [
        "profile x: [[1,3,8,8] / [2,3,8,8] / [4,3,8,8],[1,3,16,16] / [1,3,16,16] / [2,3,16,16]] -> "
        "[[1,3,8,8] / [2,3,8,8] / [4,3,8,8],[1,3,16,16] / [2,3,16,16] / [4,3,16,16]]",
        "sidecar profiles[1].x.opt: [1,3,16,16] -> [2,3,16,16]",
        "sidecar profiles[1].x.max: [2,3,16,16] -> [4,3,16,16]",
        f"sidecar engine_sha256: {sha_a} -> {sha_b}"]


def test_long_lists_show_their_lengths_and_the_first_differing_index(built, tmp_path):
    """Copies of one engine whose sidecars differ only where written here (and in the order of the refit record's
    weights, which is told apart from a change of the weights themselves)."""
    names = [f"block{i}.weight" for i in range(12)]
    edits = {"a": {"unused_weights": names, "extra_outputs": {"stem.out": "t1"}, "plugins": names[:9]},
             "b": {"unused_weights": [*names[:5], "other.weight", *names[6:]], "extra_outputs": {"stem.out": "t2"},
                   "plugins": names}}
    for name, edit in edits.items():
        shutil.copy(built / "one.engine", tmp_path / f"{name}.engine")
        side = json.loads((built / "one.engine.json").read_text())
        side.update(edit)
        if name == "b":  # the same named weights in the other order
            side["refit"]["weights"].reverse()
        (tmp_path / f"{name}.engine.json").write_text(json.dumps(side))
    assert lines(tmp_path, "a", "b") == [
        "sidecar plugins: [9 items] -> [12 items], first difference at index 9",
        "sidecar extra_outputs[stem.out]: t1 -> t2",
        "sidecar unused_weights: [12 items] -> [12 items], first difference at index 5",
        "sidecar refit.weights order: [conv1.weight,conv1.bias] -> [conv1.bias,conv1.weight]"]
