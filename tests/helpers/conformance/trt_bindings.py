"""NVIDIA's real TensorRT Python bindings, importable with no GPU and no TensorRT libraries.

`prepare(version)` downloads the official `tensorrt_cu13_bindings` wheel with pip (cached),
unzips it and compiles, with gcc, empty stand-ins for the nine C entry points the bindings
import from libnvinfer / libnvinfer_plugin / libnvonnxparser. Importing the bindings then works
for reading signatures, docstrings and enums; creating a Builder or Runtime does not (the
stand-ins return NULL), and nothing here ever tries.

`api(version)` returns the JSON dump of dump_api.py. The dumps are committed (dumps/<full version>.json,
with the hash of the dump script that made them), so the tests need no download; where the dump
script has changed since, or with `fresh=True`, the bindings are downloaded and imported in a
subprocess, and the dump is cached next to the wheel. Rewrite the committed dumps with

    PYTHONPATH=tests python -m helpers.conformance.trt_bindings

Cache: $TRTBUILD_CONFORMANCE_CACHE, else .cache/trtbuild-conformance/<full version>/ in the
checkout (ignored by git).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

#: The TensorRT releases the reference backend is checked against.
VERSIONS = {"10": "10.16.1.11", "11": "11.4.0.106"}

#: The C entry points the bindings import (nm -D --undefined-only tensorrt.so), with a
#: signature returning NULL / 0. They are never called while only reading the API.
STUB_SOURCE = """\
#include <stddef.h>
void* createInferBuilder_INTERNAL(void* logger, int version) { return NULL; }
void* createInferRefitter_INTERNAL(void* engine, void* logger, int version) { return NULL; }
void* createInferRuntime_INTERNAL(void* logger, int version) { return NULL; }
void* createNvOnnxParserRefitter_INTERNAL(void* refitter, void* logger, int version) { return NULL; }
void* createNvOnnxParser_INTERNAL(void* network, void* logger, int version) { return NULL; }
void* getBuilderPluginRegistry(int capability) { return NULL; }
int getNvOnnxParserVersion(void) { return 0; }
void* getPluginRegistry(void) { return NULL; }
int initLibNvInferPlugins(void* logger, const char* plugin_namespace) { return 0; }
"""
STUB_LIBRARIES = ("libnvinfer", "libnvinfer_plugin", "libnvonnxparser")
DUMP_SCRIPT = Path(__file__).with_name("dump_api.py")
#: the committed dumps: {"dump_script": dump_key(), "api": <the dump>} per full version
DUMPS = Path(__file__).with_name("dumps")
#: the checkout's root (tests/helpers/conformance/ is three levels below it)
CHECKOUT = Path(__file__).resolve().parents[3]


class BindingsUnavailable(RuntimeError):
    """The wheel could not be downloaded or prepared (no package index, no gcc, ...)."""


def cache_root() -> Path:
    """Where wheels, stand-in libraries and dumps are kept between runs."""
    env = os.environ.get("TRTBUILD_CONFORMANCE_CACHE")
    return Path(env) if env else CHECKOUT / ".cache" / "trtbuild-conformance"


def dump_key() -> str:
    """The hash of dump_api.py: a dump made by another version of the script is not used."""
    return hashlib.sha256(DUMP_SCRIPT.read_bytes()).hexdigest()[:16]


def committed_path(version: str) -> Path:
    return DUMPS / f"{VERSIONS.get(version, version)}.json"


def committed(version: str) -> dict | None:
    """The committed dump of `version`, or None where there is none or another dump script made it."""
    path = committed_path(version)
    if not path.is_file():
        return None
    data = json.loads(path.read_text())
    return data["api"] if data.get("dump_script") == dump_key() else None


def _run(cmd: list[str], what: str, timeout: int = 300, **kw) -> subprocess.CompletedProcess:
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise BindingsUnavailable(f"{what} failed: {e}") from None
    if res.returncode != 0:
        tail = (res.stderr or res.stdout).strip().splitlines()[-5:]
        raise BindingsUnavailable(f"{what} failed (exit {res.returncode}): " + " | ".join(tail))
    return res


def prepare(version: str) -> Path:
    """Download, unpack and stub the bindings of `version` ("10", "11" or a full version);
    return their folder (with site/ and stubs/). Raises BindingsUnavailable."""
    full = VERSIONS.get(version, version)
    major = full.split(".")[0]
    folder = cache_root() / full
    if (folder / "ready").is_file():
        return folder
    if shutil.which("gcc") is None:
        raise BindingsUnavailable("gcc is not installed (needed to compile stand-ins for the TensorRT libraries)")
    cache_root().mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f"{full}.", dir=cache_root()))
    try:
        _run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
              "--disable-pip-version-check",
              "--timeout", "30", "--retries", "1", "-q", "-d", str(work / "dl"), f"tensorrt_cu13_bindings=={full}"],
             f"pip download tensorrt_cu13_bindings=={full}")
        wheels = sorted((work / "dl").glob("*.whl"))
        if not wheels:
            raise BindingsUnavailable(f"pip download tensorrt_cu13_bindings=={full} produced no wheel")
        with zipfile.ZipFile(wheels[0]) as zf:
            zf.extractall(work / "site")
        (work / "stubs").mkdir()
        (work / "stubs" / "stub.c").write_text(STUB_SOURCE)
        for lib in STUB_LIBRARIES:
            _run(["gcc", "-shared", "-fPIC", "-o", str(work / "stubs" / f"{lib}.so.{major}"),
                  str(work / "stubs" / "stub.c")], f"gcc ({lib}.so.{major})")
        (work / "ready").write_text(wheels[0].name + "\n")
        try:
            work.rename(folder)  # atomic: a concurrent run either sees nothing or a ready folder
        except OSError:
            if not (folder / "ready").is_file():
                raise
    finally:
        if work.exists():
            shutil.rmtree(work, ignore_errors=True)
    return folder


def environment(folder: Path) -> dict[str, str]:
    """Environment variables under which `import tensorrt_bindings` works."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(folder / "site"), env.get("PYTHONPATH")]))
    env["LD_LIBRARY_PATH"] = os.pathsep.join(filter(None, [str(folder / "stubs"), env.get("LD_LIBRARY_PATH")]))
    return env


def api(version: str, fresh: bool = False) -> dict:
    """The dump (see dump_api.py) of the real bindings of `version`: the committed one where it is
    current, unless `fresh`; else made from the downloaded wheel. Raises BindingsUnavailable."""
    if not fresh:
        data = committed(version)
        if data is not None:
            return data
    folder = prepare(version)
    key = dump_key()
    cached = folder / f"api-{key}.json"
    if cached.is_file():
        return json.loads(cached.read_text())
    res = _run([sys.executable, str(DUMP_SCRIPT)], f"importing the TensorRT {version} bindings", timeout=120,
               env=environment(folder), cwd=str(folder))
    data = json.loads(res.stdout)
    tmp = cached.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(data))
    tmp.replace(cached)
    return data


def write_dumps() -> list[Path]:
    """Download every version's bindings and (re)write the committed dumps."""
    DUMPS.mkdir(exist_ok=True)
    written = []
    for version in VERSIONS:
        path = committed_path(version)
        data = {"dump_script": dump_key(), "api": api(version, fresh=True)}
        path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
        written.append(path)
    return written


if __name__ == "__main__":
    for written in write_dumps():
        print(f"wrote {written}")
