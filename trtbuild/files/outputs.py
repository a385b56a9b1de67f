"""Refuse output paths that would destroy a file the user owns, before any work is done.

    check_outputs(outputs=[("--out", "r.engine", ENGINE), ("the sidecar of --out", "r.engine.json", JSON)],
                  inputs=[("--weights", "r.wts")])

Every command writing files (engines and their sidecars, parity reports, PNG charts, ONNX files,
weight files, timing caches) passes its output paths through :func:`check_outputs` first. It raises
:class:`OutputPathError` (one sentence naming the option, the path and why) when an output

* is an existing directory;
* is one of the command's inputs (the same file after resolving symlinks; hard links too);
* is the same file as another output of the command (``--json r.html --html r.html``);
* exists and holds another kind of file than the one to be written: the content is sniffed
  (:func:`file_kind`), and only a file of the same kind (an engine over an engine, a parity report
  over a parity report) or an empty file may be replaced. JSON files are told apart by their
  content: an engine's sidecar (SIDECAR), a calibration file (CALIBRATION), a parity report
  (PARITY_REPORT), export-triton's marker (TRITON_MARKER); any other JSON (JSON) is replaced only
  by an output declared as plain JSON (``{}`` counts as an empty file);
* ends in a path separator (``-o newdir/``), or has an existing file among its parents.

Nothing is read beyond the first bytes of each file (a file that looks like ONNX is parsed to
make sure, a JSON file is parsed to know which kind it is) and nothing is written. Stdlib only:
this sits in the lowest layer so that every writer can use it.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable, Sequence
from pathlib import Path

from .atomic import AtomicWriteError

__all__ = ["CALIBRATION", "ENGINE", "HTML", "JSON", "ONNX", "PARITY_REPORT", "PARITY_REPORT_KIND", "PNG", "PT",
           "SAFETENSORS", "SIDECAR", "TIMING_CACHE", "TRITON_MARKER", "WTS", "OutputPathError", "check_outputs",
           "file_kind", "same_file"]

# Kinds of files (the values are what messages call them).
ENGINE = "engine"
JSON = "JSON file"  # JSON of no kind below (e.g. debug precision's --json)
SIDECAR = "engine sidecar"  # trtbuild.engine.serialize.make_sidecar: engine_sha256, tensorrt_version
CALIBRATION = "calibration file"  # trtbuild.quant.calibfile: "format": "trtbuild-calibration"
PARITY_REPORT = "parity report"  # trtbuild.parity.compare.Report.to_dict: "kind": PARITY_REPORT_KIND
TRITON_MARKER = "export-triton marker"  # trtbuild.serving.repository.MARKER: "written_by": "trtbuild export-triton"
HTML = "HTML file"
PNG = "PNG image"
ONNX = "ONNX model"
WTS = ".wts weight file"
SAFETENSORS = "safetensors weight file"
PT = "PyTorch checkpoint"
TIMING_CACHE = "timing cache"
EMPTY = "empty file"
UNKNOWN = "file of unknown content"

# First bytes of each kind. The engine signatures are those of trtbuild.reference.plan.MAGIC,
# trtbuild.engine.serialize.RTX_MAGIC and TensorRT's own plans; the reference timing cache is
# trtbuild.reference.builder's (tests check that these stay in step).
REFERENCE_PLAN_MAGIC = b"TRTBREF\x01"
REFERENCE_TIMING_CACHE_MAGIC = b"TRTBREF-TIMING\x01"
_ENGINE_MAGICS = {REFERENCE_PLAN_MAGIC: "reference engine", b"vtrt": "TensorRT-RTX engine", b"ftrt": "TensorRT engine"}
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_ZIP_MAGIC = b"PK\x03\x04"  # torch.save's default format is a zip archive
# torch.save(..., _use_new_zipfile_serialization=False): a pickle starting with torch's magic number
_TORCH_LEGACY_MAGIC = b"\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19"
_HEAD_BYTES = 4096
_JSON_PARSE_BYTES = 64 << 20  # larger JSON files are not parsed: "a JSON file"
CALIBRATION_FORMAT = "trtbuild-calibration"  # trtbuild.quant.calibfile.FORMAT (tests check that they stay in step)
PARITY_REPORT_KIND = "trtbuild-parity-report"
_PARITY_REPORT_KEYS = {"passed", "atol", "rtol", "outputs", "first_failure"}  # reports written before the "kind" key

#: kinds that an output of the given kind may replace (besides an empty file).
_REPLACEABLE = {TIMING_CACHE: {TIMING_CACHE, UNKNOWN}}  # TensorRT's cache has no known header: TensorRT judges it


class OutputPathError(AtomicWriteError):
    """An output path would destroy an input or a file of another kind; nothing was written."""


def _head(path: Path) -> bytes:
    with open(path, "rb") as f:
        return f.read(_HEAD_BYTES)


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value, shift = 0, 0
    while pos < len(data) and shift < 64:
        byte = data[pos]
        value |= (byte & 0x7F) << shift
        pos += 1
        if not byte & 0x80:
            return value, pos
        shift += 7
    return -1, pos


# Tags of ModelProto's fields after ir_version (field 1): producer_name .. opset_import, metadata_props,
# training_info, functions (protobuf writes fields in number order, so one of these follows ir_version).
_ONNX_NEXT_TAGS = {0x12, 0x1A, 0x22, 0x28, 0x32, 0x3A, 0x42, 0x72, 0xA2, 0xCA}


def _looks_like_onnx(head: bytes) -> bool:
    if len(head) < 3 or head[0] != 0x08:  # field 1 (ir_version), varint
        return False
    version, pos = _varint(head, 1)
    return 1 <= version <= 100 and pos < len(head) and head[pos] in _ONNX_NEXT_TAGS


def _parses_as_onnx(path: Path) -> bool:
    try:
        import onnx

        onnx.load_model(str(path), load_external_data=False)
        return True
    except Exception:  # noqa: BLE001 - not installed, or not a model (protobuf raises its own errors)
        return False


def _looks_like_safetensors(head: bytes, size: int) -> bool:
    if len(head) < 9:
        return False
    (header_len,) = struct.unpack("<Q", head[:8])
    if not (2 <= header_len <= size - 8 and head[8:9] == b"{"):
        return False
    header = head[8:8 + header_len]
    return len(header) < header_len or header.rstrip(b" ").endswith(b"}")  # padded with spaces


def _looks_like_wts(head: bytes) -> bool:
    lines = head.lstrip().split(b"\n", 2)
    if not lines[0].strip().isdigit():
        return False
    if len(lines) == 1 or not lines[1].strip():
        return True  # just the count (a file with 0 tensors, or a long first line cut off)
    words = lines[1].split()
    return len(words) >= 2 and words[1].isdigit()


def _text_kind(head: bytes) -> str | None:
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n").lower()
    if text[:1] in (b"{", b"["):
        return JSON
    if text.startswith((b"<!doctype html", b"<html")):
        return HTML
    return None


def _json_kind(path: Path, size: int) -> str:
    """Which trtbuild JSON file `path` is (SIDECAR, CALIBRATION, PARITY_REPORT, TRITON_MARKER), EMPTY for
    {}, [] or null (nothing to lose), else JSON."""
    import json

    if size > _JSON_PARSE_BYTES:
        return JSON
    try:
        data = json.loads(path.read_bytes())
    except (ValueError, UnicodeDecodeError):
        return JSON
    if data in ({}, [], None):
        return EMPTY  # nothing to lose
    if not isinstance(data, dict):
        return JSON
    if "engine_sha256" in data and "tensorrt_version" in data:
        return SIDECAR
    if data.get("format") == CALIBRATION_FORMAT:
        return CALIBRATION
    if data.get("kind") == PARITY_REPORT_KIND or _PARITY_REPORT_KEYS <= data.keys():
        return PARITY_REPORT
    if data.get("written_by") == "trtbuild export-triton":
        return TRITON_MARKER
    return JSON


def _engine_by_sidecar(path: Path, size: int) -> bool:
    """An engine of unknown header that trtbuild saved: its sidecar records its size and sha256."""
    import hashlib
    import json

    side = path.with_name(path.name + ".json")
    try:
        data = json.loads(side.read_text())
        if not isinstance(data, dict) or data.get("engine_bytes") != size or not data.get("engine_sha256"):
            return False
        digest = hashlib.sha256()
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 22), b""):
                digest.update(chunk)
        return digest.hexdigest() == data["engine_sha256"]
    except (OSError, ValueError):
        return False


def file_kind(path: str | os.PathLike) -> tuple[str, str]:
    """(kind, description) of the existing file `path`, from its content: kind is one of ENGINE,
    SIDECAR, CALIBRATION, PARITY_REPORT, TRITON_MARKER, JSON (any other JSON), HTML, PNG, ONNX, WTS,
    SAFETENSORS, PT, TIMING_CACHE, "empty file" or "file of unknown content"; the description is
    shown in messages ("a TensorRT-RTX engine")."""
    path = Path(path)
    size = path.stat().st_size
    if size == 0:
        return EMPTY, "an empty file"
    head = _head(path)
    if head.startswith(REFERENCE_TIMING_CACHE_MAGIC):
        return TIMING_CACHE, "a reference timing cache"
    for magic, name in _ENGINE_MAGICS.items():
        if head.startswith(magic):
            return ENGINE, f"a {name}"
    if head.startswith(PNG_SIGNATURE):
        return PNG, "a PNG image"
    if head.startswith((_ZIP_MAGIC, _TORCH_LEGACY_MAGIC)):
        return PT, "a PyTorch checkpoint"
    if _looks_like_safetensors(head, size):
        return SAFETENSORS, "a safetensors weight file"
    if _looks_like_wts(head):
        return WTS, "a .wts weight file"
    text = _text_kind(head)
    if text == JSON:
        text = _json_kind(path, size)
        return text, {JSON: "a JSON file", EMPTY: "an empty JSON file"}.get(text, f"a trtbuild {text}")
    if text is not None:
        return text, _a(text)
    if (_looks_like_onnx(head) or path.suffix.lower() == ".onnx") and _parses_as_onnx(path):
        return ONNX, "an ONNX model"
    if _engine_by_sidecar(path, size):
        return ENGINE, "an engine (its trtbuild sidecar says so)"
    return UNKNOWN, "a file of unknown content"


def same_file(a: str | os.PathLike, b: str | os.PathLike) -> bool:
    """True if `a` and `b` name the same file: the same inode when both exist (symlinks and hard
    links included), else the same path once symlinks and '..' are resolved."""
    try:
        if os.path.exists(a) and os.path.exists(b):
            return os.path.samefile(a, b)
    except OSError:
        pass
    return os.path.realpath(a) == os.path.realpath(b)


Output = Sequence  # (option, path, kind)
Input = Sequence  # (option, path) or (option, path, words naming it in messages)


def _a(kind: str) -> str:
    return f"an {kind}" if kind[0] in "aeiouAEIOH" else f"a {kind}"


def _shown(option: str, path) -> str:
    return f"{option} {path}"


def _check_parents(shown: str, path: Path, error: type[Exception]) -> None:
    """`error` if the nearest existing parent of `path` is not a directory (``-o calib.json/x.engine``)."""
    for parent in path.parents:
        if os.path.lexists(parent):
            if not parent.is_dir():
                raise error(f"the parent {parent} of {shown} is a file, not a directory; choose another path")
            return


def check_outputs(outputs: Iterable[Output], inputs: Iterable[Input] = (),
                  error: type[Exception] = OutputPathError) -> None:
    """Raise `error` (default OutputPathError) in one sentence unless every output may be written.

    outputs: (option, path, kind) triples, kind one of this module's kinds (what will be written);
    entries whose path is None are skipped. inputs: (option, path) pairs of files the command reads
    (None paths skipped; they need not exist yet, e.g. weights exported on first use), or (option,
    path, words) where messages should call the input `words` instead of "the input OPTION PATH".
    See the module docstring for the rules. Reads only the first bytes of existing outputs."""
    outputs = [(opt, p, kind) for opt, p, kind in outputs if p is not None]
    for option, path, _kind in outputs:
        if str(path).endswith(("/", os.sep)) and str(path).strip("/" + os.sep):
            raise error(f"{_shown(option, path)} ends in a path separator, so it names a directory; name a file "
                        "to write, not a directory")
    outputs = [(opt, Path(p), kind) for opt, p, kind in outputs]
    inputs = [(entry[0], Path(entry[1]), entry[2] if len(entry) > 2 else f"the input {_shown(entry[0], entry[1])}")
              for entry in inputs if entry[1] is not None]
    for i, (option, path, kind) in enumerate(outputs):
        shown = _shown(option, path)
        if str(path) in ("", "."):
            raise error(f"{option}: the path is empty; name the file to write")
        _check_parents(shown, path, error)
        if path.is_dir():
            raise error(f"{shown} is a directory; name a file to write, not a directory")
        for _in_option, in_path, in_words in inputs:
            if same_file(path, in_path):
                raise error(f"{shown} is the same file as {in_words}, so writing "
                            f"{_a(kind)} there would destroy it; choose another path")
        for other_option, other_path, other_kind in outputs[:i]:
            if same_file(path, other_path):
                raise error(f"{shown} is the same file as {_shown(other_option, other_path)}, so one "
                            f"output ({other_kind}) would overwrite the other ({kind}); give each its own path")
        if path.exists():
            try:
                found, description = file_kind(path)
            except OSError as e:
                raise error(f"{shown} exists but cannot be read ({e.strerror or e}), so it is not overwritten; "
                            "choose another path") from None
            if found != EMPTY and found != kind and found not in _REPLACEABLE.get(kind, ()):
                raise error(f"{shown} exists and is {description}, not {_a(kind)}, so it is not overwritten; "
                            "choose another path or delete the file")
