"""Version- and hardware-compatible builds through build_plan (trtbuild.engine.compat): the options' one-sentence
refusals, what plan.info and the cache key record, the host-code trust decision at load, and TensorRT-RTX's
refusals before any build."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from trtbuild.backend import load_trt
from trtbuild.engine import build_plan
from trtbuild.engine.compat import Compatibility, CompatibilityError, lean_runtime_embedded
from trtbuild.engine.errors import EngineFileError
from trtbuild.engine.options import BuildOptions
from trtbuild.engine.runner import Engine
from trtbuild.layers.basic import relu
from trtbuild.reference.plan import plan_header

ref = load_trt("reference")


def _relu(network, x):
    return {"y": relu(network, x, "relu")}


def _plan(trt, **kw):
    return build_plan(trt, _relu, input_shape=(1, 4), progress=False, **kw)


@pytest.mark.parametrize("kw, message", [
    (dict(exclude_lean_runtime=True), "exclude_lean_runtime (--exclude-lean-runtime) applies only to a "
                                      "version-compatible build: add version_compatible=True (--version-compatible)"),
    (dict(hardware_compat="ampere"), "hardware_compat (--hardware-compat) must be one of none, ampere+, same-cc, "
                                     "got 'ampere'"),
    (dict(version_compatible="yes"), "build option version_compatible must be True or False, got 'yes'"),
])
def test_bad_options_are_one_sentence(kw, message):
    with pytest.raises(ValueError) as e:
        BuildOptions(**kw)
    assert str(e.value) == message


def test_plan_info_and_the_plan_agree_and_the_engine_runs():
    plan = _plan(ref, version_compatible=True, hardware_compat="same-cc")
    info = plan.info
    assert (info.version_compatible, info.exclude_lean_runtime, info.hardware_compat) == (True, False, "same-cc")
    header = plan_header(plan)
    assert (header["version_compatible"], header["lean_runtime"], header["hardware_compatibility_level"]) == \
        (True, True, 2)
    x = torch.tensor([[-1.0, 0.5, -0.25, 2.0]])
    out = Engine(plan, ref)(x)["y"]  # its info says the lean runtime is embedded: loaded with host code allowed
    np.testing.assert_array_equal(out.numpy(), np.maximum(x.numpy(), 0))
    plain = _plan(ref).info
    assert "version_compatible" not in plain and "hardware_compat" not in plain  # older sidecars stay alike


def test_host_code_is_trusted_only_where_the_sidecar_says_so():
    plan = _plan(ref, version_compatible=True)
    with pytest.raises(EngineFileError, match="lean runtime embedded, which is host code"):
        Engine(bytes(plan), ref)  # no sidecar: not trusted
    with pytest.raises(EngineFileError, match="engine_host_code_allowed = True"):
        Engine(bytes(plan), ref, sidecar={"backend": "reference", "version_compatible": True,
                                          "exclude_lean_runtime": True})
    lean = _plan(ref, version_compatible=True, exclude_lean_runtime=True)
    assert Engine(bytes(lean), ref).output_names == ["y"]  # nothing embedded: nothing to trust
    assert [lean_runtime_embedded(r) for r in (None, {}, {"version_compatible": True},
                                               {"version_compatible": True, "exclude_lean_runtime": True})] == \
        [False, False, True, False]


def test_apply_sets_version_compatible_before_exclude_lean_runtime():
    """TensorRT refuses EXCLUDE_LEAN_RUNTIME unless VERSION_COMPATIBLE is already set (the reference too)."""
    config = ref.Builder(ref.Logger()).create_builder_config()
    Compatibility(True, True, "ampere+").apply(ref, config)
    assert config.get_flag(ref.BuilderFlag.VERSION_COMPATIBLE) and config.get_flag(ref.BuilderFlag.EXCLUDE_LEAN_RUNTIME)
    assert config.hardware_compatibility_level == ref.HardwareCompatibilityLevel.AMPERE_PLUS


@pytest.mark.parametrize("kw, message", [
    (dict(version_compatible=True, exclude_lean_runtime=True),
     "--version-compatible does not apply to TensorRT-RTX: NVIDIA documents its engines as loadable only by the "
     "TensorRT-RTX release that built them"),
    (dict(hardware_compat="ampere+"),
     "--hardware-compat ampere+ does not apply to TensorRT-RTX (its builder ignores hardware_compatibility_level); "
     "choose the GPUs its engine runs on with --target instead"),
])
def test_tensorrt_rtx_refuses_before_building(rtx, kw, message):
    with pytest.raises(CompatibilityError) as e:
        _plan(rtx, **kw)
    assert str(e.value).startswith(message)


def test_cross_check_builds_the_tensorrt_rtx_twin_without_them(rtx):
    plan = _plan(ref, version_compatible=True, cross_check=True)
    assert plan.info.version_compatible is True and plan.info.cross_check["tensors_compared"] >= 1


def test_the_cache_key_covers_them(tmp_path):
    from trtbuild.engine.cache import key_for_model_build
    from trtbuild.engine.model import export_seeded_weights
    from trtbuild.models import registry

    spec, weights = registry.get("resnet18"), tmp_path / "r.wts"
    export_seeded_weights("resnet18", weights, 0, small=True)

    def key(compat=None):
        return key_for_model_build(ref, spec, weights, small=True, compat=compat).digest

    plain = key()
    assert key(Compatibility()) == plain  # none asked: the key of a build before these options existed
    keys = {key(Compatibility(True)), key(Compatibility(True, True)), key(Compatibility(hardware_compat="same-cc"))}
    assert len(keys) == 3 and plain not in keys


def _tensorrt(version: str):
    """A stand-in `tensorrt` module: check_compatible reads only its name and version."""
    import types

    return types.SimpleNamespace(__name__="tensorrt", __version__=version)


L4, T4, H100 = ({"gpu": "NVIDIA L4", "compute_capability": "8.9"}, {"gpu": "Tesla T4", "compute_capability": "7.5"},
                {"gpu": "NVIDIA H100 80GB HBM3", "compute_capability": "9.0"})


def _sidecar(**build):
    return {"trtbuild_version": "0.1.0", "backend": "tensorrt", "tensorrt_version": "10.16.1.11",
            "gpu": "NVIDIA L4", "compute_capability": "8.9", **build}


@pytest.mark.parametrize("build, here, message", [
    ({}, "11.4.0.106", "was built with TensorRT 10.16.1.11 but TensorRT 11.4.0.106 is installed; engines only load in "
                       "the TensorRT version that built them (unless built with --version-compatible)"),
    (dict(version_compatible=True, exclude_lean_runtime=False), "11.4.0.106", None),
    (dict(version_compatible=True, exclude_lean_runtime=False), "10.16.2.1", None),
    (dict(version_compatible=True, exclude_lean_runtime=False), "10.8.0.43",
     "is a version-compatible engine of TensorRT 10.16.1.11, which loads on that version and later ones only"),
    (dict(version_compatible=True, exclude_lean_runtime=False), "12.0.0.1",
     "but TensorRT documents such engines across major versions only from 10 to 11 (and 8 to 10), not to "
     "TensorRT 12.0.0.1"),
    (dict(version_compatible=True, exclude_lean_runtime=True), "11.4.0.106",
     "built without its lean runtime (--exclude-lean-runtime), so TensorRT 11.4.0.106 needs that version's lean "
     "runtime loaded"),
])
def test_the_sidecar_check_honours_version_compatibility(build, here, message):
    from trtbuild.engine.errors import EngineCompatibilityError
    from trtbuild.engine.serialize import check_compatible

    def check():
        check_compatible(_sidecar(**build), _tensorrt(here), "m.engine", current_device=L4)

    if message is None:
        check()
    else:
        with pytest.raises(EngineCompatibilityError) as e:
            check()
        assert message in str(e.value)


@pytest.mark.parametrize("level, here, message", [
    (None, H100, "was built for compute capability 8.9 (NVIDIA L4) but this GPU is NVIDIA H100 80GB HBM3"),
    ("same-cc", H100, "was built for compute capability 8.9 (NVIDIA L4) but this GPU is NVIDIA H100 80GB HBM3"),
    ("ampere+", H100, None),
    ("ampere+", T4, "was built hardware-compatible with Ampere and newer GPUs (--hardware-compat ampere+), but this "
                    "GPU is Tesla T4 with compute capability 7.5"),
])
def test_the_sidecar_check_honours_hardware_compatibility(level, here, message):
    from trtbuild.engine.errors import EngineCompatibilityError
    from trtbuild.engine.serialize import check_compatible

    side = _sidecar(**({"hardware_compat": level} if level else {}))
    if message is None:
        check_compatible(side, _tensorrt("10.16.1.11"), "m.engine", current_device=here)
    else:
        with pytest.raises(EngineCompatibilityError) as e:
            check_compatible(side, _tensorrt("10.16.1.11"), "m.engine", current_device=here)
        assert message in str(e.value)


def test_a_sidecar_without_a_checksum_is_not_trusted_with_host_code(tmp_path):
    """A sidecar vouching for an embedded lean runtime must also prove which engine it describes: without its
    engine_sha256 the load is refused in one sentence, before any host code could be allowed."""
    import json

    from trtbuild.engine import load_engine
    from trtbuild.engine.serialize import make_sidecar, save_engine

    path = tmp_path / "vc.engine"
    plan = _plan(ref, version_compatible=True)
    save_engine(path, plan, make_sidecar(ref, plan, plan.info))
    side_path = tmp_path / "vc.engine.json"
    side = json.loads(side_path.read_text())
    assert side["version_compatible"] is True and side["engine_sha256"]
    assert load_engine(path, ref).output_names == ["y"]  # with its checksum: trusted
    del side["engine_sha256"]
    side_path.write_text(json.dumps(side))
    with pytest.raises(EngineFileError, match=r"^the sidecar of .*vc\.engine says the engine embeds TensorRT's lean "
                       r"runtime \(host code\) but records no engine_sha256"):
        load_engine(path, ref)
