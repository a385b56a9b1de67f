"""The key of the engine cache (trtbuild.engine.cache): what must be equal for a stored engine to be reused.

    key = CacheKey.of(network, trt, weights_sha256=sha256_file("r50.wts"), options={"precision": "fp16", ...})
    key.digest        # 64 hex digits, the entry's name in the cache directory

A key has seven parts, each hashed on its own so that `trtbuild cache ls` and a debugging user can see
which one differs: the network's structure, the weights, the backend and its version, where the
engine runs (TensorRT-RTX targets, or the GPU a TensorRT engine is built for), the canonical build
options, the trtbuild version (the reference plan format and every builder belong to it) and the code
of the plugin libraries the network uses. The
key's own `version` (KEY_VERSION) is in its digest too: a key made another way is another key.

The structure hash is computed through TensorRT's network API only (``get_layer``, ``get_input``,
the layer's typed attributes), so the same code hashes reference, TensorRT and TensorRT-RTX
networks. Per layer, in order: its type, name, every input and output tensor (name, shape, dtype;
None for an unset optional input), and every public non-callable attribute of its typed class
(``IConvolutionLayer.stride_nd``, ``IActivationLayer.type``...), read generically from
``dir()`` after the downcast that TensorRT's bindings need. Weights attributes (``kernel``,
``bias``, a constant's ``weights``) enter as dtype and size only: their values are the weights part,
hashed separately from the weight file, which is what lets a stripped plan's key depend on the
weight names alone. Left out are attributes that do not change the engine's result: ``metadata``
(a free-form label), ``num_ranks`` (TensorRT-RTX only) and the weakly typed ``precision``/
``output_type`` settings that strongly typed networks ignore. The optimization profile is not part of
a network (it lives in the builder config), so the options carry it (``batch``, ``profile``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from dataclasses import dataclass
from types import ModuleType
from typing import Iterable, Mapping

__all__ = ["KEY_VERSION", "CacheKey", "canonical_json", "network_structure_hash", "options_digest",
           "stripped_weights_digest", "target_of"]

#: how a key is made: part of every digest, so that a key made another way (an older trtbuild's) is a
#: miss, never a wrong hit. 2: the options part is every BuildOptions field that changes the engine.
KEY_VERSION = 4

#: layer attributes that do not change what the engine computes (see the module docstring)
IGNORED_ATTRIBUTES = frozenset({"metadata", "num_ranks", "precision", "precision_is_set", "name", "num_inputs",
                                "num_outputs"})


def canonical_json(value) -> str:
    """`value` as JSON with sorted keys and no spaces: equal values give equal text (tuples as lists)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=_plain)


def _plain(value):
    """JSON stand-in for dataclasses, enums, paths and sets in options."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if hasattr(value, "name") and type(value).__module__ != "builtins" and not isinstance(value, (str, bytes)):
        return str(value.name)
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    return str(value)


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _layer_classes(trt: ModuleType) -> dict[str, type]:
    """{"CONVOLUTION": trt.IConvolutionLayer, "ELEMENTWISE": trt.IElementWiseLayer, ...}: LayerType names
    without underscores -> the typed layer class, matched by name (``I<Name>Layer``)."""
    found = {}
    for attr in dir(trt):
        if attr.startswith("I") and attr.endswith("Layer") and attr != "ILayer":
            found[attr[1:-5].upper().replace("_", "")] = getattr(trt, attr)
    return found


def _value(value):
    """A JSON-able stand-in for one attribute value: enums by name, Dims as lists, weights as dtype and size."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return repr(value)
    if hasattr(value, "name") and hasattr(value, "value") and not hasattr(value, "size"):  # an enum member
        return str(value.name)
    if hasattr(value, "dtype") and hasattr(value, "size") and not isinstance(value, (tuple, list)):  # Weights, ndarray
        return {"weights": str(getattr(value.dtype, "name", value.dtype)), "size": int(value.size)}
    try:
        return [_value(v) for v in value]  # Dims, tuples
    except TypeError:
        return type(value).__name__


def _tensor(t) -> list | None:
    if t is None:
        return None
    return [t.name, [int(d) for d in t.shape], str(getattr(t.dtype, "name", t.dtype))]


def _attributes(layer, cls) -> dict:
    """The typed layer's public, non-callable attributes that change its result (see the module docstring)."""
    if cls is None:
        return {}
    try:
        layer.__class__ = cls  # get_layer gives an ILayer: downcast, as TensorRT's bindings need
    except TypeError:
        return {}
    found = {}
    for attr in sorted(dir(cls)):
        if attr.startswith("_") or attr in IGNORED_ATTRIBUTES or attr == "output_type":
            continue
        try:
            value = getattr(layer, attr)
        except Exception as e:  # noqa: BLE001 - any getter that refuses in this state (TensorRT raises for some)
            found[attr] = f"unreadable: {type(e).__name__}"
            continue
        if not callable(value):
            found[attr] = _value(value)
    return found


def network_structure_hash(network, trt: ModuleType) -> str:
    """sha256 (hex) of the network's structure: inputs, every layer in order and the outputs, read through
    TensorRT's network API (see the module docstring for what is included); weight values are not."""
    return _sha256(canonical_json(network_structure(network, trt)))


def network_structure(network, trt: ModuleType) -> dict:
    """The JSON-able structure :func:`network_structure_hash` hashes (trtbuild.engine.refit_verify compares two
    definitions' with it: a layer attribute computed from a weight's values)."""
    classes = _layer_classes(trt)
    parts = {"name": network.name,
             "inputs": [_tensor(network.get_input(i)) for i in range(network.num_inputs)],
             "outputs": [_tensor(network.get_output(i)) for i in range(network.num_outputs)], "layers": []}
    for li in range(network.num_layers):
        layer = network.get_layer(li)
        kind = str(getattr(layer.type, "name", layer.type))
        parts["layers"].append({
            "type": kind, "name": layer.name,
            "inputs": [_tensor(layer.get_input(j)) for j in range(layer.num_inputs)],
            "outputs": [_tensor(layer.get_output(j)) for j in range(layer.num_outputs)],
            "attributes": _attributes(layer, classes.get(kind.replace("_", ""))),
        })
    return parts


def stripped_weights_digest(names: Iterable[str]) -> str:
    """The weights part of a stripped plan's key: "names:" + sha256 of the sorted weight names (a stripped
    engine holds no weight values; they are refitted at load time)."""
    return "names:" + _sha256(canonical_json(sorted(set(names))))


def options_digest(options: Mapping) -> str:
    """sha256 (hex) of the canonical JSON of the build options (a dict or a dataclass)."""
    if dataclasses.is_dataclass(options) and not isinstance(options, type):
        options = dataclasses.asdict(options)
    return _sha256(canonical_json(dict(options)))


def target_of(trt: ModuleType, targets=None) -> str:
    """Where the engine runs: "targets sm86,sm89" for TensorRT-RTX (its default set when none are given),
    "<GPU> (compute capability X.Y)" for TensorRT, "any device" for the reference (its plans run anywhere)."""
    from trtbuild.backend import backend_kind

    from .device import device_info
    from .rtx import parse_targets, target_list

    kind = backend_kind(trt)
    if kind == "tensorrt-rtx":
        return "targets " + target_list(parse_targets(targets))
    if kind == "reference":
        return "any device"
    dev = device_info(trt)
    return f"{dev['gpu']} (compute capability {dev['compute_capability']})"


def plugin_code_digest(trt: ModuleType, network) -> str:
    """sha256 of the code of the plugins `network` uses: each plugin's name and version with the sha256 of the
    shared library real TensorRT loaded it from. A plugin library rebuilt with another kernel keeps its name and
    version, and a plan embeds neither its code nor its file, so without this an engine built with the old
    library would be a hit. "" for a network without plugin layers; a reference plugin (a PyTorch twin in
    trtbuild itself) is covered by the trtbuild version."""
    from .plugins import plugins_used
    from .serialize import sha256_file

    used = plugins_used(trt, network)
    if not used:
        return ""
    parts = []
    for p in sorted(used, key=lambda p: (p["plugin"], p["version"])):
        library = p.get("library")
        if library:
            code = sha256_file(library)
        else:
            code = "in-process"
        parts.append({"plugin": p["plugin"], "version": p["version"], "code": code})
    return _sha256(canonical_json(parts))


@dataclass(frozen=True)
class CacheKey:
    """Everything that must be equal for a cached engine to be reused (see the module docstring)."""

    network: str  #: network_structure_hash
    weights: str  #: sha256 of the weight file, or stripped_weights_digest for a stripped plan
    backend: str  #: "reference", "tensorrt" or "tensorrt-rtx"
    backend_version: str
    target: str  #: target_of
    options: str  #: options_digest
    trtbuild_version: str
    plugins: str = ""  #: plugin_code_digest ("" for a network without plugin layers)
    version: int = KEY_VERSION  #: KEY_VERSION

    @property
    def digest(self) -> str:
        """sha256 (hex, 64 digits) of all parts: the entry's name; stable across processes and machines."""
        return _sha256(canonical_json(dataclasses.asdict(self)))

    @property
    def short(self) -> str:
        """The first 16 hex digits of the digest (how the CLI prints it)."""
        return self.digest[:16]

    @classmethod
    def of(cls, network, trt: ModuleType, *, weights_sha256: str | None = None, weight_names=None,
           options: Mapping = (), targets=None) -> "CacheKey":
        """The key of building `network` with `trt`: give `weights_sha256` (the weight file's), or
        `weight_names` for a stripped plan (whose key then ignores the values)."""
        from trtbuild import __version__
        from trtbuild.backend import backend_kind

        if (weights_sha256 is None) == (weight_names is None):
            raise ValueError("CacheKey.of needs exactly one of weights_sha256 (a full plan) and weight_names "
                             "(a stripped plan)")
        if weights_sha256 is not None and not re.fullmatch(r"[0-9a-f]{64}", weights_sha256):
            raise ValueError(f"weights_sha256 {weights_sha256!r} is not a sha256 hex digest")
        weights = weights_sha256 if weight_names is None else stripped_weights_digest(weight_names)
        return cls(network=network_structure_hash(network, trt), weights=weights, backend=backend_kind(trt),
                   backend_version=str(trt.__version__), target=target_of(trt, targets),
                   options=options_digest(dict(options) if not dataclasses.is_dataclass(options) else options),
                   trtbuild_version=__version__, plugins=plugin_code_digest(trt, network))
