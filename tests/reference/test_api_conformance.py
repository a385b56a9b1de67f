"""trtbuild.reference against NVIDIA's real TensorRT Python bindings (10.16 and 11.4).

The API of each version is read from a committed dump (tests/helpers/conformance/dumps/), made from the
bindings wheels: downloaded with pip and imported in a subprocess with empty stand-ins for the TensorRT
libraries, which is enough to read every class, method signature and enum value. So the run needs no
download; the one test that downloads the wheels to check the dumps against them is marked `network` and
skips where the wheels cannot be downloaded or gcc is missing.

Checked: every name in trtbuild.reference.__all__ exists in both versions; every public member a
reference class defines exists on the real class with a compatible kind; method parameter names
match a real overload; enum values equal both versions (with the documented exemption table);
trtbuild's own code uses nothing TensorRT 11 removed and names its flags instead of numbering them.

TensorRT-RTX 1.7 (the tensorrt-rtx backend; installed by the `test` extra, imported directly):
the reference surface agrees with it except the named RTX_REFERENCE_DIFFERENCES; every TensorRT
name trtbuild's code uses exists there except RTX_LACKS (plugins), used only behind a refusal for
TensorRT-RTX, as is the plugin API its bindings keep (RTX_PLUGIN_API); the RTX-only names
(RTX_ONLY: target compute capabilities) stay in the tensorrt-rtx code.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import trtbuild
import trtbuild.reference as trt
from helpers.conformance import compare, reference_surface, source_scan, trt_bindings

VERSIONS = tuple(trt_bindings.VERSIONS)  # ("10", "11")
_LIGHT = reference_surface.surface(trt, with_instances=False)  # for test ids only
CLASSES = sorted(_LIGHT["classes"])
ENUMS = sorted(n for n, e in _LIGHT["classes"].items() if e["kind"] == "enum")
CONSTRUCTIBLE = [c for c in CLASSES if _LIGHT["classes"][c]["init"] is not None]

#: Enum values that differ between TensorRT 10 and 11. The reference follows 11; trtbuild's code
#: must use the names (test_flags_are_named). test_version_table_is_current re-reads the real
#: values, so this table cannot go stale.
VERSION_DEPENDENT = {
    ("NetworkDefinitionCreationFlag", "STRONGLY_TYPED"): {"10": 1, "11": 0},
    ("NetworkDefinitionCreationFlag", "PREFER_JIT_PYTHON_PLUGINS"): {"10": 2, "11": 1},
    ("NetworkDefinitionCreationFlag", "PREFER_AOT_PYTHON_PLUGINS"): {"10": 3, "11": 2},
    ("BuilderFlag", "VERSION_COMPATIBLE"): {"10": 13, "11": 12},
    ("BuilderFlag", "EXCLUDE_LEAN_RUNTIME"): {"10": 14, "11": 13},
    ("BuilderFlag", "STRIP_PLAN"): {"10": 19, "11": 18},
    ("BuilderFlag", "REFIT_IDENTICAL"): {"10": 20, "11": 19},
    ("BuilderFlag", "REFIT_INDIVIDUAL"): {"10": 23, "11": 22},
}

#: Parameters that pybind11 lists as required after defaulted ones (not expressible in Python),
#: for which the reference uses a None default and raises TypeError when omitted
#: (test_add_scale_nd_requires_channel_axis checks that).
REQUIRED_AFTER_DEFAULTS = {("INetworkDefinition", "add_scale_nd"): frozenset({"channel_axis"})}

#: Parameters that TensorRT 10 lets callers omit (an overload without them, with a documented
#: default) and TensorRT 11 requires. The reference keeps 10's default, so code written for either
#: runs on it; trtbuild's own code always passes them (test_trtbuild_passes_what_tensorrt_11_requires).
DEFAULT_IN_10_ONLY = {("INetworkDefinition", "add_quantize"): frozenset({"output_type"}),
                      ("INetworkDefinition", "add_dequantize"): frozenset({"output_type"})}

#: Parameters that TensorRT 11 lets callers omit (with a documented default) and TensorRT 10 requires. The
#: reference follows 11 (add_squeeze without axes removes every statically unit dimension).
DEFAULT_IN_11_ONLY = {("INetworkDefinition", "add_squeeze"): frozenset({"axes"})}

#: Names TensorRT 11 added (IAttention's causal kinds and packed layouts): the reference follows 11, so code
#: written for 11 runs on it; TensorRT 10.16 lacks them (test_only_in_11_table_is_true re-reads both dumps).
ONLY_IN_11_CLASSES = frozenset({"AttentionIOForm", "CausalMaskKind"})
ONLY_IN_11_MEMBERS = frozenset({
    ("Refitter", "release_refit_resources"),
    ("INetworkDefinition", "add_attention_v2"), ("IAttention", "causal_kind"), ("IAttention", "query_form"),
    ("IAttention", "key_value_form"), ("IAttention", "query_lengths"), ("IAttention", "key_value_lengths"),
})

#: Departures of the reference from the real API, excluded from the bulk checks. Keep it empty:
#: a departure found here is fixed in trtbuild/reference, not listed.
KNOWN_DEPARTURES: dict = {}

#: Members that TensorRT 11 added to a class TensorRT 10 has as well (TensorRT-RTX 1.7 has them too). The reference
#: follows 11 there, so they are checked against 11 only (test_added_in_11_table_is_true keeps the table honest).
ADDED_IN_11 = {("IKVCacheUpdateLayer", "update_form"): "the update tensor's layout (AttentionIOForm)",
               ("IKVCacheUpdateLayer", "update_lengths"): "cumulative token counts of a PACKED_NHD update"}

#: Members whose TensorRT signature is a set of pybind overloads that one Python signature cannot
#: spell. The reference dispatches on its arguments instead; test_weights_overloads checks each form.
DISPATCHED_OVERLOADS = {("Weights", "__init__"): "Weights(type=FLOAT) | Weights(type, ptr, count) | Weights(a)"}


def _missing_from(dump: dict, first: str, second: str | None) -> str | None:
    """"X" or "X.Y" if that name (class member, function or value) is absent from an API dump, else None."""
    if first in dump["classes"]:
        return f"{first}.{second}" if second is not None and second not in dump["classes"][first]["members"] else None
    return None if first in dump["functions"] or first in dump["values"] else first


@pytest.fixture(scope="module")
def ref() -> dict:
    """The reference surface, with the instance attributes of sample objects."""
    return reference_surface.surface(trt)


@pytest.fixture(scope="module")
def real_api() -> dict[str, dict]:
    """{"10": dump, "11": dump} of the real bindings: the committed dumps (downloaded only where the dump
    script changed since they were made; test_committed_dumps_are_current then fails, saying so)."""
    try:
        return {v: trt_bindings.api(v) for v in VERSIONS}
    except trt_bindings.BindingsUnavailable as e:
        pytest.skip(f"NVIDIA's TensorRT bindings wheels are unavailable here: {e}")


@pytest.fixture(scope="module")
def wheel_api() -> dict[str, dict]:
    """The dumps made now from the downloaded wheels (a download: tests using it are marked `network`)."""
    try:
        return {v: trt_bindings.api(v, fresh=True) for v in VERSIONS}
    except trt_bindings.BindingsUnavailable as e:
        pytest.skip(f"NVIDIA's TensorRT bindings wheels are unavailable here: {e}")


def test_committed_dumps_are_current():
    """The dumps the tests read were made by today's dump script, so the run needs no download."""
    for v in VERSIONS:
        assert trt_bindings.committed(v) is not None, (
            f"{trt_bindings.committed_path(v)} is missing or was made by another dump_api.py; rewrite the dumps "
            "with `PYTHONPATH=tests python -m helpers.conformance.trt_bindings`")


def test_committed_dumps_are_what_the_wheels_give(wheel_api):
    for v in VERSIONS:
        assert trt_bindings.committed(v) == wheel_api[v], f"TensorRT {v}: the committed dump differs from the wheel's"


def _member_problems(ref, cls: str, member: str, real_api) -> list[str]:
    """Problems of one reference member (or "__init__") in both versions; none if the reference
    no longer defines it."""
    entry = ref["classes"][cls]
    if member != "__init__" and member not in entry["members"]:
        return []
    out = []
    for v in VERSIONS:
        if v == "10" and (cls, member) in ADDED_IN_11:
            continue
        real_class = real_api[v]["classes"].get(cls)
        if member == "__init__":
            if real_class is not None and real_class["init"] is not None and entry["init"] is not None:
                out += compare.signature_problems(f"TensorRT {v}: {cls}()", entry["init"], real_class["init"])
        elif v == "10" and (cls, member) in ONLY_IN_11_MEMBERS:
            continue
        else:
            allow = REQUIRED_AFTER_DEFAULTS.get((cls, member), frozenset())
            if v == "11":
                allow = allow | DEFAULT_IN_10_ONLY.get((cls, member), frozenset())
            else:
                allow = allow | DEFAULT_IN_11_ONLY.get((cls, member), frozenset())
            out += compare.member_problems(cls, member, entry["members"][member], real_class, v, allow)
    return out


def test_version_and_all_are_consistent():
    assert trt.__version__ == "reference"
    assert len(set(trt.__all__)) == len(trt.__all__)
    assert all(hasattr(trt, name) for name in trt.__all__)


@pytest.mark.parametrize("version", VERSIONS)
def test_every_exported_name_exists(ref, real_api, version):
    api = real_api[version]
    missing = [n for n in ref["classes"] if "." not in n and n not in api["classes"]
               and not (version == "10" and n in ONLY_IN_11_CLASSES)]
    missing += [n for n in ref["functions"] if n not in api["functions"]]
    missing += [n for n in ref["values"] if n not in api["values"]]
    assert not missing, f"trtbuild.reference exports names TensorRT {version} lacks: {missing}"
    wrong = {n: (v["int"], api["values"][n].get("int")) for n, v in ref["values"].items()
             if api["values"][n].get("int") != v["int"]}
    assert not wrong, f"module-level values differ from TensorRT {version} (reference, real): {wrong}"


@pytest.mark.parametrize("version", VERSIONS)
def test_module_functions_signatures(ref, real_api, version):
    problems = []
    for name, params in ref["functions"].items():
        real = real_api[version]["functions"].get(name)
        problems += compare.signature_problems(f"TensorRT {version}: {name}", params, real)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("cls", CLASSES)
def test_class_members(ref, real_api, cls):
    """Every public member the reference defines exists on the real class, with a compatible kind
    and (for methods) matching parameter names, in both versions."""
    problems = []
    for member in ref["classes"][cls]["members"]:
        if (cls, member) in KNOWN_DEPARTURES or (cls, member) in DISPATCHED_OVERLOADS:
            continue
        problems += _member_problems(ref, cls, member, real_api)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("cls", [c for c in CONSTRUCTIBLE if (c, "__init__") not in KNOWN_DEPARTURES
                                 and (c, "__init__") not in DISPATCHED_OVERLOADS])
def test_constructor_parameters(ref, real_api, cls):
    """Where TensorRT lets users construct the class, the reference constructor takes the same
    parameter names (classes TensorRT creates internally are skipped)."""
    problems = _member_problems(ref, cls, "__init__", real_api)
    assert not problems, "\n".join(problems)


def test_only_in_11_table_is_true(real_api):
    """Each ONLY_IN_11 name exists in TensorRT 11.4 and not in 10.16."""
    for cls in ONLY_IN_11_CLASSES:
        assert cls in real_api["11"]["classes"] and cls not in real_api["10"]["classes"], cls
    for cls, member in ONLY_IN_11_MEMBERS:
        assert member in real_api["11"]["classes"][cls]["members"], (cls, member)
        assert member not in real_api["10"]["classes"][cls]["members"], (cls, member)


@pytest.mark.parametrize("cls", ENUMS)
def test_enum_values(ref, real_api, cls):
    problems = []
    for v in VERSIONS:
        if v == "10" and cls in ONLY_IN_11_CLASSES:
            continue
        problems += compare.enum_problems(cls, ref["classes"][cls]["enum"], real_api[v]["classes"].get(cls), v,
                                          VERSION_DEPENDENT)
    assert not problems, "\n".join(problems)


def test_version_table_is_current(ref, real_api):
    """The exemption table says what both real versions hold, and the reference follows 11."""
    for (cls, member), values in VERSION_DEPENDENT.items():
        for v in VERSIONS:
            assert real_api[v]["classes"][cls]["enum"][member] == values[v], (cls, member, v)
        assert values["10"] != values["11"], f"{cls}.{member} no longer differs; drop it from the table"
        assert int(getattr(getattr(trt, cls), member)) == values["11"], (cls, member)
    # nothing else differs between 10 and 11 among the members the reference mirrors
    for cls in (c for c in ENUMS if c not in ONLY_IN_11_CLASSES):
        for member in ref["classes"][cls]["enum"]:
            if (cls, member) in VERSION_DEPENDENT:
                continue
            vals = {v: real_api[v]["classes"][cls]["enum"].get(member) for v in VERSIONS}
            assert vals["10"] == vals["11"], (f"{cls}.{member} differs between versions {vals}: "
                                              "add it to VERSION_DEPENDENT")


def test_added_in_11_table_is_true(ref, real_api):
    """Each ADDED_IN_11 member is defined by the reference, absent from TensorRT 10 and present in TensorRT 11."""
    for cls, member in ADDED_IN_11:
        assert member in ref["classes"][cls]["members"], (cls, member)
        assert member not in real_api["10"]["classes"][cls]["members"], (cls, member)
        assert member in real_api["11"]["classes"][cls]["members"], (cls, member)


def test_add_scale_nd_requires_channel_axis():
    """The one REQUIRED_AFTER_DEFAULTS entry: omitting channel_axis fails, as on TensorRT."""
    network = trt.Builder(trt.Logger()).create_network(1 << int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED))
    x = network.add_input("x", trt.float32, (1, 2, 3, 3))
    with pytest.raises(TypeError, match="channel_axis"):
        network.add_scale_nd(x, trt.ScaleMode.UNIFORM)


def test_default_in_10_only_table_is_true(real_api):
    """TensorRT 10 has an overload without each DEFAULT_IN_10_ONLY parameter; TensorRT 11 has none."""
    for (cls, member), params in DEFAULT_IN_10_ONLY.items():
        for v, omittable in (("10", True), ("11", False)):
            overloads = real_api[v]["classes"][cls]["members"][member]["overloads"]
            can_omit = any(all(n not in params for n, _ in ov) or all(d for n, d in ov if n in params)
                           for ov in overloads)
            assert can_omit == omittable, (v, cls, member, overloads)


def test_trtbuild_passes_what_tensorrt_11_requires():
    """Every call of a DEFAULT_IN_10_ONLY method in trtbuild's code passes the parameter 11 requires
    (by position or keyword), so the code runs on TensorRT 11 too."""
    import ast

    missing = []
    for path in TRTBUILD_ROOT.rglob("*.py"):
        if "reference" in path.relative_to(TRTBUILD_ROOT).parts[:1]:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                for (_, member), params in DEFAULT_IN_10_ONLY.items():
                    if node.func.attr == member and len(node.args) < 3 and not params & {k.arg for k in node.keywords}:
                        missing.append(f"{path.relative_to(TRTBUILD_ROOT)}:{node.lineno}: {member} "
                                       f"without {set(params)}")
    assert not missing, "\n".join(missing)


def test_weights_overloads(real_api):
    """The three overloads TensorRT's Weights has, by position and by keyword."""
    import ctypes

    for dump in real_api.values():
        overloads = [[p for p, _ in o] for o in dump["classes"]["Weights"]["init"]]
        assert sorted(overloads) == sorted([["type"], ["type", "ptr", "count"], ["a"]]), \
            f"TensorRT's Weights overloads changed to {overloads}: update DISPATCHED_OVERLOADS and the reference"
    assert trt.Weights().size == 0 and trt.Weights().dtype == trt.float32
    assert trt.Weights(trt.float16).dtype == trt.float16 and trt.Weights(type=trt.float16).size == 0
    arr = np.arange(6, dtype=np.float32)
    assert np.array_equal(trt.Weights(arr).numpy(), arr) and np.array_equal(trt.Weights(a=arr).numpy(), arr)
    from_ptr = trt.Weights(trt.float32, arr.ctypes.data_as(ctypes.c_void_p).value, 6)
    assert from_ptr.size == 6 and np.array_equal(from_ptr.numpy(), arr)
    with pytest.raises(TypeError):
        trt.Weights(trt.float32, 0)


# -- trtbuild's own code ----------------------------------------------------------------------
TRTBUILD_ROOT = Path(trtbuild.__file__).parent


@pytest.fixture(scope="module")
def removed(real_api) -> source_scan.RemovedApi:
    return source_scan.removed_between(real_api["10"], real_api["11"])


def test_removed_set_is_what_tensorrt_11_removed(removed, real_api):
    """The computed set holds the removals trtbuild's rules name (guards against a broken dump)."""
    assert {"IInt8Calibrator", "IInt8EntropyCalibrator2", "IAlgorithmSelector"} <= removed.classes
    assert {"FP16", "BF16", "INT8", "OBEY_PRECISION_CONSTRAINTS"} <= removed.members["BuilderFlag"]
    assert {"set_output_type", "precision"} <= removed.members["ILayer"]
    assert "EXPLICIT_BATCH" in removed.members["NetworkDefinitionCreationFlag"]
    assert {"set_output_type", "platform_has_fast_fp16", "EXPLICIT_BATCH", "precision"} <= removed.anywhere
    # the pre-10 table really is gone from both versions
    for v in VERSIONS:
        api = real_api[v]
        names = set(api["classes"]) | set(api["functions"]) | set(api["values"])
        for entry in api["classes"].values():
            names |= set(entry["members"])
        assert not source_scan.REMOVED_BEFORE_10 & names, (v, source_scan.REMOVED_BEFORE_10 & names)
        assert not [n for n in names if n.startswith(source_scan.REMOVED_PREFIXES)]


def test_scanner_flags_removed_apis(removed):
    """The ast scan catches each pattern (so test_trtbuild_uses_no_removed_api can fail)."""
    bad = {
        "config.set_flag(trt.BuilderFlag.FP16)": "BuilderFlag.FP16",
        "f = trt.BuilderFlag.INT8": "BuilderFlag.INT8",
        "layer.set_output_type(0, trt.float16)": "set_output_type",
        "layer.precision = trt.float16": "precision",
        "setattr(layer, 'precision', trt.float16)": "precision",
        "n = builder.create_network(1 << int(trt.NetworkDefinitionCreationFlag.EXPLICIT_BATCH))": "EXPLICIT_BATCH",
        "ok = builder.platform_has_fast_fp16": "platform_has_fast_fp16",
        "class C(trt.IInt8EntropyCalibrator2): pass": "IInt8EntropyCalibrator2",
        "from tensorrt import IInt8Calibrator": "IInt8Calibrator",
        "engine = builder.build_engine(network, config)": "build_engine",
        "context.execute_async_v2(bindings, stream)": "execute_async_v2",
        "i = engine.get_binding_index('x')": "get_binding_",
        "c = network.add_convolution(x, 8, (3, 3), w, b)": "add_convolution",
        "p = network.add_pooling(x, trt.PoolingType.MAX, (2, 2))": "add_pooling",
        "f = network.add_fully_connected(x, 10, w, b)": "add_fully_connected",
        "n = builder.create_network(1)": "create_network",
        "n = builder.create_network(1 << 0)": "create_network",
        "config.set_flag(1)": "set_flag",
        "flag = trt.NetworkDefinitionCreationFlag(0)": "NetworkDefinitionCreationFlag",
    }
    for code, needle in bad.items():
        findings = source_scan.scan_source(code, "<test>", removed)
        assert findings, f"not flagged: {code}"
        assert any(needle in f.why or needle in f.code for f in findings), (code, [str(f) for f in findings])
    clean = "\n".join([
        "n = builder.create_network(1 << int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED))",
        "p = network.add_pooling_nd(x, trt.PoolingType.MAX, (2, 2))",
        "c = network.add_convolution_nd(x, 8, (3, 3), w, b)",
        "precision = args.precision",
        "dt = trt.DataType.INT8",
        "config.set_flag(trt.BuilderFlag.TF32)",
        "context.execute_async_v3(0)",
    ])
    assert source_scan.scan_source(clean, "<test>", removed) == []


def test_trtbuild_uses_no_removed_api(removed):
    findings = [f for f in source_scan.scan_tree(TRTBUILD_ROOT, removed) if f.kind == "removed"]
    assert not findings, "trtbuild uses TensorRT APIs that TensorRT 11 removed:\n" + "\n".join(map(str, findings))


def test_flags_are_named(removed):
    """create_network / BuilderFlag / set_flag never get a number (flag values differ between 10 and 11)."""
    findings = [f for f in source_scan.scan_tree(TRTBUILD_ROOT, removed) if f.kind == "flag-number"]
    assert not findings, "\n".join(map(str, findings))


# -- the helpers themselves (no download needed) ----------------------------------------------
def test_pybind_signature_parser():
    from helpers.conformance.dump_api import parse_pybind_doc

    doc = ("add_scale(self: tensorrt.INetworkDefinition, input: tensorrt.ITensor, mode: tensorrt.ScaleMode, "
           "shift: tensorrt.Weights = None) -> tensorrt.IScaleLayer\n\n    Adds a scale layer.\n")
    assert parse_pybind_doc("add_scale", doc) == [[["input", False], ["mode", False], ["shift", True]]]
    overloaded = ("__init__(*args, **kwargs)\nOverloaded function.\n\n"
                  "1. __init__(self: tensorrt.Weights, type: tensorrt.DataType = <DataType.FLOAT: 0>) -> None\n\n"
                  "    Initializes an empty Weights object. 2. __init__(x) in prose is not an overload\n\n"
                  "2. __init__(self: tensorrt.Weights, m: Dict[str, List[int]], sep: str = ', ', arg0: int) -> None\n")
    assert parse_pybind_doc("__init__", overloaded) == [
        [["type", True]], [["m", False], ["sep", True], ["arg0", False]]]
    assert parse_pybind_doc("get", "Initialize self.  See help(type(self)) for accurate signature.") is None
    assert parse_pybind_doc("f", "f(self: A) -> None") == [[]]


def test_signature_comparison_rules():
    ov = [["input", False], ["mode", False], ["shift", True]]
    assert compare.names_match([["input", False], ["mode", False]], ov)  # trailing default omitted
    assert not compare.names_match([["input", False]], ov)  # required 'mode' omitted
    assert not compare.names_match([["x", False], ["mode", False], ["shift", True]], ov)
    assert not compare.names_match([["*args", False]], [["strategy", True]])
    assert compare.names_match([["order", True]], [["arg0", False]])  # positional-only matches any name
    two_overloads = [[["name", True]], [["name", False], ["data", False]]]
    assert compare.default_problems([["name", True], ["data", True]], two_overloads) == []
    assert compare.default_problems([["a", True]], [[["a", False]]]) == ["a"]


def test_trtbuild_names_only_tensorrt_api_that_exists_in_both_versions(real_api):
    """Every `trt.X` and `trt.X.Y` that trtbuild's own code (outside the reference backend, which the
    tests above cover) writes exists in TensorRT 10.16 and 11.4, so the same code runs on both;
    except RTX_ONLY names, in the files RTX_ONLY allows (test_rtx_only_names_stay_on_rtx_paths)."""
    problems = []
    for (first, second), uses in source_scan.module_chain_uses(TRTBUILD_ROOT, names=("trt", "tensorrt")).items():
        if first in RTX_ONLY and {u.path for u in uses} <= RTX_ONLY[first][1]:
            continue
        for version, dump in real_api.items():
            missing = _missing_from(dump, first, second)
            if missing:
                problems.append(f"{', '.join(map(str, uses))}: trt.{missing} does not exist in TensorRT {version}")
    assert not problems, "\n".join(sorted(set(problems)))


# -- TensorRT-RTX 1.7 (installed: the `test` extra) -------------------------------------------
# The tensorrt-rtx backend runs trtbuild's builders on NVIDIA's `tensorrt_rtx` module. Its real
# bindings are importable here, so the API is read from the module itself (dump_api.dump).

#: The release the tables below describe (the `test` extra pins it).
RTX_RELEASE = "1.7"

#: Members of the reference surface that TensorRT-RTX 1.7 lacks. Nothing else of the reference
#: (classes, members, parameter names, enum members and values) differs; the test checks both ways.
_NO_PLUGINS = "TensorRT-RTX has no plugins (NVIDIA porting guide)"
RTX_REFERENCE_DIFFERENCES = {
    ("INetworkDefinition", "add_plugin_v3"): _NO_PLUGINS,
    ("NetworkDefinitionCreationFlag", "PREFER_JIT_PYTHON_PLUGINS"): _NO_PLUGINS + "; STRONGLY_TYPED is its only flag",
    ("NetworkDefinitionCreationFlag", "PREFER_AOT_PYTHON_PLUGINS"): _NO_PLUGINS + "; STRONGLY_TYPED is its only flag",
    ("ITensor", "location"): "TensorRT-RTX's ITensor has no location attribute; trtbuild's code never uses it "
                             "(test_trtbuild_calls_only_tensorrt_rtx_api)",
}

#: TensorRT-RTX API the reference does not mirror, that trtbuild uses: name -> (why, the only files
#: that may use it). TensorRT 10/11 have none of it (test_rtx_only_names_are_absent_from_tensorrt_10_and_11).
_TARGETS = "the target GPUs of an ahead-of-time build (TensorRT 10/11 build for the GPU they run on)"
RTX_ONLY = {
    "ComputeCapability": (_TARGETS, {"trtbuild/engine/rtx.py", "trtbuild/backend.py"}),
    "num_compute_capabilities": (_TARGETS, {"trtbuild/engine/rtx.py"}),
    "set_compute_capability": (_TARGETS, {"trtbuild/engine/rtx.py"}),
}
#: RTX-only members of classes the builders use, absent from the reference (it mirrors TensorRT 10/11).
RTX_ONLY_MEMBERS = {("IBuilderConfig", "set_compute_capability"), ("IBuilderConfig", "get_compute_capability"),
                    ("IBuilderConfig", "num_compute_capabilities")}

#: TensorRT API that trtbuild uses although TensorRT-RTX 1.7 lacks it: only on TensorRT 10/11 and
#: reference paths, behind an `is_rtx(...)` or `has_plugins` refusal (test_rtx_lacks_only_guarded_uses).
RTX_LACKS = {
    "add_plugin_v3": "TensorRT-RTX has no plugins (NVIDIA porting guide): its INetworkDefinition has no add_plugin_v3",
}

#: Plugin API that TensorRT-RTX 1.7's bindings still expose although TensorRT-RTX has no plugins
#: (NVIDIA porting guide). trtbuild uses it only behind an `is_rtx(...)` refusal, after a check that
#: the module is the reference, or on the reference module itself (`_ref.X` in trtbuild/ops).
RTX_PLUGIN_API = {"get_plugin_registry", "PluginFieldCollection", "PluginField", "PluginFieldType", "TensorRTPhase",
                  "IPluginV3", "IPluginCreatorV3One", "create_plugin", "get_creator", "register_creator",
                  "load_library", "all_creators"}
#: What counts as a guard in the function enclosing a use (an `if` on it whose body raises): TensorRT-RTX
#: named, or the capability it lacks (trtbuild.backend.capabilities(trt).has_plugins).
RTX_GUARDS = ("is_rtx(", "_ref.__name__", ".has_plugins")
#: Module aliases that are the reference backend, not a TensorRT module.
REFERENCE_ALIASES = {"_ref"}


@pytest.fixture(scope="module")
def rtx_api(rtx) -> dict:
    """dump_api's description of the installed tensorrt_rtx module."""
    from helpers.conformance.dump_api import dump

    assert rtx.__version__.startswith(RTX_RELEASE + "."), \
        f"TensorRT-RTX {rtx.__version__} is installed; re-check the RTX tables of this test, written for {RTX_RELEASE}"
    return dump(rtx)


def _all_names(api: dict) -> set[str]:
    names = set(api["classes"]) | set(api["functions"]) | set(api["values"])
    for entry in api["classes"].values():
        names |= set(entry["members"])
    return names


def _rtx_reference_differences(ref: dict, rtx_api: dict) -> tuple[list[str], set]:
    """(problems that are not documented differences, the documented differences that occurred)."""
    problems, seen = [], set()
    for n in ref["classes"]:
        if "." not in n and n not in rtx_api["classes"]:
            problems.append(f"TensorRT-RTX has no class {n}")
    for n, params in ref["functions"].items():
        problems += compare.signature_problems(f"TensorRT-RTX: {n}", params, rtx_api["functions"].get(n))
    for n, v in ref["values"].items():
        if rtx_api["values"].get(n, {}).get("int") != v["int"]:
            problems.append(f"TensorRT-RTX: module value {n} is {rtx_api['values'].get(n)}, "
                            f"the reference says {v['int']}")
    for cls, entry in ref["classes"].items():
        real = rtx_api["classes"].get(cls)
        for member, info in entry["members"].items():
            if (cls, member) in RTX_REFERENCE_DIFFERENCES:
                if real is not None and member not in real["members"]:
                    seen.add((cls, member))
                continue
            if (cls, member) in DISPATCHED_OVERLOADS:
                continue
            # TensorRT-RTX requires what TensorRT 11 requires (DEFAULT_IN_10_ONLY)
            allow = REQUIRED_AFTER_DEFAULTS.get((cls, member), frozenset()) | DEFAULT_IN_10_ONLY.get((cls, member),
                                                                                                  frozenset())
            problems += compare.member_problems(cls, member, info, real, "RTX", allow)
        if entry["init"] is not None and real is not None and real["init"] is not None \
                and (cls, "__init__") not in DISPATCHED_OVERLOADS:
            problems += compare.signature_problems(f"TensorRT-RTX: {cls}()", entry["init"], real["init"])
        if entry["kind"] == "enum":
            exempt = {k: {} for k in RTX_REFERENCE_DIFFERENCES if k[0] == cls}
            problems += compare.enum_problems(cls, entry["enum"], real, "RTX", exempt)
            seen |= {k for k in exempt if real is not None and k[1] not in real.get("enum", {})}
    return problems, seen


def test_reference_surface_agrees_with_tensorrt_rtx(ref, rtx_api):
    """Every class, member, parameter name and enum value of the reference exists identically in
    TensorRT-RTX 1.7, except RTX_REFERENCE_DIFFERENCES, each of which really is a difference."""
    problems, seen = _rtx_reference_differences(ref, rtx_api)
    assert not problems, "\n".join(problems)
    stale = set(RTX_REFERENCE_DIFFERENCES) - seen
    assert not stale, f"no longer differences between the reference and TensorRT-RTX: {sorted(stale)}"


def test_strongly_typed_flag_value_on_tensorrt_rtx(rtx):
    """STRONGLY_TYPED is TensorRT-RTX's only creation flag and, as in TensorRT 11 and the reference,
    bit 0; in TensorRT 10 it is bit 1 (VERSION_DEPENDENT). trtbuild only names it (test_flags_are_named)."""
    assert list(rtx.NetworkDefinitionCreationFlag.__members__) == ["STRONGLY_TYPED"]
    assert int(rtx.NetworkDefinitionCreationFlag.STRONGLY_TYPED) == 0 \
        == int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED) \
        == VERSION_DEPENDENT[("NetworkDefinitionCreationFlag", "STRONGLY_TYPED")]["11"] \
        != VERSION_DEPENDENT[("NetworkDefinitionCreationFlag", "STRONGLY_TYPED")]["10"]


def test_rtx_only_api_is_absent_from_the_reference(ref, rtx_api, rtx):
    """ComputeCapability and IBuilderConfig's compute-capability members exist only in TensorRT-RTX."""
    assert "ComputeCapability" in rtx_api["classes"] and "ComputeCapability" not in ref["classes"]
    members = {m for m in rtx.ComputeCapability.__members__}
    assert {"SM75", "SM80", "SM86", "SM89", "SM120", "SM121", "CURRENT"} <= members, members
    for cls, member in RTX_ONLY_MEMBERS:
        assert member in rtx_api["classes"][cls]["members"], (cls, member)
        assert member not in ref["classes"][cls]["members"], (cls, member)


def test_trtbuild_module_names_exist_in_tensorrt_rtx(rtx_api):
    """Every `trt.X` / `trt.X.Y` (and `rtx.X`, `tensorrt_rtx.X`) in trtbuild's own code exists in
    TensorRT-RTX 1.7, except RTX_LACKS names (none is used that way today)."""
    problems = []
    for (first, second), uses in source_scan.module_chain_uses(TRTBUILD_ROOT).items():
        if first in RTX_LACKS or first in REFERENCE_ALIASES:
            continue
        missing = _missing_from(rtx_api, first, second)
        if missing:
            problems.append(f"{', '.join(map(str, uses))}: {missing} does not exist in TensorRT-RTX")
    assert not problems, "\n".join(sorted(problems))


def _used_but_missing_in_rtx(tensorrt_names: set[str], rtx_api: dict) -> dict[str, list]:
    """Attribute names trtbuild's code uses that are TensorRT API (`tensorrt_names`) but that no
    TensorRT-RTX class or module has; generic words (source_scan.GENERIC_NAMES) count only where
    assigned (`layer.precision = ...`, not `args.precision`)."""
    rtx_names = _all_names(rtx_api)
    out = {}
    for name, uses in source_scan.attribute_uses(TRTBUILD_ROOT).items():
        if name in source_scan.GENERIC_NAMES:
            uses = [u for u in uses if u.store]
        uses = [u for u in uses if u.owner not in REFERENCE_ALIASES]
        if uses and name in tensorrt_names and name not in rtx_names:
            out[name] = uses
    return out


def test_trtbuild_calls_only_tensorrt_rtx_api(ref, rtx_api):
    """Every method, property or attribute name of the TensorRT API (as the reference mirrors it)
    that trtbuild's code uses on any object exists in TensorRT-RTX 1.7, except RTX_LACKS. Static
    analysis cannot know an object's type, so a name counts wherever it appears."""
    missing = _used_but_missing_in_rtx(_all_names(ref), rtx_api)
    unexpected = {n: list(map(str, u)) for n, u in missing.items() if n not in RTX_LACKS}
    assert not unexpected, f"trtbuild uses TensorRT API that TensorRT-RTX {RTX_RELEASE} lacks: {unexpected}"
    assert set(missing) == set(RTX_LACKS), f"RTX_LACKS entries trtbuild no longer uses: {set(RTX_LACKS) - set(missing)}"


def test_trtbuild_calls_only_tensorrt_rtx_api_beyond_the_reference(real_api, rtx_api):
    """The same with TensorRT 10.16's and 11.4's full API as the set of TensorRT names, so calls the
    reference does not mirror (made only on real TensorRT) are covered too (needs the wheels)."""
    missing = _used_but_missing_in_rtx(_all_names(real_api["10"]) | _all_names(real_api["11"]), rtx_api)
    unexpected = {n: list(map(str, u)) for n, u in missing.items() if n not in RTX_LACKS}
    assert not unexpected, f"trtbuild uses TensorRT API that TensorRT-RTX {RTX_RELEASE} lacks: {unexpected}"


def _unguarded(names) -> list[str]:
    bad = []
    uses = source_scan.attribute_uses(TRTBUILD_ROOT)
    for name in sorted(names):
        for use in uses.get(name, []):
            if use.owner in REFERENCE_ALIASES:
                continue
            if source_scan.guard_before(TRTBUILD_ROOT, use, RTX_GUARDS) is None:
                bad.append(f"{use}: {name} with no `if is_rtx(...)` / `has_plugins` refusal (or reference-only check) "
                           "before it")
    return bad


def test_rtx_lacks_only_guarded_uses(rtx_api):
    """Each RTX_LACKS name is really absent from TensorRT-RTX, and every use of it in trtbuild sits
    after a refusal for TensorRT-RTX in the same function (so no TensorRT-RTX path reaches it;
    tests/layers/test_involution_composed.py runs those refusals)."""
    rtx_names = _all_names(rtx_api)
    for name, reason in RTX_LACKS.items():
        assert name not in rtx_names, f"TensorRT-RTX now has {name}; drop it from RTX_LACKS ({reason})"
    assert not _unguarded(RTX_LACKS), "\n".join(_unguarded(RTX_LACKS))


def test_plugin_api_is_unused_on_tensorrt_rtx_paths(rtx_api):
    """TensorRT-RTX has no plugins (NVIDIA porting guide), though its bindings keep the plugin
    registry and plugin field types: trtbuild uses each RTX_PLUGIN_API name only behind a refusal
    for TensorRT-RTX, after checking for the reference, or on the reference module itself."""
    rtx_names = _all_names(rtx_api)
    uses = source_scan.attribute_uses(TRTBUILD_ROOT)
    assert not {n for n in RTX_PLUGIN_API if n not in rtx_names}, "move names TensorRT-RTX lacks to RTX_LACKS"
    assert not {n for n in RTX_PLUGIN_API if n not in uses}, "RTX_PLUGIN_API lists names trtbuild does not use"
    problems = _unguarded(RTX_PLUGIN_API)
    assert not problems, "\n".join(problems)


def test_rtx_only_names_stay_on_rtx_paths(rtx_api):
    """RTX_ONLY names exist in TensorRT-RTX and appear only in the files RTX_ONLY allows."""
    uses = source_scan.attribute_uses(TRTBUILD_ROOT)
    rtx_names = _all_names(rtx_api)
    for name, (_, files) in RTX_ONLY.items():
        assert name in rtx_names, name
        where = {u.path for u in uses.get(name, [])}
        assert where and where <= files, f"{name} used in {sorted(where - files)}; it exists only in TensorRT-RTX"


def test_rtx_only_names_are_absent_from_tensorrt_10_and_11(real_api):
    for version, api in real_api.items():
        assert not set(RTX_ONLY) & _all_names(api), (version, set(RTX_ONLY) & _all_names(api))
        assert not {m for _, m in RTX_ONLY_MEMBERS} & set(api["classes"]["IBuilderConfig"]["members"]), version


def test_guard_finder_and_attribute_scan(tmp_path):
    """The helpers above can fail: an unguarded use is reported, a guarded one is not."""
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "sub" / "m.py").write_text(
        "def bad(network, trt):\n"
        "    return network.add_plugin_v3([], [], None)\n"
        "def good(network, trt):\n"
        "    if is_rtx(trt):\n"
        "        raise ValueError('no plugins')\n"
        "    return network.add_plugin_v3([], [], None)\n"
        "class P(_ref.IPluginV3):\n"
        "    pass\n"
        "x = args.precision\n")
    uses = source_scan.attribute_uses(pkg)
    found = {u.line: source_scan.guard_before(pkg, u, RTX_GUARDS) for u in uses["add_plugin_v3"]}
    assert found == {2: None, 6: "is_rtx(trt)"}
    assert [(u.line, u.owner) for u in uses["IPluginV3"]] == [(7, "_ref")]
    assert [(u.line, u.store) for u in uses["precision"]] == [(9, False)]


#: TensorRT's debug-tensor API (layerwise parity without extra outputs), as TensorRT 10.x, 11.x and
#: TensorRT-RTX define it; trtbuild.reference.debug mirrors all of it.
DEBUG_API = {
    "INetworkDefinition": ["mark_debug", "unmark_debug", "is_debug_tensor", "mark_unfused_tensors_as_debug_tensors",
                           "unmark_unfused_tensors_as_debug_tensors"],
    "ICudaEngine": ["is_debug_tensor"],
    "IExecutionContext": ["set_debug_listener", "get_debug_listener", "set_tensor_debug_state", "get_debug_state",
                          "set_all_tensors_debug_state", "unfused_tensors_debug_state"],
    "IDebugListener": ["process_debug_tensor"],
}


def _debug_members(api: dict, cls: str) -> set[str]:
    return {m for m in api["classes"][cls]["members"] if "debug" in m.lower() or "unfused" in m.lower()}


@pytest.mark.parametrize("version", VERSIONS)
def test_debug_tensor_api_is_mirrored(ref, real_api, version):
    """Every debug-tensor member of the real classes is DEBUG_API (nothing missed), and the reference
    defines each with the real kind and parameter names (process_debug_tensor's argument order)."""
    api = real_api[version]
    for cls, names in DEBUG_API.items():
        assert _debug_members(api, cls) - {"debug_sync"} == set(names), f"TensorRT {version}: {cls}"
        missing = [n for n in names if n not in ref["classes"][cls]["members"]]
        assert not missing, f"trtbuild.reference.{cls} lacks {missing}"
        problems = [p for n in names for p in _member_problems(ref, cls, n, real_api)]
        assert not problems, "\n".join(problems)
    params = [p[0] for p in ref["classes"]["IDebugListener"]["members"]["process_debug_tensor"]["params"]]
    assert params == ["addr", "location", "type", "shape", "name", "stream"]


def test_debug_tensor_api_exists_in_tensorrt_rtx(ref, rtx_api):
    problems = [p for cls, names in DEBUG_API.items() for n in names
                for p in compare.member_problems(cls, n, ref["classes"][cls]["members"][n], rtx_api["classes"].get(cls),
                                                 "RTX", frozenset())]
    assert not problems, "\n".join(problems)
    assert all(_debug_members(rtx_api, cls) - {"debug_sync"} == set(names) for cls, names in DEBUG_API.items())


def test_enums_print_as_tensorrt_rtx_enums(rtx):
    """str(), format() and %s of every reference enum member that TensorRT-RTX has print as TensorRT-RTX's
    ('DataType.INT32'); as plain IntEnums they printed the number, so a builder's "input 'x' has type
    {dtype}" read "has type 3" on the reference."""
    import enum

    checked = 0
    for cls_name in dir(trt):
        cls = getattr(trt, cls_name)
        if not (isinstance(cls, type) and issubclass(cls, enum.Enum)) or not hasattr(rtx, cls_name):
            continue
        for member in cls:
            theirs = getattr(getattr(rtx, cls_name), member.name, None)
            if theirs is None:
                continue
            assert (str(member), f"{member}", "%s" % member) == (str(theirs),) * 3, f"{cls_name}.{member.name}"
            checked += 1
    severity = trt.Logger.Severity.ERROR
    assert str(severity) == str(rtx.Logger.Severity.ERROR) == "Severity.ERROR"
    for enum_value in (severity, rtx.Logger.Severity.ERROR, trt.DataType.HALF, rtx.DataType.HALF):
        with pytest.raises(TypeError, match="unsupported format string"):
            f"{enum_value:>16}"
    assert checked >= 140, checked  # 146 with TensorRT-RTX 1.7.1.116
