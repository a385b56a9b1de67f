"""Memory of the everyday path (export, build, load): no step keeps or makes needless copies of
the weights. Sizes are measured with tracemalloc (numpy and bytes allocations are traced)."""

from __future__ import annotations

import gc
import os
import tracemalloc
import weakref

import numpy as np
import pytest
import torch

import trtbuild.reference as reference
from trtbuild.engine.build import build_plan, definition_step, new_network
from trtbuild.layers.basic import linear
from trtbuild.layers.common import weights as layer_weights
from trtbuild.reference.plan import deserialize_plan
from trtbuild.weights import WeightMap, export_weights

FEATURES, OUT = 1000, 1000  # a 4 MB linear weight


def _peak(fn):
    """(result, peak bytes traced while fn ran)."""
    gc.collect()
    tracemalloc.start()
    try:
        result = fn()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _weight_map(seed=0) -> WeightMap:
    g = torch.Generator().manual_seed(seed)
    return WeightMap({"fc.weight": torch.randn(OUT, FEATURES, generator=g).numpy().reshape(-1),
                      "fc.bias": torch.randn(OUT, generator=g).numpy()})


def _define(wm, out=OUT, features=FEATURES):
    def define(network, x):
        w = wm.get("fc.weight", (out, features))
        return {"y": linear(network, x, w, wm.get("fc.bias"), "fc")}
    return define


def test_export_writes_a_module_without_copying_its_weights(tmp_path):
    """Before: a full copy of the state_dict, plus the .wts text of the largest tensor."""
    module = torch.nn.Linear(2000, 2000)  # 16 MB of weights
    _, peak = _peak(lambda: export_weights(module, tmp_path / "m.wts"))
    assert peak < 8_000_000, f"exporting 16 MB of weights allocated {peak} bytes at peak"
    assert (tmp_path / "m.wts").stat().st_size > 9 * 4_000_000


def test_layer_weights_of_the_right_type_are_shared_read_only_views():
    _, network, _ = new_network(reference)
    x = network.add_input("x", reference.DataType.FLOAT, (1, 4))
    w = np.arange(4, dtype=np.float32)
    held = layer_weights(network, x, w)
    assert np.shares_memory(held, w) and not held.flags.writeable
    converted = layer_weights(network, x, np.arange(4, dtype=np.float64))  # other types are converted
    assert converted.dtype == np.float32 and converted.tolist() == [0, 1, 2, 3]


def test_reference_weights_hold_read_only_arrays_and_copy_writable_ones():
    a = np.arange(6, dtype=np.float32)
    copied = reference.Weights(a)
    a[0] = 42  # the caller may change a writable array at once
    assert copied.numpy()[0] == 0
    view = a.view()
    view.flags.writeable = False
    assert np.shares_memory(reference.Weights(view).numpy(), a)


def test_reference_network_holds_the_weight_map_arrays_not_copies():
    wm = _weight_map()
    defined = definition_step(_define(wm), input_shape=(1, FEATURES))(reference)
    held = [w._array for layer in defined.network._layers for w in layer._weights.values() if w.size]
    assert any(np.shares_memory(h, wm.raw("fc.weight")) for h in held)
    assert any(np.shares_memory(h, wm.raw("fc.bias")) for h in held)


def _rss_peak(fn):
    """(result, growth of the peak resident set while fn ran, in bytes): Linux's VmHWM after
    resetting it, which sees memory maps too (tracemalloc does not)."""
    def status(key):
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith(key + ":"))

    gc.collect()
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # VmHWM := VmRSS
    before = status("VmRSS")
    result = fn()
    return result, status("VmHWM") - before


@pytest.mark.skipif(not os.path.exists("/proc/self/clear_refs"), reason="needs Linux's /proc/self/clear_refs")
def test_reference_build_copies_the_weights_once_into_the_plan():
    """Before: float64 round trip, a kept copy, the reference's copy, safetensors' two copies and
    the plan's concatenations (~7x the weights at peak), then the plan bytes and their bytes-subclass
    copy (2x); now the plan is written once into memory of its own (an IHostMemory, as TensorRT's)."""
    g = torch.Generator().manual_seed(0)
    wm = WeightMap({"fc.weight": torch.randn(4000, 4000, generator=g).numpy().reshape(-1),  # 64 MB
                    "fc.bias": torch.randn(4000, generator=g).numpy()})
    nbytes = wm.raw("fc.weight").nbytes + wm.raw("fc.bias").nbytes
    plan, peak = _rss_peak(lambda: build_plan(reference, _define(wm, 4000, 4000), input_shape=(1, 4000),
                                              progress=False))
    assert nbytes < len(plan) < nbytes + 100_000
    assert peak < 1.3 * nbytes, f"building a plan of {nbytes} bytes of weights grew the peak RSS by {peak} bytes"


def test_plan_weights_are_read_as_views_of_the_plan_bytes():
    wm = _weight_map()
    plan = build_plan(reference, _define(wm), input_shape=(1, FEATURES), progress=False)
    _, arrays = deserialize_plan(plan)
    whole = np.frombuffer(plan, np.uint8)
    assert arrays and all(np.shares_memory(a, whole) and not a.flags.writeable for a in arrays.values())
    weight = next(a for a in arrays.values() if a.size == OUT * FEATURES)
    np.testing.assert_array_equal(weight.reshape(-1), wm.raw("fc.weight"))


@pytest.mark.parametrize("cross_check", [False, pytest.param(True, marks=pytest.mark.rtx)],
                         ids=["reference", "cross-check"])
def test_no_weight_array_outlives_the_build_and_the_weight_map(cross_check, request):
    """The plan (and the TensorRT-RTX plan of the cross-check) keep no reference to the weights."""
    if cross_check:
        request.getfixturevalue("rtx")  # conftest: under CI a failed `import tensorrt_rtx` fails, not skips
    wm = _weight_map()
    alive = [weakref.ref(wm.raw("fc.weight")), weakref.ref(wm.raw("fc.bias"))]
    plan = build_plan(reference, _define(wm), input_shape=(1, FEATURES), progress=False, cross_check=cross_check)
    del wm
    gc.collect()
    assert [r() for r in alive] == [None, None]
    assert len(plan) > 4 * OUT * FEATURES


def test_cross_check_keeps_the_tensorrt_rtx_engine_in_a_temporary_file_and_saves_it(rtx, tmp_path):
    """The reference plan is made while TensorRT-RTX's engine (a by-product) waits on disk."""
    from trtbuild.backend import load_trt
    from trtbuild.engine import make_sidecar, save_engine
    from trtbuild.engine.cross_check import SpilledPlan

    wm = _weight_map()
    plan = build_plan(reference, _define(wm), input_shape=(1, FEATURES), progress=False, cross_check=True)
    rtx_plan = plan.rtx_plan
    assert isinstance(rtx_plan, SpilledPlan) and rtx_plan[:4] == b"vtrt"
    assert len(rtx_plan) == plan.info["cross_check"]["rtx_engine_bytes"] > 4 * OUT * FEATURES
    assert rtx_plan.info["targets"] == ["8.6", "8.9", "12.0"]
    saved = save_engine(tmp_path / "net-rtx.engine", rtx_plan, make_sidecar(load_trt("tensorrt-rtx"), rtx_plan))
    assert saved.read_bytes() == bytes(rtx_plan)
