"""The engine cache (trtbuild.engine.cache): what its key covers, and the store's atomicity, integrity and LRU;
a cached build defines its network once (the network hashed for the key is the one built on a miss), and the
key's version makes keys made the older way misses, never wrong hits."""

from __future__ import annotations

import dataclasses
import json
import logging
import os

import pytest
import torch

import trtbuild.engine.build as engine_build
import trtbuild.engine.define as engine_define
from trtbuild.backend import load_trt
from trtbuild.engine import build_and_save, load_engine, new_network
from trtbuild.engine.cache import CachedModelBuild, EngineCache, build_with_cache, key_for_model_build, parse_size
from trtbuild.engine.cache_key import KEY_VERSION, CacheKey, network_structure_hash
from trtbuild.engine.model import get_spec
from trtbuild.engine.options import BatchProfile, BuildOptions
from trtbuild.models import registry
from trtbuild.weights import export_weights

REF = load_trt("reference")
SHA = "0" * 64


@pytest.fixture(scope="module")
def alexnet(tmp_path_factory):
    """(spec, weight file, the same weights with one value changed)."""
    root = tmp_path_factory.mktemp("w")
    module = registry.get_torch_model("alexnet", seed=0, small=True)
    export_weights(module, root / "a.wts")
    with torch.no_grad():
        next(module.parameters()).view(-1)[7] += 0.5
    export_weights(module, root / "b.wts")
    return get_spec("alexnet"), root / "a.wts", root / "b.wts"


def _key(trt, alexnet, weights=None, **kw):
    spec, a, _ = alexnet
    return key_for_model_build(trt, spec, weights or a, small=True, **kw)


def test_same_build_same_key_and_every_input_of_the_build_changes_it(alexnet):
    base = _key(REF, alexnet)
    assert _key(REF, alexnet).digest == base.digest and len(base.digest) == 64
    changed = {
        "one weight value": _key(REF, alexnet, weights=alexnet[2]),
        "precision": _key(REF, alexnet, precision="fp16"),
        "batch profile": _key(REF, alexnet, batch=(1, 2, 4)),
        "another batch profile": _key(REF, alexnet, batch=(1, 2, 8)),
        "native I/O": _key(REF, alexnet, precision="fp16", fp32_io=False),
        "workspace": _key(REF, alexnet, workspace=1 << 20),
    }
    digests = {name: k.digest for name, k in changed.items()}
    assert base.digest not in digests.values() and len(set(digests.values())) == len(digests)
    assert changed["one weight value"].network == base.network  # only the weights part differs
    assert changed["one weight value"].weights != base.weights
    assert changed["batch profile"].network != base.network  # the input is declared with batch -1


def test_backend_and_targets_are_in_the_key(alexnet, rtx):
    ref, sm86 = _key(REF, alexnet), _key(rtx, alexnet, targets=("8.6",))
    assert (sm86.backend, sm86.target) == ("tensorrt-rtx", "targets sm86") and ref.target == "any device"
    assert sm86.backend_version == rtx.__version__ and ref.digest != sm86.digest
    sm89 = _key(rtx, alexnet, targets=("8.9",))
    default = _key(rtx, alexnet)
    assert sm89.digest != sm86.digest and default.target == "targets sm86,sm89,sm120"
    assert sm89.network == sm86.network  # the same network: only where it runs differs


def _conv_act_network(trt, stride=1, act="RELU", kernel_value=0.1, names=("c", "a")):
    import numpy as np

    builder, network, logger = new_network(trt)
    x = network.add_input("x", trt.DataType.FLOAT, (1, 2, 8, 8))
    conv = network.add_convolution_nd(x, 3, (3, 3), trt.Weights(np.full(54, kernel_value, np.float32)),
                                      trt.Weights(np.zeros(3, np.float32)))
    conv.stride_nd, conv.name = (stride, stride), names[0]
    a = network.add_activation(conv.get_output(0), getattr(trt.ActivationType, act))
    a.name = names[1]
    network.mark_output(a.get_output(0))
    return network, (builder, logger)


@pytest.mark.parametrize("backend", ["reference", "tensorrt-rtx"])
def test_structure_hash_sees_one_attribute_but_not_weight_values(backend, request):
    trt = REF if backend == "reference" else request.getfixturevalue("rtx")
    base = network_structure_hash(_conv_act_network(trt)[0], trt)
    assert network_structure_hash(_conv_act_network(trt)[0], trt) == base
    assert network_structure_hash(_conv_act_network(trt, stride=2)[0], trt) != base
    assert network_structure_hash(_conv_act_network(trt, act="SIGMOID")[0], trt) != base
    assert network_structure_hash(_conv_act_network(trt, names=("c", "b"))[0], trt) != base
    assert network_structure_hash(_conv_act_network(trt, kernel_value=0.7)[0], trt) == base  # weights: separate


def test_stripped_plan_key_ignores_weight_values_but_not_names():
    net = _conv_act_network(REF)[0]
    other_values = _conv_act_network(REF, kernel_value=0.7)[0]
    a = CacheKey.of(net, REF, weight_names=["c.weight", "c.bias"])
    assert CacheKey.of(other_values, REF, weight_names=["c.bias", "c.weight"]).digest == a.digest
    assert a.weights.startswith("names:")
    assert CacheKey.of(net, REF, weight_names=["c.weight", "c.bias2"]).digest != a.digest
    assert CacheKey.of(net, REF, weights_sha256=SHA).digest != a.digest
    with pytest.raises(ValueError, match="exactly one of weights_sha256"):
        CacheKey.of(net, REF)


def _key_n(n: int) -> CacheKey:
    return CacheKey("net", f"{n:064x}", "reference", "reference", "any device", "opts", "0")


def _sidecar(model="m"):
    return {"model": model, "backend": "reference", "precision": "fp32", "weights": None}


def test_put_get_roundtrip_ls_and_clear(tmp_path):
    cache = EngineCache(tmp_path / "c")
    assert cache.get(_key_n(1)) is None and cache.ls() == []
    path = cache.put(_key_n(1), b"plan-bytes", _sidecar("alexnet"))
    assert cache.get(_key_n(1)) == path and path.read_bytes() == b"plan-bytes"
    side = json.loads(path.with_name(path.name + ".json").read_text())
    assert side["cache_key"]["digest"] == _key_n(1).digest and side["engine_bytes"] == 10
    [entry] = cache.ls()
    assert (entry.digest, entry.model, entry.precision) == (_key_n(1).digest, "alexnet", "fp32")
    assert entry.bytes == 10 + path.with_name(path.name + ".json").stat().st_size
    assert cache.clear() == (1, entry.bytes) and cache.ls() == [] and cache.get(_key_n(1)) is None


@pytest.mark.parametrize("damage", ["truncate", "flip", "sidecar", "no engine"])
def test_corrupt_entry_is_a_removed_miss_with_one_warning(tmp_path, caplog, damage):
    cache = EngineCache(tmp_path)
    path = cache.put(_key_n(2), b"0123456789" * 10, _sidecar())
    if damage == "truncate":
        path.write_bytes(path.read_bytes()[:50])
    elif damage == "flip":
        path.write_bytes(b"X" + path.read_bytes()[1:])
    elif damage == "sidecar":
        path.with_name(path.name + ".json").write_text("{not json")
    else:
        path.unlink()
    with caplog.at_level(logging.WARNING, logger="trtbuild.engine.cache"):
        assert cache.get(_key_n(2)) is None
    [record] = caplog.records
    assert f"engine cache entry {_key_n(2).short} in {tmp_path} is corrupt" in record.getMessage()
    assert not any(p.name.startswith(_key_n(2).digest) for p in tmp_path.iterdir())  # removed
    cache.put(_key_n(2), b"fresh", _sidecar())  # and replaced by the next store
    assert cache.get(_key_n(2)).read_bytes() == b"fresh"


def test_lru_eviction_keeps_the_most_recently_used_within_the_cap(tmp_path):
    plan = b"p" * 4000
    probe = EngineCache(tmp_path / "probe")
    probe.put(_key_n(9), plan, _sidecar())
    entry_bytes = probe.ls()[0].bytes
    cache = EngineCache(tmp_path / "c", max_bytes=2 * entry_bytes + 100)  # room for two entries
    for n in (1, 2):
        path = cache.put(_key_n(n), plan, _sidecar())
        os.utime(path, (1000 + n, 1000 + n))  # 1 older than 2
    assert cache.get(_key_n(1)) is not None  # 1 is now the most recently used
    cache.put(_key_n(3), plan, _sidecar())
    assert [e.digest for e in cache.ls()] == [_key_n(3).digest, _key_n(1).digest]
    assert sum(e.bytes for e in cache.ls()) <= cache.max_bytes
    big = EngineCache(tmp_path / "c", max_bytes=10)  # an entry larger than the cap is kept alone
    big.put(_key_n(4), plan, _sidecar())
    assert [e.digest for e in big.ls()] == [_key_n(4).digest]


def test_sizes_and_bad_settings_are_one_sentence(tmp_path, monkeypatch):
    assert parse_size("4G") == 4 << 30 and parse_size("500M") == 500 << 20 and parse_size("123") == 123
    assert parse_size("64KiB") == 64 << 10
    with pytest.raises(ValueError, match=r"cache size 'lots': expected a number of bytes"):
        parse_size("lots")
    monkeypatch.setenv("TRTBUILD_CACHE_MAX_SIZE", "1M")
    assert EngineCache(tmp_path).max_bytes == 1 << 20
    monkeypatch.setenv("TRTBUILD_CACHE_MAX_SIZE", "4 gigs")
    with pytest.raises(ValueError, match=r"TRTBUILD_CACHE_MAX_SIZE '4 gigs': expected a number of bytes"):
        EngineCache(tmp_path)
    monkeypatch.delenv("TRTBUILD_CACHE_MAX_SIZE")
    (tmp_path / "f").write_text("x")
    with pytest.raises(ValueError, match=r"engine cache .*/f is not a directory"):
        EngineCache(tmp_path / "f")


# -- one definition for the key and the build ----------------------------------------------------

@pytest.fixture
def counted(monkeypatch):
    """{"defined": n, "serialized": n}: how often a network was defined (new_network) and serialized."""
    counts = {"defined": 0, "serialized": 0}

    def counting(name, module, attr):
        real = getattr(module, attr)

        def wrapper(*args, **kw):
            counts[name] += 1
            return real(*args, **kw)

        monkeypatch.setattr(module, attr, wrapper)

    counting("defined", engine_define, "new_network")
    counting("serialized", engine_build, "serialize_network")
    return counts


def _cached_build(cache, weights_path, out, options):
    job = CachedModelBuild(REF, get_spec("alexnet"), weights_path, options)
    return (*build_with_cache(cache, job.key, out, lambda: job.build_and_save(out), weights_path), job.key)


def test_a_miss_defines_once_and_builds_the_engine_build_and_save_builds(tmp_path, alexnet, counted):
    weights = alexnet[1:]
    options = BuildOptions(small=True, progress=False)
    path, sidecar, hit, key = _cached_build(EngineCache(tmp_path / "c"), weights[0], tmp_path / "a.engine", options)
    assert not hit and counted == {"defined": 1, "serialized": 1}
    direct, _ = build_and_save("alexnet", weights[0], tmp_path / "d.engine", REF, options=options)
    assert path.read_bytes() == direct.read_bytes()  # the network hashed first builds the same engine
    assert sidecar.engine_sha256 == sidecar["engine_sha256"] and sidecar.build.model == "alexnet"
    counted.update(defined=0, serialized=0)
    path, _, hit, again = _cached_build(EngineCache(tmp_path / "c"), weights[0], tmp_path / "b.engine", options)
    assert hit and again == key and counted == {"defined": 1, "serialized": 0}  # defined for the key only
    x = torch.rand(1, 3, 96, 96)
    torch.testing.assert_close(load_engine(path)(input=x)["logits"], load_engine(direct)(input=x)["logits"],
                               rtol=0, atol=0)


def test_every_option_weight_and_network_change_is_a_miss(tmp_path, alexnet):
    _, a, b = alexnet
    cache = EngineCache(tmp_path / "c")
    base = BuildOptions(small=True, progress=False)
    _cached_build(cache, a, tmp_path / "base.engine", base)
    changed = {
        "weights": (b, base),
        "tf32": (a, base.replace(tf32=True)),
        "refit": (a, base.replace(refit="identical")),
        "a debug tensor": (a, base.replace(debug_tensors=("features.0",))),
        "batch profile": (a, base.replace(profiles=(BatchProfile(1, 2, 2),))),
        "network name": (a, base.replace(network_name="renamed")),
    }
    keys = {}
    for name, (w, options) in changed.items():
        _, _, hit, keys[name] = _cached_build(cache, w, tmp_path / f"{name}.engine", options)
        assert not hit, name
    assert len({k.digest for k in keys.values()}) == len(keys)
    assert keys["weights"].network == keys["tf32"].network  # only the weights / options part differs
    assert keys["batch profile"].network != keys["tf32"].network  # the input is declared with batch -1
    assert keys["network name"].network != keys["tf32"].network  # the network's own hash sees it
    # the same options again (timing cache and progress are not in the key): a hit
    same = base.replace(progress=True, timing_cache=tmp_path / "t")
    _, _, hit, _ = _cached_build(cache, a, tmp_path / "same.engine", same)
    assert hit


def test_key_for_model_build_takes_options_or_keywords_not_both(alexnet):
    weights = alexnet[1:]
    by_kw = key_for_model_build(REF, get_spec("alexnet"), weights[0], small=True, batch=(1, 2, 4))
    by_options = key_for_model_build(REF, get_spec("alexnet"), weights[0],
                                     options=BuildOptions(small=True, profiles=(BatchProfile(1, 2, 4),)))
    assert by_kw == by_options
    with pytest.raises(ValueError, match=r"^key_for_model_build: pass either options=BuildOptions\(...\) or keyword "
                                         r"arguments \(small\), not both$"):
        key_for_model_build(REF, get_spec("alexnet"), weights[0], options=BuildOptions(), small=True)


def test_a_key_made_the_older_way_is_a_miss_never_a_hit(tmp_path, alexnet):
    weights = alexnet[1:]
    key = key_for_model_build(REF, get_spec("alexnet"), weights[0], small=True)
    assert key.version == KEY_VERSION == 4
    older = dataclasses.replace(key, version=1)
    assert older.digest != key.digest
    legacy = CacheKey(*[getattr(key, f.name) for f in dataclasses.fields(CacheKey) if f.name != "version"])
    assert legacy.version == KEY_VERSION  # the default is the current version
    cache = EngineCache(tmp_path / "c")
    cache.put(older, b"an engine stored under the older key", {"model": "alexnet"})
    assert cache.get(older) is not None and cache.get(key) is None


def test_the_key_covers_the_code_of_the_plugin_libraries(tmp_path, monkeypatch):
    """A plugin library rebuilt with another kernel keeps its plugin's name and version, and the plan holds neither
    its code nor its file: the key hashes the library, so the rebuilt one is a miss, not a hit of the old engine."""
    import trtbuild.engine.plugins as plugins
    from trtbuild.engine.cache_key import plugin_code_digest

    _, network, _logger = new_network(REF)
    x = network.add_input("x", REF.DataType.FLOAT, (1, 2))
    network.mark_output(network.add_identity(x).get_output(0))
    assert plugin_code_digest(REF, network) == ""  # no plugin layer: nothing to hash
    library = tmp_path / "libplugin.so"
    library.write_bytes(b"kernel v1")
    monkeypatch.setattr(plugins, "plugins_used", lambda trt, net: [
        {"plugin": "trtbuild::Involution", "version": "1", "layers": 1, "library": str(library)}])
    first = CacheKey.of(network, REF, weights_sha256="0" * 64)
    assert first.plugins == plugin_code_digest(REF, network) != ""
    library.write_bytes(b"kernel v2")  # rebuilt: same plugin, name and version
    second = CacheKey.of(network, REF, weights_sha256="0" * 64)
    assert second.plugins != first.plugins and second.digest != first.digest
    assert dataclasses.replace(second, plugins=first.plugins).digest == first.digest  # only that part differs
