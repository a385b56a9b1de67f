"""The "Involution" plugin (version "1", namespace "trtbuild") for the reference backend.

It mirrors the C++ IPluginV3 plugin in ``plugins/involution`` field for field and check for
check (fields kernel_size, stride, padding, dilation, groups as int32; inputs x (N, C, H, W) and w
(N, G, K*K, Ho, Wo) or (N, G*K*K, Ho, Wo); FLOAT or HALF, both the same) and executes
:func:`trtbuild.ops.involution.involution_reference`.

Importing :mod:`trtbuild.ops` registers it, so reference plans that use it deserialize.
"""

from __future__ import annotations

import numpy as np

from trtbuild import reference as _ref
from trtbuild.ops.involution import involution_output_size, involution_reference

PLUGIN_NAME = "Involution"
PLUGIN_VERSION = "1"
PLUGIN_NAMESPACE = "trtbuild"
#: Field name -> (default or None when required, minimum value).
FIELD_SPECS = {
    "kernel_size": (None, 1),
    "stride": (1, 1),
    "padding": (0, 0),
    "dilation": (1, 1),
    "groups": (None, 1),
}

__all__ = ["PLUGIN_NAME", "PLUGIN_VERSION", "PLUGIN_NAMESPACE", "FIELD_SPECS", "InvolutionReferencePlugin",
           "InvolutionReferenceCreator", "parse_involution_fields", "register_reference_involution"]


def parse_involution_fields(fields: dict[str, np.ndarray], name: str) -> dict[str, int]:
    """Validate plugin fields as the C++ creator does; returns {field: int}. ValueError names the plugin."""
    # plugin_version / plugin_namespace select the plugin (ONNX node attributes); they configure nothing.
    fields = {k: v for k, v in fields.items() if k not in ("plugin_version", "plugin_namespace")}
    unknown = sorted(set(fields) - set(FIELD_SPECS))
    if unknown:
        raise ValueError(f"Involution plugin '{name}': unknown field(s) {unknown}; expected {list(FIELD_SPECS)}")
    values = {}
    for field, (default, minimum) in FIELD_SPECS.items():
        if field not in fields:
            if default is None:
                raise ValueError(f"Involution plugin '{name}': field '{field}' is required")
            values[field] = default
            continue
        data = np.asarray(fields[field])
        if data.size != 1 or data.dtype.kind not in "iu":
            raise ValueError(f"Involution plugin '{name}': field '{field}' must hold one integer (INT32), "
                             f"got {data.dtype} array of size {data.size}")
        value = int(data.reshape(-1)[0])
        if value < minimum or value > np.iinfo(np.int32).max:
            raise ValueError(f"Involution plugin '{name}': field '{field}'={value} must be in "
                             f"[{minimum}, {np.iinfo(np.int32).max}]")
        values[field] = value
    return values


class InvolutionReferencePlugin(_ref.IPluginV3):
    """Reference twin of the C++ InvolutionPlugin: shape/type rules and the unfold reference op."""

    def __init__(self, name: str, fields: dict[str, np.ndarray], creator: "InvolutionReferenceCreator"):
        self.params = parse_involution_fields(fields, name)
        # What gets serialized: the normalized int32 fields, exactly as the C++ plugin serializes them.
        normalized = {k: np.array([v], dtype=np.int32) for k, v in self.params.items()}
        super().__init__()
        self._setup(name, normalized, creator)

    def _describe(self) -> str:
        p = self.params
        return (f"Involution plugin '{self._name}' (kernel_size={p['kernel_size']}, stride={p['stride']}, "
                f"padding={p['padding']}, dilation={p['dilation']}, groups={p['groups']})")

    def _output_shapes(self, input_shapes):
        if len(input_shapes) != 2:
            raise ValueError(f"{self._describe()}: expects 2 inputs (x, w), got {len(input_shapes)}")
        x, w = (tuple(int(d) for d in s) for s in input_shapes)
        p = self.params
        k, g = p["kernel_size"], p["groups"]
        kk = k * k
        if len(x) != 4:
            raise ValueError(f"{self._describe()}: x must be 4-D (N, C, H, W), got {x}")
        if len(w) not in (4, 5):
            raise ValueError(f"{self._describe()}: w must be (N, {g}, {kk}, Ho, Wo) or (N, {g * kk}, Ho, Wo), got {w}")
        n, c, h, wd = x
        if c >= 0 and c % g:
            raise ValueError(f"{self._describe()}: channels of x ({c}) must be divisible by groups ({g})")
        if n >= 0 and w[0] >= 0 and w[0] != n:
            raise ValueError(f"{self._describe()}: batch of w {w} differs from batch of x {x}")
        head = w[1:3] if len(w) == 5 else w[1:2]
        want = (g, kk) if len(w) == 5 else (g * kk,)
        if any(have >= 0 and have != need for have, need in zip(head, want)):
            raise ValueError(f"{self._describe()}: w must be (N, {g}, {kk}, Ho, Wo) or (N, {g * kk}, Ho, Wo), got {w}")
        out_hw = []
        for extent, w_extent in zip((h, wd), w[-2:]):
            if extent < 0:
                out_hw.append(-1)
                continue
            o = involution_output_size(extent, k, p["stride"], p["padding"], p["dilation"])
            if o < 1:
                raise ValueError(f"{self._describe()}: x {x} is too small (output extent {o})")
            if w_extent >= 0 and w_extent != o:
                raise ValueError(f"{self._describe()}: w {w} must have spatial extents (Ho, Wo) "
                                 f"of the output for x {x}")
            out_hw.append(o)
        return [(n, c, out_hw[0], out_hw[1])]

    def _output_dtypes(self, input_dtypes):
        dtypes = [_ref.DataType(d) for d in input_dtypes]
        if len(dtypes) != 2 or dtypes[0] not in (_ref.DataType.FLOAT, _ref.DataType.HALF) or dtypes[1] != dtypes[0]:
            raise ValueError(f"{self._describe()}: x and w must both be FLOAT or both be HALF, got "
                             f"{[d.name for d in dtypes]}")
        return [dtypes[0]]

    def _execute(self, inputs):
        x, w = inputs
        p = self.params
        return [involution_reference(x, w, p["kernel_size"], p["stride"], p["padding"], p["dilation"], p["groups"])]


class InvolutionReferenceCreator(_ref.IPluginCreatorV3One):
    """Creator of :class:`InvolutionReferencePlugin` (name "Involution", version "1")."""

    name = PLUGIN_NAME
    plugin_version = PLUGIN_VERSION
    plugin_namespace = PLUGIN_NAMESPACE

    def __init__(self):
        self.field_names = _ref.PluginFieldCollection(
            _ref.PluginField(field, np.zeros(1, dtype=np.int32), _ref.PluginFieldType.INT32) for field in FIELD_SPECS)

    def create_plugin(self, name, field_collection, phase):
        fields = {}
        for f in field_collection:
            if f.name in fields:
                raise ValueError(f"Involution plugin '{name}': field '{f.name}' given twice")
            fields[f.name] = np.asarray(f.data)
        return InvolutionReferencePlugin(str(name), fields, self)


def register_reference_involution(trt) -> InvolutionReferenceCreator:
    """Register the reference Involution creator in ``trt``'s plugin registry (idempotent).

    ``trt`` must be :mod:`trtbuild.reference`; for real TensorRT load the compiled library with
    :func:`trtbuild.layers.involution.load_plugin_library` instead. Returns the registered creator.
    """
    if getattr(trt, "__name__", "") != _ref.__name__:
        raise TypeError(f"register_reference_involution needs the trtbuild.reference module, got "
                        f"{getattr(trt, '__name__', trt)!r}; real TensorRT loads libtrtbuild_involution_plugin.so "
                        "(trtbuild.layers.involution.load_plugin_library)")
    registry = trt.get_plugin_registry()
    existing = registry.get_creator(PLUGIN_NAME, PLUGIN_VERSION, PLUGIN_NAMESPACE)
    if existing is not None:
        return existing
    creator = InvolutionReferenceCreator()
    if not registry.register_creator(creator, PLUGIN_NAMESPACE):
        raise RuntimeError(f"could not register the reference {PLUGIN_NAMESPACE}::{PLUGIN_NAME} "
                           f"v{PLUGIN_VERSION} creator")
    return creator
