"""The calibration file (JSON): write it atomically, read it back refusing any that does not fit.

    write_calibration(calib, "calib.json")
    calib = load_calibration("calib.json", spec, small=True)      # or (path, nn.Module) / (path) alone

Format (``format_version`` 1)::

    {"format": "trtbuild-calibration", "format_version": 1, "trtbuild_version": "0.1.0",
     "model": "resnet18", "small": true, "precision": "int8" | null,
     "method": {"name": "percentile", "percentile": 99.99, "num_bins": 2048},
     "data": {"kind": "folder" | "iterable" | "random", "description": "...", "sha256": "...",
              "batches": 4, "samples": 32, "sample_shape": [3, 64, 64]},
     "weights_source": "weights/resnet18-small.wts" | "seeded PyTorch model (seed 0)",
     "weights_sha256": "<trtbuild.quant.calibrate.weights_sha256 of the model calibrated>",
     "fingerprint": "<sha256 of the canonical JSON of shapes>",
     "shapes": {"activations": {"conv1.input": [3, 64, 64], ...}, "weights": {"conv1.weight": [8, 3, 7, 7], ...}},
     "activations": {"conv1.input": 2.71, "layer1.0.output": 3.05, ...},     # amax per tensor
     "weights": {"conv1.weight": [0.41, 0.38, ...], ...},                      # amax per output channel
     "adds": {"layer1.0.add": ["layer1.0.bn2.output", "maxpool.output"], ...},
     "add_sources": {"layer1.0.add": ["layer1.0.conv2", null], ...},          # Conv/Linear feeding each input
     "modules": ["conv1", "bn1", ...], "all_zero": [...]}

``weights_sha256`` (added after the first files were written; same format version): a file is
refused for other weights (:func:`check_weights`); a file without it is used with a warning.
``add_sources`` (added later too): which input of each residual add is the output of a Conv/Linear
(BatchNorm folded), so a build tells the identity input from the graph; a file without it counts
the second operand as the identity.

Activation keys are ``<module>.input`` (input of a Conv/Linear) and ``<module>.output`` (a tensor
feeding a residual add); see trtbuild.quant.record. Shapes of activations are per sample (no batch).
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
from pathlib import Path

from torch import nn

from trtbuild import __version__
from trtbuild.files.atomic import AtomicWriteError, atomic_write

from .calibrate import Calibration, network_tensors
from .data import shape_text

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "CalibrationFileError",
    "check_calibration_path",
    "check_network",
    "check_weights",
    "fingerprint",
    "load_calibration",
    "to_dict",
    "write_calibration",
]

log = logging.getLogger(__name__)

FORMAT = "trtbuild-calibration"
FORMAT_VERSION = 1


class CalibrationFileError(ValueError):
    """A calibration file that cannot be used (the message names the file and why)."""


def fingerprint(shapes: dict) -> str:
    """sha256 of the names and shapes of the quantized tensors (canonical JSON)."""
    canonical = {kind: {k: [int(d) for d in v] for k, v in sorted(shapes.get(kind, {}).items())}
                 for kind in ("activations", "weights")}
    return hashlib.sha256(json.dumps(canonical, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def to_dict(calib: Calibration) -> dict:
    return {"format": FORMAT, "format_version": FORMAT_VERSION, "trtbuild_version": __version__,
            "model": calib.model, "small": calib.small, "precision": calib.precision, "method": calib.method,
            "data": calib.data, "weights_source": calib.weights_source,
            **({"weights_sha256": calib.weights_sha256} if calib.weights_sha256 else {}),
            "fingerprint": fingerprint(calib.shapes),
            "shapes": calib.shapes, "activations": calib.activations, "weights": calib.weights, "adds": calib.adds,
            "add_sources": calib.add_sources, "modules": calib.modules, "all_zero": calib.all_zero}


def _dumps(value, indent: str = "") -> str:
    """JSON with one key per line and every list on one line."""
    if isinstance(value, dict) and value:
        inner = indent + " "
        items = ",\n".join(f"{inner}{json.dumps(k)}: {_dumps(v, inner)}" for k, v in value.items())
        return "{\n" + items + "\n" + indent + "}"
    return json.dumps(value)


def write_calibration(calib: Calibration, path) -> Path:
    """Write `calib` as JSON to `path` atomically (a failure leaves an existing file untouched)."""
    text = _dumps(to_dict(calib)) + "\n"
    return atomic_write(path, lambda tmp: tmp.write_text(text), AtomicWriteError)


def _refuse(path, why: str):
    raise CalibrationFileError(f"calibration file {path} {why}")


def _check_amax(path, data: dict) -> None:
    for key, value in data["activations"].items():
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value) or value <= 0:
            _refuse(path, f"gives tensor {key} the amax {value!r}; every amax must be a finite number > 0 "
                          "(recalibrate)")
    for key, values in data["weights"].items():
        shape = data["shapes"]["weights"].get(key)
        if not isinstance(values, list) or shape is None or len(values) != shape[0]:
            _refuse(path, f"gives weight {key} {len(values) if isinstance(values, list) else 'no list of'} "
                          f"amax values for {shape[0] if shape else 'no recorded'} output channels")
        bad = [v for v in values if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v)
               or v <= 0]
        if bad:
            _refuse(path, f"gives weight {key} the amax {bad[0]!r}; every amax must be a finite number > 0 "
                          "(recalibrate)")
    missing = [k for k in data["shapes"]["activations"] if k not in data["activations"]]
    missing += [k for k in data["shapes"]["weights"] if k not in data["weights"]]
    if missing:
        _refuse(path, f"has no amax for {missing[0]} (the file is incomplete or was edited)")


def _read(path) -> dict:
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        raise CalibrationFileError(f"calibration file {path} does not exist") from None
    except (OSError, UnicodeDecodeError) as e:
        raise CalibrationFileError(f"calibration file {path} cannot be read ({e})") from None
    try:
        data = json.loads(text)
    except ValueError:
        _refuse(path, "is not JSON; write one with `trtbuild calibrate`")
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        _refuse(path, f"is not a trtbuild calibration file (no \"format\": \"{FORMAT}\"); write one with "
                      "`trtbuild calibrate`")
    version = data.get("format_version")
    if version != FORMAT_VERSION:
        _refuse(path, f"has format version {version!r}, which this trtbuild ({__version__}) does not read (it "
                      f"reads version {FORMAT_VERSION}); recalibrate with this trtbuild")
    for key, kind in (("shapes", dict), ("activations", dict), ("weights", dict), ("adds", dict), ("modules", list),
                      ("method", dict), ("model", str)):
        if not isinstance(data.get(key), kind):
            _refuse(path, f"lacks its \"{key}\" entry (a {kind.__name__}); the file is damaged or was edited")
    sources = data.get("add_sources", {})
    if not isinstance(sources, dict) or any(
            not isinstance(v, list) or len(v) != 2 or not all(s is None or isinstance(s, str) for s in v)
            for v in sources.values()):
        _refuse(path, "has an \"add_sources\" entry that is not {add: [module or null, module or null]}; the file "
                      "is damaged or was edited")
    if not all(isinstance(data["shapes"].get(k), dict) for k in ("activations", "weights")):
        _refuse(path, "lacks the activation or weight shapes; the file is damaged or was edited")
    if data.get("fingerprint") != fingerprint(data["shapes"]):
        _refuse(path, "has a fingerprint that does not match the tensors it lists; the file was edited or damaged "
                      "(recalibrate)")
    _check_amax(path, data)
    return data


def _first_difference(found: dict, recorded: dict) -> str | None:
    for kind in ("activations", "weights"):
        mine, theirs = found[kind], recorded[kind]
        for key, shape in mine.items():
            if key not in theirs:
                return f"the network's {kind[:-1]} tensor {key} ({shape_text(shape)}) is not in the file"
            if list(theirs[key]) != list(shape):
                return (f"tensor {key} is {shape_text(shape)} in the network but {shape_text(theirs[key])} in the "
                        "file")
        extra = [k for k in theirs if k not in mine]
        if extra:
            return f"the file's tensor {extra[0]} is not in the network"
    return None


def check_network(path, data: dict, module, sample_shape) -> None:
    """Refuse (CalibrationFileError) unless the file's tensors are exactly `module`'s."""
    why = _first_difference(network_tensors(module, sample_shape), data["shapes"])
    if why:
        _refuse(path, f"was made for another network than model '{data['model']}' as given here: {why}")


def _from_dict(data: dict) -> Calibration:
    return Calibration(model=data["model"], method=data["method"], activations=data["activations"],
                       weights=data["weights"], shapes=data["shapes"], adds=data["adds"], modules=data["modules"],
                       data=data.get("data") or {}, small=data.get("small"), precision=data.get("precision"),
                       weights_source=data.get("weights_source"), all_zero=data.get("all_zero") or [],
                       weights_sha256=data.get("weights_sha256"), add_sources=data.get("add_sources") or {})


def check_calibration_path(path) -> None:
    """Refuse (CalibrationFileError, one sentence) a --calibration path that is missing or a directory,
    before anything reads or hashes it."""
    if os.path.isdir(path):
        raise CalibrationFileError(f"--calibration {path} is a directory, not a calibration file")
    if not os.path.exists(path):
        raise CalibrationFileError(f"--calibration {path} does not exist")


def check_weights(path, calib: Calibration, actual: str | None, weights_name: str | None) -> None:
    """Refuse (CalibrationFileError, one sentence) a calibration file made with other weights than
    those with weights_sha256 `actual` (None: unknown, not checked) (`weights_name`: the weight file,
    None for the seeded model); warn if the file records no weights hash (made before trtbuild
    recorded it)."""
    if not calib.weights_sha256:
        log.warning("calibration file %s records no weights sha256, so it cannot be checked against the weights "
                    "it is applied to; recalibrate to have it checked", path)
        return
    if actual is not None and actual != calib.weights_sha256:
        given = weights_name or "the seeded PyTorch model"
        redo = f"--weights {weights_name}" if weights_name else "no --weights (the seeded model)"
        raise CalibrationFileError(
            f"{path} was calibrated with other weights (sha256 {calib.weights_sha256[:12]}… of "
            f"{calib.weights_source or 'its weights'}, but {given} has {actual[:12]}…); recalibrate with {redo}")


def load_calibration(path: str | os.PathLike, model=None, *, small: bool | None = None, module=None) -> Calibration:
    """Read a calibration file, refusing in one sentence (CalibrationFileError, a ValueError) one that
    is not a calibration file, has an unknown format version, an edited fingerprint, a missing,
    non-finite or non-positive amax, or does not match the network.

    model: an nn.Module (checked with the file's recorded sample shape), a ModelSpec (its name must be the file's; its
    PyTorch model, built with `small`, or
    `module`, must have exactly the file's tensors), a model name (checked against the file's), or
    None (no network check). small: the size variant requested (checked against the file's; None:
    the file's)."""
    data = _read(path)
    if isinstance(model, nn.Module):
        model, module = None, model
    name = getattr(model, "name", model)
    if name is not None and data["model"] != name:
        _refuse(path, f"was made for model '{data['model']}', not '{name}'; calibrate '{name}' "
                      f"(`trtbuild calibrate {name} ...`)")
    recorded_small = data.get("small")
    if small is not None and recorded_small is not None and bool(recorded_small) != bool(small):
        variant = "the small variant (--small)" if recorded_small else "the full-size model (no --small)"
        _refuse(path, f"was made for {variant} of '{data['model']}'; {'add' if recorded_small else 'drop'} --small "
                      "or recalibrate")
    if hasattr(model, "input_shape"):
        small = bool(recorded_small if small is None else small)
        sample_shape = tuple(model.input_shape(small))[1:]
        if module is None:
            module = model.torch_factory(0, small)
        check_network(path, data, module, sample_shape)
    elif module is not None:
        sample_shape = (data.get("data") or {}).get("sample_shape")
        if not sample_shape:
            _refuse(path, "does not record the input's sample shape, so it cannot be checked against the module")
        check_network(path, data, module, tuple(sample_shape))
    return _from_dict(data)
