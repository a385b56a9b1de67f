"""Executes a deserialized reference plan with PyTorch."""

from __future__ import annotations

import warnings

import numpy as np
import torch

from . import lowbit
from .arithmetic import DEFAULT as DEFAULT_ARITHMETIC
from .core import NetworkError, RunFailure
from .enums import DataType, LayerType
from .execute import TORCH_DTYPE, run_layer
from .ops._control import execute
from .tf32 import no_tf32
from .infer import infer_layer
from .ops import op_for
from .shape_values import needed, record
from .layers import check_params
from .safetensors_blob import ALIGNMENT
from .plugins import PluginFieldCollection, PluginField, get_plugin_registry
from .enums import TensorRTPhase


class _NoWeights(dict):
    def __missing__(self, key):
        return None


def _rebuild_plugin(entry: dict, arrays: dict):
    spec = entry["plugin"]
    creator = get_plugin_registry().get_creator(spec["creator"], spec["version"], spec["namespace"])
    if creator is None:
        raise NetworkError(f"layer '{entry['name']}': plugin creator {spec['namespace']}::{spec['creator']} "
                           f"v{spec['version']} is not registered; import the module that registers it "
                           "(e.g. trtbuild.ops) before loading the engine")
    fields = PluginFieldCollection(PluginField(k, arrays[ref]) for k, ref in spec["fields"].items())
    return creator.create_plugin(spec["name"], fields, TensorRTPhase.RUNTIME)


_TORCH_ALIGNMENT = ALIGNMENT  # bytes: c10's CPU allocator alignment


def _weight_tensor(array: np.ndarray, dtype: DataType) -> torch.Tensor:
    """A tensor of a plan's weight array (a read-only view of the plan bytes; nothing writes
    weights in place), in memory of its own aligned as torch aligns it: CPU matmul and convolution
    kernels sum in another order on less aligned data, and the results would then differ from
    PyTorch's in the last bits. Already aligned arrays are shared."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "The given NumPy array is not writable")
        t = torch.from_numpy(array)
    if array.ctypes.data % _TORCH_ALIGNMENT:
        t = t.clone()
    if dtype == DataType.BF16:  # raw 16-bit patterns
        return t.view(torch.int16).view(torch.bfloat16) if t.dtype != torch.int16 else t.view(torch.bfloat16)
    if dtype in lowbit.STORAGE:  # INT4 values, FP4 codes, FP8 bytes: held as lowbit.holder says
        return lowbit.holder(dtype, t)
    return t


class PlanGraph:
    def __init__(self, header: dict, arrays: dict[str, np.ndarray]):
        self.header = header
        self.arithmetic = header.get("arithmetic", DEFAULT_ARITHMETIC)
        self.layers = []
        for entry in header["layers"]:
            types = entry.get("weight_types", {})
            weights = _NoWeights({k: _weight_tensor(arrays[ref], DataType(types.get(k, DataType.FLOAT)))
                                  for k, ref in entry["weights"].items()})
            for key in ("shift", "scale", "power", "bias"):
                if entry["type"] in ("SCALE", "CONVOLUTION", "DECONVOLUTION") and key not in weights:
                    weights[key] = None
            plugin = _rebuild_plugin(entry, arrays) if "plugin" in entry else None
            self.layers.append((LayerType[entry["type"]], entry, weights, plugin))
        self._device_weights: dict = {}
        self._need = needed(((op_for(ltype).cls if op_for(ltype) else object, _keys(entry["inputs"]),
                              [o["id"] for o in entry["outputs"]]) for ltype, entry, _, _ in self.layers),
                            [t["id"] for t in header["outputs"] if t.get("shape_tensor")])
        self._check_declared()
        self._steps = self._plan_steps()

    def _plan_steps(self) -> list:
        """The layers as steps: indices, and Regions that run the layers of an if-conditional or a loop
        (ops/_control.py); the same analysis refused anything else when the network was built."""
        from .ops._control import Node, build_steps
        from .ops.registry import op_for
        from .plan import PlanError

        nodes = [Node(k, getattr(op_for(ltype), "cls", None), entry["params"], entry["name"],
                      [None if i == -1 else i for i in entry["inputs"]], [o["id"] for o in entry["outputs"]])
                 for k, (ltype, entry, _, _) in enumerate(self.layers)]
        try:
            return build_steps(nodes, {t["id"] for t in self.header["outputs"]})
        except NetworkError as e:
            raise PlanError(str(e), "graph") from None

    def _check_declared(self) -> None:
        """Shape inference with the shapes the plan declares must give each layer the outputs the
        plan declares (the builder wrote them from that same inference); a layer whose params do
        not fit its kind, or whose tensors were altered, is refused naming the layer."""
        from .plan import PlanError

        shapes = {t["id"]: tuple(t["shape"]) for t in self.header["inputs"]}
        dtypes = {t["id"]: DataType(t["dtype"]) for t in self.header["inputs"]}
        values: dict = {}
        for ltype, entry, weights, plugin in self.layers:
            what = f"layer '{entry['name']}' ({ltype.name})"
            try:
                check_params(ltype, entry["params"], entry["name"])
                outs, dts = self._infer_entry(ltype, entry, weights, plugin, shapes, dtypes, values,
                                              _meta(entry, weights))
                outs, dts = [tuple(s) for s in outs], [DataType(d) for d in dts]
            except NetworkError as e:
                reason = str(e).removeprefix(f"layer '{entry['name']}': ")
                raise PlanError(f"{what} is refused: {reason}", "graph") from None
            except Exception as e:  # noqa: BLE001 - params of the wrong kind or type: KeyError, TypeError, ...
                raise PlanError(f"{what} has params {entry['params']!r} that do not fit its kind "
                                f"({type(e).__name__}: {e})", "graph") from None
            declared = [(tuple(o["shape"]), DataType(o["dtype"])) for o in entry["outputs"]]
            if declared != list(zip(outs, dts)):
                raise PlanError(f"{what} declares outputs {[(s, d.name) for s, d in declared]} but its inputs and "
                                f"params give {[(s, d.name) for s, d in zip(outs, dts)]}", "graph")
            for o in entry["outputs"]:
                shapes[o["id"]], dtypes[o["id"]] = tuple(o["shape"]), DataType(o["dtype"])
        for t in self.header["outputs"]:
            if (tuple(t["shape"]), DataType(t["dtype"])) != (shapes[t["id"]], dtypes[t["id"]]):
                raise PlanError(f"output '{t['name']}' declares shape {tuple(t['shape'])} and type "
                                f"{DataType(t['dtype']).name} but its tensor has {shapes[t['id']]} and "
                                f"{dtypes[t['id']].name}", "graph")

    def _infer_entry(self, ltype, entry, weights, plugin, shapes, dtypes, values, meta):
        """infer_layer for one plan entry, with its shape inputs' values; records the values of its outputs
        that shape inputs need (trtbuild.reference.shape_values)."""
        keys = _keys(entry["inputs"])
        ins = [shapes.get(i) for i in entry["inputs"]]
        in_types = [dtypes.get(i) for i in entry["inputs"]]
        outs, dts = infer_layer(ltype, entry["params"], meta, ins, in_types, entry["name"], plugin=plugin,
                                values=[values.get(k) for k in keys], keys=keys)
        record(op_for(ltype), entry["params"], weights, ins, in_types, keys, [o["id"] for o in entry["outputs"]],
               outs, dts, values, self._need, entry["name"])
        return outs, dts

    def infer_shapes(self, input_shapes: dict[str, tuple], input_values: dict[str, tuple] | None = None,
                     values: dict | None = None) -> dict[int, tuple]:
        """The shape of every tensor for these input shapes (and the values of shape tensor inputs); `values`
        receives the values of the tensors shape inputs and shape outputs need, by tensor id."""
        shapes = {t["id"]: tuple(input_shapes[t["name"]]) for t in self.header["inputs"]}
        dtypes = {t["id"]: DataType(t["dtype"]) for t in self.header["inputs"]}
        values = {} if values is None else values
        values.update((t["id"], tuple(input_values[t["name"]])) for t in self.header["inputs"]
                      if input_values and t["name"] in input_values)
        for ltype, entry, weights, plugin in self.layers:
            outs, dts = self._infer_entry(ltype, entry, weights, plugin, shapes, dtypes, values, _meta(entry, weights))
            for o, s, d in zip(entry["outputs"], outs, dts):
                shapes[o["id"]], dtypes[o["id"]] = tuple(s), d
        return shapes

    def _weights_on(self, device):
        if device not in self._device_weights:
            self._device_weights[device] = [
                _NoWeights({k: (v.to(device) if v is not None else None) for k, v in w.items()})
                for _, _, w, _ in self.layers]
        return self._device_weights[device]

    def run(self, feeds: dict[str, torch.Tensor], device, on_value=None) -> dict[str, torch.Tensor]:
        """on_value(tensor entry, value): called for each tensor a layer computes, once computed
        (debug tensors, trtbuild.reference.debug)."""
        values = {}
        for t in self.header["inputs"]:
            values[t["id"]] = feeds[t["name"]].to(device)
        all_weights = self._weights_on(device)

        def run_node(k: int, values: dict, inputs: list | None = None) -> None:
            """Run layer k on `values` (or on `inputs`, which a construct gives its boundary layers)."""
            ltype, entry, _, plugin = self.layers[k]
            if inputs is None:
                inputs = [values.get(i) for i in entry["inputs"]]
            try:
                outs = run_layer(ltype, entry["params"], all_weights[k], inputs,
                                 [DataType(o["dtype"]) for o in entry["outputs"]], plugin=plugin,
                                 arithmetic=self.arithmetic)
            except RunFailure as e:  # a failed assertion: the run stops, naming the layer
                raise RunFailure(f"layer '{entry['name']}': {e}") from None
            for o, v in zip(entry["outputs"], outs):
                values[o["id"]] = v
                if on_value is not None:
                    on_value(o, v)

        with no_tf32():  # float32 layers compute in true fp32, as TensorRT without BuilderFlag.TF32
            execute(self._steps, values, run_node)
        return {t["name"]: values[t["id"]] for t in self.header["outputs"]}


def _meta(entry: dict, weights) -> _WeightMeta:
    """The weight metadata of a plan entry: declared types, and the types of empty weights."""
    return _WeightMeta(weights, entry.get("weight_types", {}), entry.get("empty_weight_types"))


def _keys(ids) -> list:
    """Plan tensor ids as shape_values keys (None for an unset optional input)."""
    return [None if i == -1 else i for i in ids]


class _WeightMeta(dict):
    """Exposes .size/.dtype of plan weights to infer_layer, as Weights objects do: the type the plan gives a
    weight, else the one its tensor has (INT4 and FP4 weights are held in int8 and float8 tensors); `empty_types`
    gives the type of weights with no values (stored without an array), FLOAT where not given."""

    class _Meta:
        def __init__(self, t, declared=None):
            self.size = 0 if t is None else int(t.numel())
            self.dtype = (DataType(declared) if declared is not None else DataType.FLOAT if t is None
                          else {v: k for k, v in TORCH_DTYPE.items()}[t.dtype])

    def __init__(self, weights, types=None, empty_types=None):
        types = types or {}
        super().__init__({k: self._Meta(v, types.get(k)) for k, v in weights.items()})
        for key, dtype in (empty_types or {}).items():
            self[key] = self._Meta(None, dtype)

    def __missing__(self, key):
        return self._Meta(None)
