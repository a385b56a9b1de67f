"""vit_tiny: timm's vit_tiny_patch16_224 state-dict keys and shapes (written out by hand from timm's
VisionTransformer / Block / Attention / Mlp / PatchEmbed at embed_dim 192, depth 12, 3 heads, MLP ratio 4),
the network function built from trtbuild.layers builders only, against the PyTorch model on the reference
(fp32 with every mapped tensor, fp16, bf16, layerwise with the automatic map), a dynamic batch run at
several batch sizes from one engine, TensorRT-RTX building it (fp32, fp16, cross-checked), the CLI, the
refusals. Tolerances as in tests/models/test_zoo_parity.py (helpers.model_checks)."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import json

import pytest
import torch

import trtbuild.reference as ref_trt
import trtbuild.models.vit as vit_module
from trtbuild.engine import Engine, build_plan
from trtbuild.engine.build import new_network
from trtbuild.engine.quick import run_spec
from trtbuild.layers.common import BuilderError
from trtbuild.models import registry
from trtbuild.models.pytorch import vit_tiny
from trtbuild.weights import WeightMap

from helpers.model_checks import capture_module_outputs, check_fp16, check_fp32

D, MLP, CLASSES = 192, 768, 1000


def expected_keys(depth: int = 12, patches: int = 196):
    """timm's vit_tiny_patch16_224 state dict, in its order: the root's own parameters first (cls_token,
    pos_embed), then the submodules in construction order (patch_embed, blocks, norm, head)."""
    keys = [("cls_token", (1, 1, D)), ("pos_embed", (1, patches + 1, D)),
            ("patch_embed.proj.weight", (D, 3, 16, 16)), ("patch_embed.proj.bias", (D,))]
    for i in range(depth):
        b = f"blocks.{i}"
        keys += [(f"{b}.norm1.weight", (D,)), (f"{b}.norm1.bias", (D,)),
                 (f"{b}.attn.qkv.weight", (3 * D, D)), (f"{b}.attn.qkv.bias", (3 * D,)),
                 (f"{b}.attn.proj.weight", (D, D)), (f"{b}.attn.proj.bias", (D,)),
                 (f"{b}.norm2.weight", (D,)), (f"{b}.norm2.bias", (D,)),
                 (f"{b}.mlp.fc1.weight", (MLP, D)), (f"{b}.mlp.fc1.bias", (MLP,)),
                 (f"{b}.mlp.fc2.weight", (D, MLP)), (f"{b}.mlp.fc2.bias", (D,))]
    return keys + [("norm.weight", (D,)), ("norm.bias", (D,)), ("head.weight", (CLASSES, D)), ("head.bias", (CLASSES,))]


def test_state_dict_is_timm_vit_tiny_patch16_224():
    model = vit_tiny()
    assert [(k, tuple(v.shape)) for k, v in model.state_dict().items()] == expected_keys()
    # timm's model card for vit_tiny_patch16_224: 5.7 M parameters; by hand: 192 * 197 + 192 (tokens)
    # + 192 * 768 + 192 (patch conv) + 12 * (4 * 192 + 576 * 193 + 192 * 193 + 768 * 193 + 192 * 769)
    # + 2 * 192 + 1000 * 193
    assert sum(p.numel() for p in model.parameters()) == 5_717_416
    blk = model.blocks[0]
    assert blk.norm1.eps == 1e-6 and model.norm.eps == 1e-6 and blk.mlp.act.approximate == "none"


def test_small_variant_keeps_the_keys():
    """--small: 2 blocks at 48x48 (patch 16, so 9 patches): the same key names, every shape as the full model's
    but pos_embed (1 + 9 positions)."""
    small = registry.get_torch_model("vit_tiny", small=True)
    assert [(k, tuple(v.shape)) for k, v in small.state_dict().items()] == expected_keys(depth=2, patches=9)
    spec = registry.get("vit_tiny")
    assert spec.input_shape(False) == (1, 3, 224, 224) and spec.input_shape(True) == (1, 3, 48, 48)
    with pytest.raises(ValueError, match=r"VisionTransformer: input H and W must be 48, got \(32, 32\)"):
        small(torch.zeros(1, 3, 32, 32))


def test_network_module_has_no_raw_tensorrt_call():
    tree = ast.parse(inspect.getsource(vit_module))
    raw = [node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute) and node.attr.startswith("add_")]
    assert raw == []


# -- the network on the reference ----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def small():
    spec = registry.get("vit_tiny")
    model = registry.get_torch_model("vit_tiny", small=True)
    x = torch.rand(4, 3, 48, 48, generator=torch.Generator().manual_seed(0)) * 2 - 1
    with torch.no_grad():
        ref = model(x)
    return spec, model, x, ref


def test_fp32_output_and_every_mapped_tensor_match_torch(small):
    spec, model, x, _ = small
    assert set(spec.layer_map.values()) <= set(dict(model.named_modules()))
    captured = capture_module_outputs(model, spec.layer_map.values(), lambda: model(x[:1]))
    extra = [t for t in spec.layer_map if t not in spec.output_names]
    wm = WeightMap.from_module(model)
    out = run_spec(spec, wm, x[:1], "fp32", small=True, extra_outputs=extra)
    assert wm.unused() == []
    # by hand: patch conv and tokens, 2 blocks x (norm1, qkv, proj, norm2, fc1, act, fc2, block), norm, head
    assert len(spec.layer_map) == 2 + 2 * 8 + 2
    for tname, mname in spec.layer_map.items():
        assert len(captured[mname]) == 1, f"module {mname} ran {len(captured[mname])} times"
        check_fp32(out[tname], captured[mname][0], f"tensor {tname} vs module {mname}")
    assert out["logits"].shape == (1, CLASSES)


def test_fp16_matches_torch_from_flat_weights(small):
    """fp16, from weights stored flat as tensorrtx .wts files keep them (the builder passes every shape)."""
    spec, model, x, ref = small
    flat = WeightMap.from_state_dict({k: v.reshape(-1) for k, v in model.state_dict().items()})
    check_fp16(run_spec(spec, flat, x[:1], "fp16", small=True)["logits"], ref[:1], "vit_tiny fp16")
    assert flat.unused() == []


def test_bf16_matches_torch(small):
    spec, model, x, ref = small
    plan = build_plan(ref_trt, spec, weights=WeightMap.from_module(model), precision="bf16", small=True,
                      progress=False)
    got = Engine(plan, ref_trt).run({"input": x[:1]})["logits"].float()
    rel = float((got - ref[:1]).abs().max() / ref[:1].abs().max())
    cos = float(torch.nn.functional.cosine_similarity(got.flatten(), ref[:1].flatten(), dim=0))
    assert rel < 3e-2 and cos > 0.999, (rel, cos)


def test_one_engine_runs_every_batch_in_its_profile(small):
    """A dynamic batch (1, 2, 4): the class token follows the run's batch (expand sized by a shape tensor)."""
    spec, model, x, ref = small
    plan = build_plan(ref_trt, spec, weights=WeightMap.from_module(model), small=True, progress=False,
                      batch=(1, 2, 4))
    assert plan.info["inputs"] == [{"name": "input", "shape": [-1, 3, 48, 48], "dtype": "FLOAT"}]
    engine = Engine(plan, ref_trt)
    for batch in (3, 1, 4):
        check_fp32(engine(x[:batch])["logits"], ref[:batch], f"vit_tiny at batch {batch}")
    with pytest.raises(Exception, match="profile"):
        engine(torch.zeros(5, 3, 48, 48))


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_layerwise_parity_with_the_automatic_map(small, precision):
    """Without a layer_map, layerwise parity maps tensors to modules by name (trtbuild.parity.automap): every
    mapped module of the hand-written map, the attention blocks included (``attn`` itself ends in
    ``attn.proj``, compared under that name), and no false alarm; unmapped are only the parts no module
    returns: the class token and position embedding (parameters of the root), and the pooling. In fp16 too:
    no layer's error jumps."""
    from trtbuild.parity.check import check_model_parity

    spec, model, _, _ = small
    report = check_model_parity(dataclasses.replace(spec, layer_map={}), ref_trt, precision=precision, small=True,
                                layerwise=True, module=model)
    assert report.passed, report.to_table()
    assert report.meta["layer_map"] == "automatic (from the layer names)"
    assert sorted(report.meta["unmapped_layers"]) == sorted(["cls_token", "cls_token/expand", "tokens", "pos_embed",
                                                             "pos_embed/add", "pool/index", "pool"])
    rows = {row.name: row.module for row in report.layers}
    assert rows == spec.layer_map and report.first_jump is None


def test_tensorrt_rtx_builds_it_with_the_same_tensors(rtx, small):
    spec, model, _, _ = small
    for precision in ("fp32", "fp16"):
        plan = build_plan(rtx, spec, weights=WeightMap.from_module(model), small=True, progress=False,
                          cross_check=True, batch=(1, 2, 4), precision=precision)
        cross = plan.info["cross_check"]  # CrossCheckError otherwise
        assert cross["tensors_compared"] >= 100 and cross["rtx_engine_bytes"] > 0 and not cross["notes"]
        assert plan.info["outputs"] == [{"name": "logits", "shape": [-1, CLASSES], "dtype": "FLOAT"}]


def test_cli_lists_and_builds_it(tmp_path, monkeypatch, capsys):
    from trtbuild.cli import main

    assert main(["models"]) == 0
    assert "vit_tiny" in capsys.readouterr().out
    monkeypatch.chdir(tmp_path)
    code = main(["build", "vit_tiny", "--small", "--backend", "reference", "--no-progress", "--batch", "1,2,4"])
    out, err = capsys.readouterr()
    assert code == 0, err
    side = json.load(open("engines/vit_tiny-small-fp32.engine.json"))
    assert side["inputs"][0]["shape"] == [-1, 3, 48, 48] and side["outputs"][0]["shape"] == [-1, CLASSES]


def test_refusals_name_the_model(small):
    spec, model, _, _ = small
    wm = WeightMap.from_module(model)
    net = new_network(ref_trt)[1]
    with pytest.raises(BuilderError, match=r"vit: input 'a' \(1, 3, 40, 48\) needs H and W known at build time and "
                                           r"multiples of the patch size 16"):
        spec.build_network(net, wm, net.add_input("a", ref_trt.float32, (1, 3, 40, 48)))
    with pytest.raises(BuilderError, match=r"vit: pos_embed has 10 positions but input 'b' \(1, 3, 64, 64\) gives "
                                           r"17 tokens"):
        spec.build_network(net, wm, net.add_input("b", ref_trt.float32, (1, 3, 64, 64)))
    with pytest.raises(BuilderError, match=r"vit: input 'c' \(1, 3, -1, 48\) needs H and W known"):
        spec.build_network(net, wm, net.add_input("c", ref_trt.float32, (1, 3, -1, 48)))
    gaps = WeightMap.from_state_dict({k: v for k, v in model.state_dict().items() if not k.startswith("blocks.0.")})
    with pytest.raises(BuilderError, match=r"vit: weights for blocks.0..blocks.N-1 are missing or not numbered "
                                           r"0..N-1 \(found \[1\]\)"):
        spec.build_network(net, gaps, net.add_input("d", ref_trt.float32, (1, 3, 48, 48)))


def test_spec_fields():
    spec = registry.get("vit_tiny")
    assert spec.name in registry.names() and spec.output_names == ["logits"] and spec.input_name == "input"
    assert spec.uses_plugins is False and spec.options == {}
    a, b = registry.get_torch_model("vit_tiny", seed=0, small=True), registry.get_torch_model("vit_tiny", 1, True)
    assert not a.training and not torch.equal(a.blocks[0].attn.qkv.weight, b.blocks[0].attn.qkv.weight)
    assert not torch.all(a.norm.weight == 1) and a.cls_token.abs().max() > 0.1  # drawn, so each one matters


@pytest.mark.slow
def test_full_size_matches_torch():
    spec = registry.get("vit_tiny")
    model = registry.get_torch_model("vit_tiny")
    x = torch.rand(2, 3, 224, 224, generator=torch.Generator().manual_seed(1)) * 2 - 1
    with torch.no_grad():
        ref = model(x)
    wm = WeightMap.from_module(model)
    plan = build_plan(ref_trt, spec, weights=wm, progress=False, batch=(1, 2, 2))
    check_fp32(Engine(plan, ref_trt)(x)["logits"], ref, "vit_tiny 224 fp32 batch 2")
    check_fp16(run_spec(spec, wm, x[:1], "fp16")["logits"], ref[:1], "vit_tiny 224 fp16")


@pytest.mark.slow
def test_full_size_builds_on_tensorrt_rtx(rtx):
    spec = registry.get("vit_tiny")
    plan = build_plan(rtx, spec, weights=WeightMap.from_module(registry.get_torch_model("vit_tiny")),
                      progress=False, cross_check=True, batch=(1, 4, 8), precision="fp16")
    assert plan.info["outputs"] == [{"name": "logits", "shape": [-1, CLASSES], "dtype": "FLOAT"}]
