"""The involution op composed of native layers (trtbuild.layers.involution.involution_composed),
the impl choice (auto / plugin / composed), RedNet with the composed op, its ONNX export, and
TensorRT-RTX, which has no plugins: the composed op and the whole RedNet build there, and asking
for the plugin is one sentence, never a crash (these tests run in the same process).

Tolerances: fp32 within 1e-5 (abs and rel) of the float64 unfold reference; fp16/bf16 within
2.5 * eps * sum_taps |w * x| per element (every product is rounded to the type once, the sum once).
"""

from __future__ import annotations

import re
import types

import pytest
import torch
import torch.nn.functional as F

import trtbuild.reference as trt
from trtbuild.engine import build_plan
from trtbuild.engine.quick import build_spec_network, run_network, run_spec
from trtbuild.engine.rtx import DEFAULT_TARGETS
from trtbuild.engine.runner import Engine
from trtbuild.layers import involution as inv
from trtbuild.layers.common import BuilderError
from trtbuild.models import registry
from trtbuild.ops.involution import involution_output_size, involution_reference
from trtbuild.weights import WeightMap

from helpers.refnet import RtxNet, concrete
from helpers.involution_naive import naive_involution
from helpers.model_checks import capture_module_outputs, check_fp16, check_fp32

STRONGLY_TYPED = 1 << int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED)
TRT_OF = {torch.float32: "FLOAT", torch.float16: "HALF", torch.bfloat16: "BF16"}
EPS = {torch.float16: 2.0 ** -11, torch.bfloat16: 2.0 ** -8}

# (N, C, H, W, K, stride, padding, dilation, groups): K 1..7, strides 1..3, padding 0 up to more
# than the window needs, dilation 1..3, one group up to one channel per group, non-square inputs.
CASES = [
    (2, 8, 9, 9, 3, 1, 1, 1, 2),
    (1, 16, 14, 12, 7, 2, 3, 1, 1),
    (1, 6, 10, 11, 5, 3, 2, 1, 3),
    (2, 4, 9, 9, 3, 1, 2, 2, 4),
    (1, 4, 5, 6, 1, 1, 0, 1, 2),
    (1, 4, 6, 7, 2, 2, 1, 1, 1),
    (1, 3, 7, 5, 3, 2, 0, 1, 3),
    (1, 8, 11, 8, 3, 1, 3, 3, 8),
    (2, 6, 8, 13, 4, 1, 2, 1, 2),
    (1, 12, 12, 12, 7, 1, 3, 1, 3),
    (1, 5, 9, 10, 3, 3, 4, 2, 1),
    (1, 4, 4, 4, 1, 2, 1, 1, 4),
]
IDS = ["N{}C{}H{}W{}K{}s{}p{}d{}g{}".format(*c) for c in CASES]


def make_inputs(case, seed=0, dtype=torch.float32, flat_w=False):
    n, c, h, wd, k, s, p, d, g = case
    gen = torch.Generator().manual_seed(seed)
    ho, wo = involution_output_size(h, k, s, p, d), involution_output_size(wd, k, s, p, d)
    x = torch.randn(n, c, h, wd, generator=gen).to(dtype)
    w = torch.randn(n, g, k * k, ho, wo, generator=gen).to(dtype)
    return x, (w.reshape(n, g * k * k, ho, wo) if flat_w else w)


def run_op(x, w, case, impl="composed", unfold="auto", batch=None, name="inv"):
    """Network x, w -> involution(impl) -> output; returns (output, network). batch=(min, opt, max)
    declares the batch dimension dynamic."""
    holder = {}
    params = case[4:]

    def define(network):
        dt = getattr(trt.DataType, TRT_OF[x.dtype])
        lead = (-1,) if batch else ()
        tx = network.add_input("x", dt, trt.Dims(lead + tuple(x.shape[len(lead):])))
        tw = network.add_input("w", dt, trt.Dims(lead + tuple(w.shape[len(lead):])))
        holder["network"] = network
        if impl == "composed":
            y = inv.involution_composed(network, tx, tw, *params, name, unfold=unfold)
        else:
            y = inv.involution(network, tx, tw, *params, name, impl=impl)
        assert y.name == name
        return {"y": y}

    if batch is None:
        return run_network(define, {"x": x, "w": w})["y"], holder["network"]
    plan = build_plan(trt, define, batch=batch, progress=False)
    return Engine(plan, trt)(x=x, w=w)["y"].cpu(), holder["network"]


def expected(x, w, case):
    return involution_reference(x.double(), w.double(), *case[4:])


def half_bound(x, w, case):
    """Per-element error bound of the composed op in x's (half) type, against the float64 op on the
    same (already rounded) inputs: products and the sum each rounded once."""
    return 2.5 * EPS[x.dtype] * involution_reference(x.double().abs(), w.double().abs(), *case[4:]) + 1e-6


def layers(network):
    return [concrete(network.get_layer(i)) for i in range(network.num_layers)]


# ---------------------------------------------------------------------------- reference backend

@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_composed_matches_the_unfold_reference_fp32(case):
    for i, unfold in enumerate(("slice", "conv")):
        x, w = make_inputs(case, seed=i, flat_w=bool(i))
        y, net = run_op(x, w, case, unfold=unfold)
        assert y.dtype == torch.float32
        torch.testing.assert_close(y.double(), expected(x, w, case), atol=1e-5, rtol=1e-5, msg=unfold)
        assert not any(layer.type == trt.LayerType.PLUGIN_V3 for layer in layers(net))


def test_composed_matches_the_naive_loops():
    """An independent check of the reference itself on two cases (Python loops, float64)."""
    for case in (CASES[2], CASES[5]):
        x, w = make_inputs(case, seed=3)
        y, _ = run_op(x, w, case)
        torch.testing.assert_close(y.double(), naive_involution(x.double(), w.double(), *case[4:]),
                                   atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
def test_composed_half_precision_within_the_rounding_bound(dtype):
    for case in (CASES[0], CASES[1], CASES[2], CASES[7]):
        for unfold in ("slice", "conv"):
            x, w = make_inputs(case, seed=5, dtype=dtype)
            y, _ = run_op(x, w, case, unfold=unfold)
            assert y.dtype == dtype and torch.isfinite(y).all()
            err = (y.double() - expected(x, w, case)).abs()
            bound = half_bound(x, w, case)
            assert (err <= bound).all(), f"{case} {unfold}: worst err/bound {(err / bound).max().item():.3g}"


def test_composed_and_the_plugin_twin_agree():
    for case in (CASES[0], CASES[1], CASES[3]):
        x, w = make_inputs(case, seed=7, flat_w=True)
        plugin, net = run_op(x, w, case, impl="plugin")
        assert [layer.type for layer in layers(net)] == [trt.LayerType.PLUGIN_V3]
        composed, _ = run_op(x, w, case, impl="composed")
        torch.testing.assert_close(composed, plugin, atol=1e-6, rtol=1e-5)
        xh, wh = x.half(), w.half()
        plugin_h, _ = run_op(xh, wh, case, impl="plugin")
        composed_h, _ = run_op(xh, wh, case, impl="composed")
        # both are within the bound of the exact result; the plugin does not round its products
        assert ((composed_h.double() - plugin_h.double()).abs() <= 2 * half_bound(xh, wh, case)).all()


def test_layers_are_named_under_the_op_name():
    case = CASES[0]  # K=3, padding 1
    x, w = make_inputs(case)
    _, net = run_op(x, w, case, unfold="slice")
    names = [layer.name for layer in layers(net)]
    assert names == ["inv/pad", "inv/groups", "inv/cols0", "inv/cols1", "inv/cols2", "inv/cols", "inv/rows0",
                     "inv/rows1", "inv/rows2", "inv/patches", "inv/kernels", "inv/products", "inv/sum", "inv"]
    _, net = run_op(x, w, case, unfold="conv")
    assert [layer.name for layer in layers(net)] == ["inv/unfold_rows", "inv/unfold", "inv/patches", "inv/kernels",
                                                     "inv/products", "inv/sum", "inv"]
    for layer in layers(net)[:-1]:  # the last one's output was renamed "y" when it was marked
        assert layer.get_output(0).name == layer.name
    _, net = run_op(*make_inputs(CASES[4]), CASES[4], unfold="slice")  # K=1, no padding: no pad, no concat
    assert [layer.name for layer in layers(net)] == ["inv/groups", "inv/cols0", "inv/rows0", "inv/kernels",
                                                     "inv/products", "inv/sum", "inv"]


def test_auto_is_the_plugin_on_the_reference_and_composed_is_chosen_by_name():
    case = CASES[0]
    x, w = make_inputs(case)
    _, net = run_op(x, w, case, impl="auto")
    assert [layer.type for layer in layers(net)] == [trt.LayerType.PLUGIN_V3]
    assert inv.resolve_impl(trt, "auto", "inv") == "plugin" and inv.plugin_available(trt)
    assert inv.resolve_impl(trt, "composed", "inv") == "composed"
    with pytest.raises(BuilderError, match=r"layer 'inv': impl='fast' is not one of 'auto', 'plugin', 'composed'"):
        inv.resolve_impl(trt, "fast", "inv")


def test_dynamic_batch_uses_the_conv_unfold():
    case = CASES[1]
    x, w = make_inputs(case, seed=2)
    x, w = torch.cat([x] * 3), torch.cat([w, w * 0.5, -w])
    y, net = run_op(x, w, case, batch=(1, 2, 4))
    assert "inv/unfold" in [layer.name for layer in layers(net)]
    torch.testing.assert_close(y.double(), expected(x, w, case), atol=1e-5, rtol=1e-5)
    with pytest.raises(BuilderError, match=r"unfold='slice' needs a static batch"):
        run_op(x, w, case, unfold="slice", batch=(1, 2, 4))


def test_bad_arguments_are_refused_by_layer_name():
    net = trt.Builder(trt.Logger()).create_network(STRONGLY_TYPED)
    x = net.add_input("x", trt.float32, (1, 4, 8, 8))
    w = net.add_input("w", trt.float32, (1, 2 * 9, 8, 8))
    wh = net.add_input("wh", trt.float16, (1, 2 * 9, 8, 8))
    w2 = net.add_input("w2", trt.float32, (2, 2 * 9, 8, 8))
    xd = net.add_input("xd", trt.float32, (1, 4, -1, 8))
    with pytest.raises(BuilderError, match=r"layer 'inv': .* must have one type \(FLOAT, HALF or BF16\)"):
        inv.involution_composed(net, x, wh, 3, 1, 1, 1, 2, "inv")
    with pytest.raises(BuilderError, match=r"layer 'inv': batch of kernels 'w2' \(2\) differs"):
        inv.involution_composed(net, x, w2, 3, 1, 1, 1, 2, "inv")
    with pytest.raises(BuilderError, match=r"layer 'inv': channels of 'x' \(4\) must be divisible by groups \(3\)"):
        inv.involution_composed(net, x, w, 3, 1, 1, 1, 3, "inv")
    with pytest.raises(BuilderError, match=r"layer 'inv': the composed involution needs C, H and W"):
        inv.involution_composed(net, xd, w, 3, 1, 1, 1, 2, "inv")
    with pytest.raises(BuilderError, match=r"layer 'inv': unfold='im2col' is not one of"):
        inv.involution_composed(net, x, w, 3, 1, 1, 1, 2, "inv", unfold="im2col")
    assert net.num_layers == 0


def _fake_tensorrt(creators, loads=()):
    """A stand-in `tensorrt` module whose registry holds `creators`; records get_creator calls."""
    calls = []

    class Registry:
        @property
        def all_creators(self):
            return list(creators)

        def get_creator(self, *key):
            calls.append(key)
            return next((c for c in creators if (c.name, c.plugin_version, c.plugin_namespace) == key), None)

        def load_library(self, path):
            creators.extend(loads)
            return object()

    module = types.ModuleType("tensorrt")
    registry_ = Registry()
    module.get_plugin_registry = lambda: registry_
    return module, calls


def test_auto_on_real_tensorrt_is_the_plugin_only_where_its_creator_is_registered(monkeypatch, tmp_path):
    """Real TensorRT without the library: composed, and no get_creator call (TensorRT logs an error
    for a missing creator). With the creator registered, or loadable from the default path: plugin."""
    creator = types.SimpleNamespace(name="Involution", plugin_version="1", plugin_namespace="trtbuild")
    other = types.SimpleNamespace(name="ROIAlign_TRT", plugin_version="2", plugin_namespace="")
    monkeypatch.setenv("TRTBUILD_INVOLUTION_PLUGIN", str(tmp_path / "missing.so"))
    fake, calls = _fake_tensorrt([other])
    assert inv.resolve_impl(fake, "auto", "inv", load=True) == "composed" and calls == []
    assert inv.resolve_impl(fake, "plugin", "inv") == "plugin"  # refused later, when the layer is added
    fake, calls = _fake_tensorrt([other, creator])
    assert inv.resolve_impl(fake, "auto", "inv") == "plugin" and calls == [("Involution", "1", "trtbuild")]
    library = tmp_path / "libtrtbuild_involution_plugin.so"
    library.write_bytes(b"")
    monkeypatch.setenv("TRTBUILD_INVOLUTION_PLUGIN", str(library))
    fake, _ = _fake_tensorrt([other], loads=[creator])
    assert inv.resolve_impl(fake, "auto", "inv") == "composed"  # load=False: the library is not tried
    assert inv.resolve_impl(fake, "auto", "inv", load=True) == "plugin"
    fake, _ = _fake_tensorrt([other], loads=[])  # loads, but registers nothing: warned, composed
    assert inv.resolve_impl(fake, "auto", "inv", load=True) == "composed"


# ---------------------------------------------------------------------------- RedNet

@pytest.fixture(scope="module")
def small():
    spec = registry.get("rednet")
    model = registry.get_torch_model("rednet", seed=0, small=True)
    x = torch.rand(spec.input_shape(True), generator=torch.Generator().manual_seed(0)) * 2 - 1
    with torch.no_grad():
        ref = model(x)
    return spec.with_options(involution_impl="composed"), model, x, ref


def test_rednet_spec_options():
    spec = registry.get("rednet")
    assert spec.options == {"involution_impl": ("auto", "plugin", "composed")} and spec.chosen == {}
    composed = spec.with_options(involution_impl="composed")
    assert composed.chosen == {"involution_impl": "composed"} and composed.name == "rednet"
    assert spec.with_options() is spec
    with pytest.raises(ValueError, match=r"model 'rednet': involution_impl='fast' is not one of"):
        spec.with_options(involution_impl="fast")
    with pytest.raises(ValueError, match=r"model 'rednet' has no build option 'impl'"):
        spec.with_options(impl="composed")


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_small_rednet_composed_matches_torch(small, precision):
    spec, model, x, ref = small
    wm = WeightMap.from_module(model)
    out = run_spec(spec, wm, x, precision, small=True)["logits"]
    (check_fp32 if precision == "fp32" else check_fp16)(out, ref, f"rednet composed {precision}")
    assert [k for k in wm.unused() if not k.endswith("num_batches_tracked")] == []


def test_small_rednet_composed_layer_map_and_no_plugin(small):
    """Every involution (composed now) and the rest of the layer map equal their torch modules."""
    spec, model, x, _ = small
    net = trt.Builder(trt.Logger()).create_network(STRONGLY_TYPED)
    build_spec_network(net, spec, WeightMap.from_module(model), "fp32", small=True)
    assert not any(layer.type == trt.LayerType.PLUGIN_V3 for layer in layers(net))
    assert not any(re.fullmatch(r"(Unnamed|\(Unnamed).*", layer.name) for layer in layers(net))
    captured = capture_module_outputs(model, spec.layer_map.values(), lambda: model(x))
    extra = [t for t in spec.layer_map if t != "logits"]
    out = run_spec(spec, WeightMap.from_module(model), x, "fp32", small=True, extra_outputs=extra)
    for tname, mname in spec.layer_map.items():
        check_fp32(out[tname], captured[mname][0], f"tensor {tname} vs module {mname}")


def test_small_rednet_composed_runs_in_bf16(small):
    """The plugin has no BF16; the composed involution does (tests/models/test_bf16.py's tolerance)."""
    spec, model, x, ref = small
    plan = build_plan(trt, spec, weights=WeightMap.from_module(model), precision="bf16", small=True, progress=False)
    y = Engine(plan, trt)(x)["logits"].cpu().double()
    rel = float((y - ref).abs().max() / ref.abs().max())
    cos = float(F.cosine_similarity(y.flatten(), ref.double().flatten(), dim=0))
    assert rel < 3e-2 and cos > 0.999, (rel, cos)


# ---------------------------------------------------------------------------- ONNX

def test_onnx_export_of_the_composed_op_matches_onnxruntime():
    from trtbuild.onnx_export import export_onnx, run_onnxruntime

    case = CASES[10]  # stride 3, padding 4, dilation 2
    x, w = make_inputs(case, seed=4, flat_w=True)
    for unfold, lead in (("slice", x.shape[0]), ("conv", -1)):
        net = trt.Builder(trt.Logger()).create_network(STRONGLY_TYPED)
        tx = net.add_input("x", trt.float32, (lead,) + tuple(x.shape[1:]))
        tw = net.add_input("w", trt.float32, (lead,) + tuple(w.shape[1:]))
        net.mark_output(inv.involution_composed(net, tx, tw, *case[4:], "inv", unfold=unfold))
        model = export_onnx(net)
        assert not any(node.domain for node in model.graph.node)
        y = torch.from_numpy(run_onnxruntime(model, {"x": x, "w": w})["inv"])
        torch.testing.assert_close(y.double(), expected(x, w, case), atol=1e-5, rtol=1e-5, msg=unfold)


def test_onnx_export_of_the_composed_rednet_has_no_custom_nodes(small):
    from trtbuild.onnx_export import export_onnx, run_onnxruntime

    spec, model, x, ref = small
    net = trt.Builder(trt.Logger()).create_network(STRONGLY_TYPED)
    outs = build_spec_network(net, spec, WeightMap.from_module(model), "fp32", small=True)
    outs["logits"].name = "logits"
    net.mark_output(outs["logits"])
    onnx_model = export_onnx(net)
    assert not any(node.domain for node in onnx_model.graph.node)
    y = torch.from_numpy(run_onnxruntime(onnx_model, {"input": x})["logits"])
    check_fp32(y, ref, "rednet composed through onnxruntime")


# ---------------------------------------------------------------------------- TensorRT-RTX

def tensor_table(network) -> dict[str, tuple]:
    """{tensor name: (shape, dtype name)} of every network input and layer output."""
    table = {}
    for i in range(network.num_inputs):
        t = network.get_input(i)
        table[t.name] = (tuple(int(d) for d in t.shape), t.dtype.name)
    for i in range(network.num_layers):
        layer = concrete(network.get_layer(i))
        for j in range(layer.num_outputs):
            t = layer.get_output(j)
            table[t.name] = (tuple(int(d) for d in t.shape), t.dtype.name)
    return table


def _no_registry(rtx, monkeypatch):
    def refuse(*args, **kw):
        raise AssertionError("TensorRT-RTX's plugin registry was asked for something")

    monkeypatch.setattr(rtx, "get_plugin_registry", refuse)
    monkeypatch.setattr(rtx, "get_builder_plugin_registry", refuse)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_composed_op_builds_on_tensorrt_rtx_like_on_the_reference(rtx, monkeypatch, dtype):
    _no_registry(rtx, monkeypatch)
    case = (2, 8, 9, 9, 3, 2, 1, 2, 2)
    n, c, h, wd, k, s, p, d, g = case
    ho, wo = involution_output_size(h, k, s, p, d), involution_output_size(wd, k, s, p, d)
    for unfold, lead in (("auto", n), ("conv", -1)):
        tables = []
        for module in (trt, rtx):
            net = RtxNet(rtx) if module is rtx else None
            network = net.network if net else trt.Builder(trt.Logger()).create_network(STRONGLY_TYPED)
            tx = network.add_input("x", getattr(module, dtype), (lead, c, h, wd))
            tw = network.add_input("w", getattr(module, dtype), (lead, g * k * k, ho, wo))
            if module is rtx and unfold == "auto":
                y = inv.involution(network, tx, tw, k, s, p, d, g, "inv")  # impl auto: composed on RTX
            else:
                y = inv.involution_composed(network, tx, tw, k, s, p, d, g, "inv", unfold=unfold)
            network.mark_output(y)
            if net:
                if lead < 0:
                    profile = net.builder.create_optimization_profile()
                    for name, t in (("x", (c, h, wd)), ("w", (g * k * k, ho, wo))):
                        profile.set_shape(name, (1,) + t, (2,) + t, (4,) + t)
                    net.config.add_optimization_profile(profile)
                assert net.build() is not None, net.errors
            tables.append(tensor_table(network))
        ref_table, rtx_table = tables
        assert rtx_table == ref_table, unfold
        assert rtx_table["inv"] == ((lead, c, ho, wo), ref_table["x"][1])


@pytest.fixture(scope="module")
def full_weights():
    return WeightMap.from_module(registry.get_torch_model("rednet", seed=0, small=False))


@pytest.mark.parametrize("small_size", [True, False], ids=["small", "full"])
@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_rednet_builds_on_tensorrt_rtx(rtx, monkeypatch, request, small_size, precision):
    """The registered rednet (involution_impl="auto") builds with TensorRT-RTX for NVIDIA's portable
    targets; every tensor (inputs, all layer outputs) has the reference network's shape and dtype."""
    _no_registry(rtx, monkeypatch)
    spec = registry.get("rednet")
    wm = (WeightMap.from_module(registry.get_torch_model("rednet", seed=0, small=True)) if small_size
          else request.getfixturevalue("full_weights"))
    ref_net = trt.Builder(trt.Logger()).create_network(STRONGLY_TYPED)
    ref_out = build_spec_network(ref_net, spec.with_options(involution_impl="composed"), wm, precision,
                                 small=small_size)
    net = RtxNet(rtx, targets=DEFAULT_TARGETS)
    rtx_out = build_spec_network(net.network, spec, wm, precision, small=small_size)
    net.network.mark_output(rtx_out["logits"])
    assert tensor_table(net.network) == tensor_table(ref_net)
    assert not any(net.network.get_layer(i).type == rtx.LayerType.PLUGIN_V3 for i in range(net.network.num_layers))
    shape = (1, 10 if small_size else 1000)
    assert tuple(rtx_out["logits"].shape) == tuple(ref_out["logits"].shape) == shape
    assert net.build() is not None, net.errors


def test_plugin_on_tensorrt_rtx_is_one_sentence_not_a_crash(rtx, monkeypatch):
    _no_registry(rtx, monkeypatch)
    net = RtxNet(rtx)
    x = net.network.add_input("x", rtx.float32, (1, 4, 8, 8))
    w = net.network.add_input("w", rtx.float32, (1, 18, 8, 8))
    sentence = rf"^layer 'inv': TensorRT-RTX {re.escape(rtx.__version__)} supports no plugins, .* impl='composed'"
    for call in (lambda: inv.involution(net.network, x, w, 3, 1, 1, 1, 2, "inv", impl="plugin"),
                 lambda: inv.involution_plugin(net.network, x, w, 3, 1, 1, 1, 2, "inv"),
                 lambda: inv.resolve_impl(rtx, "plugin", "inv")):
        with pytest.raises(BuilderError, match=sentence) as info:
            call()
        assert ". " not in str(info.value) and "\n" not in str(info.value)
    with pytest.raises(BuilderError, match=r"^load_plugin_library: TensorRT-RTX .* supports no plugins"):
        inv.load_plugin_library(rtx)
    assert not inv.plugin_available(rtx, load=True) and inv.resolve_impl(rtx, "auto", "inv", load=True) == "composed"
    assert net.network.num_layers == 0
    spec = registry.get("rednet").with_options(involution_impl="plugin")
    wm = WeightMap.from_module(registry.get_torch_model("rednet", seed=0, small=True))
    with pytest.raises(BuilderError, match=r"^rednet: TensorRT-RTX .* supports no plugins, so "
                                           r"involution_impl='plugin' cannot be built; use involution_impl='composed'"):
        build_spec_network(net.network, spec, wm, "fp32", small=True)
    assert net.network.num_layers == 0


@pytest.mark.parametrize("option, batch", [("auto", None), ("composed", (1, 2, 4))], ids=["auto", "composed-dynamic"])
def test_rednet_cross_check_with_tensorrt_rtx(rtx, option, batch):
    """build_plan(cross_check=True): the reference engine and a real TensorRT-RTX build of the same
    spec agree on every tensor both name alike (auto: the plugin on the reference, composed on
    TensorRT-RTX, so the involution outputs and everything around them)."""
    spec = registry.get("rednet").with_options(involution_impl=option)
    wm = WeightMap.from_module(registry.get_torch_model("rednet", seed=0, small=True))
    plan = build_plan(trt, spec, weights=wm, small=True, precision="fp16", progress=False, cross_check=True,
                      batch=batch)
    check = plan.info["cross_check"]
    assert check["rtx_version"] == rtx.__version__ and check["outputs"] == plan.info["outputs"]
    assert check["outputs"] == [{"name": "logits", "shape": [-1 if batch else 1, 10], "dtype": "FLOAT"}]
    assert check["tensors_compared"] > 100
