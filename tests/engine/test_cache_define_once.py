"""The cached build defines its network once: the network hashed for the key is the one built on a miss;
and the key's version makes keys made the older way misses, never wrong hits."""

from __future__ import annotations

import dataclasses

import pytest
import torch

import trtbuild.engine.build as engine_build
import trtbuild.engine.define as engine_define
from trtbuild.backend import load_trt
from trtbuild.engine import build_and_save, load_engine
from trtbuild.engine.cache import CachedModelBuild, EngineCache, build_with_cache, key_for_model_build
from trtbuild.engine.cache_key import KEY_VERSION, CacheKey
from trtbuild.engine.model import get_spec
from trtbuild.engine.options import BatchProfile, BuildOptions
from trtbuild.models import registry
from trtbuild.weights import export_weights

REF = load_trt("reference")


@pytest.fixture(scope="module")
def weights(tmp_path_factory):
    """(weight file, the same weights with one value changed) of the small seeded alexnet."""
    root = tmp_path_factory.mktemp("w")
    module = registry.get_torch_model("alexnet", seed=0, small=True)
    export_weights(module, root / "a.wts")
    with torch.no_grad():
        next(module.parameters()).view(-1)[3] -= 0.25
    export_weights(module, root / "b.wts")
    return root / "a.wts", root / "b.wts"


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


def _build(cache, weights_path, out, options):
    job = CachedModelBuild(REF, get_spec("alexnet"), weights_path, options)
    return (*build_with_cache(cache, job.key, out, lambda: job.build_and_save(out), weights_path), job.key)


def test_a_miss_defines_once_and_builds_the_engine_build_and_save_builds(tmp_path, weights, counted):
    options = BuildOptions(small=True, progress=False)
    path, sidecar, hit, key = _build(EngineCache(tmp_path / "c"), weights[0], tmp_path / "a.engine", options)
    assert not hit and counted == {"defined": 1, "serialized": 1}
    direct, _ = build_and_save("alexnet", weights[0], tmp_path / "d.engine", REF, options=options)
    assert path.read_bytes() == direct.read_bytes()  # the network hashed first builds the same engine
    assert sidecar.engine_sha256 == sidecar["engine_sha256"] and sidecar.build.model == "alexnet"
    counted.update(defined=0, serialized=0)
    path, _, hit, again = _build(EngineCache(tmp_path / "c"), weights[0], tmp_path / "b.engine", options)
    assert hit and again == key and counted == {"defined": 1, "serialized": 0}  # defined for the key only
    x = torch.rand(1, 3, 96, 96)
    torch.testing.assert_close(load_engine(path)(input=x)["logits"], load_engine(direct)(input=x)["logits"],
                               rtol=0, atol=0)


def test_every_option_weight_and_network_change_is_a_miss(tmp_path, weights):
    a, b = weights
    cache = EngineCache(tmp_path / "c")
    base = BuildOptions(small=True, progress=False)
    _build(cache, a, tmp_path / "base.engine", base)
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
        _, _, hit, keys[name] = _build(cache, w, tmp_path / f"{name}.engine", options)
        assert not hit, name
    assert len({k.digest for k in keys.values()}) == len(keys)
    assert keys["weights"].network == keys["tf32"].network  # only the weights / options part differs
    assert keys["batch profile"].network != keys["tf32"].network  # the input is declared with batch -1
    assert keys["network name"].network != keys["tf32"].network  # the network's own hash sees it
    # the same options again (timing cache and progress are not in the key): a hit
    _, _, hit, _ = _build(cache, a, tmp_path / "same.engine", base.replace(progress=True, timing_cache=tmp_path / "t"))
    assert hit


def test_key_for_model_build_takes_options_or_keywords_not_both(weights):
    by_kw = key_for_model_build(REF, get_spec("alexnet"), weights[0], small=True, batch=(1, 2, 4))
    by_options = key_for_model_build(REF, get_spec("alexnet"), weights[0],
                                     options=BuildOptions(small=True, profiles=(BatchProfile(1, 2, 4),)))
    assert by_kw == by_options
    with pytest.raises(ValueError, match=r"^key_for_model_build: pass either options=BuildOptions\(...\) or keyword "
                                         r"arguments \(small\), not both$"):
        key_for_model_build(REF, get_spec("alexnet"), weights[0], options=BuildOptions(), small=True)


def test_a_key_made_the_older_way_is_a_miss_never_a_hit(tmp_path, weights):
    key = key_for_model_build(REF, get_spec("alexnet"), weights[0], small=True)
    assert key.version == KEY_VERSION == 2
    older = dataclasses.replace(key, version=1)
    assert older.digest != key.digest
    legacy = CacheKey(*[getattr(key, f.name) for f in dataclasses.fields(CacheKey) if f.name != "version"])
    assert legacy.version == KEY_VERSION  # the default is the current version
    cache = EngineCache(tmp_path / "c")
    cache.put(older, b"an engine stored under the older key", {"model": "alexnet"})
    assert cache.get(older) is not None and cache.get(key) is None
