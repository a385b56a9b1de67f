"""One engine-vs-sidecar sha256 check (serialize.check_engine_sha256) for loading, inspecting and the cache:
each says, in one sentence naming the file, how the engine differs from what its sidecar records."""

from __future__ import annotations

import hashlib
import logging

import pytest

from trtbuild.engine.cache import EngineCache
from trtbuild.engine.cache_key import CacheKey
from trtbuild.engine.errors import EngineFileError
from trtbuild.engine.inspect import InspectError, inspect_engine
from trtbuild.engine.serialize import check_engine_sha256, read_engine_file

DATA = b"0123456789" * 10
SIDE = {"engine_sha256": hashlib.sha256(DATA).hexdigest(), "engine_bytes": len(DATA)}


def test_matching_engine_or_no_recorded_sha256_passes():
    check_engine_sha256(DATA, SIDE, "engine file e.engine")
    check_engine_sha256(b"anything", {"engine_bytes": 3}, "engine file e.engine")  # nothing recorded to check


@pytest.mark.parametrize("data, how", [(DATA[:40], "it has 40 bytes, the sidecar says 100"),
                                       (b"X" + DATA[1:], "same size, different content")])
def test_a_different_engine_is_one_sentence_with_the_callers_error_and_advice(data, how):
    with pytest.raises(KeyError) as e:
        check_engine_sha256(data, SIDE, "engine file e.engine", KeyError, "; rebuild it")
    assert e.value.args[0] == (f"engine file e.engine does not match the sha256 in its sidecar ({how}), so it was "
                               "changed or truncated after the build; rebuild it")


def _saved(tmp_path, data=DATA):
    path = tmp_path / "e.engine"
    path.write_bytes(data)
    (tmp_path / "e.engine.json").write_text(
        '{"format": 1, "tensorrt_version": "ref", "backend": "reference", "engine_sha256": "%s", '
        '"engine_bytes": %d}' % (SIDE["engine_sha256"], len(DATA)))
    return path


def test_loading_and_inspecting_say_the_same_sentence(tmp_path):
    path = _saved(tmp_path, b"Y" + DATA[1:])
    expected = (f"engine file {path} does not match the sha256 in its sidecar (same size, different content), so it "
                "was changed or truncated after the build")
    with pytest.raises(EngineFileError) as loading:
        read_engine_file(path)
    assert str(loading.value) == expected + "; rebuild it"
    with pytest.raises(InspectError) as inspecting:
        inspect_engine(path)
    assert str(inspecting.value) == expected


def test_the_cache_reports_a_changed_engine_with_the_same_words(tmp_path, caplog):
    key = CacheKey("net", "1" * 64, "reference", "reference", "any device", "opts", "0")
    cache = EngineCache(tmp_path)
    path = cache.put(key, DATA, {"model": "m"})
    path.write_bytes(b"Z" + DATA[1:])
    with caplog.at_level(logging.WARNING, logger="trtbuild.engine.cache"):
        assert cache.get(key) is None
    [record] = caplog.records
    assert ("is corrupt (its engine does not match the sha256 in its sidecar (same size, different content), so it "
            "was changed or truncated after the build), so it was removed") in record.getMessage()
