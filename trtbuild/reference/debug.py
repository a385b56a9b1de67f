"""Debug tensors of the reference backend, with the API of TensorRT 10.x/11.x and TensorRT-RTX 1.x.

Network (build time): `mark_debug(tensor)`, `unmark_debug(tensor)`, `is_debug_tensor(tensor)`,
`mark_unfused_tensors_as_debug_tensors()`, `unmark_unfused_tensors_as_debug_tensors()`, all
returning bool. The marks are serialized in the plan header under "debug" (absent when there are
none, so a plan without marks is byte for byte the plan of the same network). A marked tensor that
no network output depends on is kept with the layers computing it, as TensorRT-RTX keeps it; a
marked network input is refused by the build, as TensorRT-RTX refuses it.
Engine: `is_debug_tensor(name)` (tensors marked with mark_debug only, as on TensorRT).
Execution context: `set_debug_listener(listener)`, `get_debug_listener()`,
`set_tensor_debug_state(name, flag)`, `get_debug_state(name)`, `set_all_tensors_debug_state(flag)`
and the property `unfused_tensors_debug_state`. Every debug state is off until turned on, as on
TensorRT.

After a layer computes a debug tensor whose debug state is on, execute_async_v3 calls
`listener.process_debug_tensor(addr, location, type, shape, name, stream)` once per execution, in
TensorRT's argument order. On the reference:
  * `addr` is a PyCapsule (no capsule name), as TensorRT's bindings give, holding the data_ptr()
    of a contiguous torch tensor that stays alive for the duration of the callback (an int 0 for
    an empty tensor); `capsule_address(addr)` reads it back;
  * `location` is TensorLocation.DEVICE when the reference runs on CUDA, HOST on the CPU;
  * `stream` is the stream handle given to execute_async_v3 (0 on the CPU).
`tensor_at(addr, location, type, shape)` wraps such a buffer as a torch tensor (no copy), on the
reference and on real TensorRT alike: clone it inside the callback to keep it.

"Unfused" on the reference: the reference fuses no layer, so mark_unfused_tensors_as_debug_tensors
marks every tensor a layer of the engine computes (network outputs included), reported under its
network name. As on TensorRT, is_debug_tensor does not see these marks.
"""

from __future__ import annotations

import ctypes

from .core import ITensor, NetworkError
from .enums import DataType, TensorLocation

_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype, _capsule_new.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_capsule_name = ctypes.pythonapi.PyCapsule_GetName
_capsule_name.restype, _capsule_name.argtypes = ctypes.c_char_p, [ctypes.py_object]
_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype, _capsule_pointer.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]


def address_capsule(address: int):
    """A PyCapsule holding `address`, as TensorRT's bindings pass a debug tensor's address (0: the int 0)."""
    return _capsule_new(int(address), None, None) if address else 0


def capsule_address(addr) -> int:
    """The address in a debug listener's `addr`: a PyCapsule (TensorRT, the reference) or an int."""
    if isinstance(addr, int):
        return addr
    return int(_capsule_pointer(addr, _capsule_name(addr)) or 0)


def tensor_at(addr, location, type, shape):
    """A torch tensor viewing the debug tensor at `addr` (a capsule or int), without copying:
    `type` a TensorRT DataType (real or reference; matched by name), `location` a TensorLocation
    (DEVICE: the current CUDA device)."""
    import torch

    from .runtime_buffers import _wrap

    dtype = DataType[getattr(type, "name", str(type).split(".")[-1])]
    on_device = getattr(location, "name", str(location).split(".")[-1]) == "DEVICE"
    dev = torch.device("cuda", torch.cuda.current_device()) if on_device else torch.device("cpu")
    return _wrap(capsule_address(addr), tuple(int(d) for d in shape), dtype, dev)


class IDebugListener:
    """TensorRT's IDebugListener: subclass it, call IDebugListener.__init__(self), override
    process_debug_tensor."""

    def __init__(self):
        pass

    def process_debug_tensor(self, addr, location, type, shape, name, stream):
        raise NotImplementedError("IDebugListener.process_debug_tensor must be overridden by a subclass")


class NetworkDebugMarks:
    """INetworkDefinition's debug-tensor marks (mixed into the reference INetworkDefinition)."""

    def _debug_state(self) -> dict:
        return self.__dict__.setdefault("_debug", {"tensors": [], "unfused": False})

    def mark_debug(self, tensor: ITensor) -> bool:
        tensor = self._own(tensor, "mark_debug")
        marks = self._debug_state()["tensors"]
        if not any(t is tensor for t in marks):
            marks.append(tensor)
            self._touch()
        return True

    def unmark_debug(self, tensor: ITensor) -> bool:
        tensor = self._own(tensor, "unmark_debug")
        marks = self._debug_state()["tensors"]
        kept = [t for t in marks if t is not tensor]
        if len(kept) != len(marks):
            marks[:] = kept
            self._touch()
        return True

    def is_debug_tensor(self, tensor: ITensor) -> bool:
        if not isinstance(tensor, ITensor):
            raise NetworkError(f"is_debug_tensor: expected an ITensor, got {type(tensor).__name__}")
        return any(t is tensor for t in self._debug_state()["tensors"])

    def mark_unfused_tensors_as_debug_tensors(self) -> bool:
        self._debug_state()["unfused"] = True
        self._touch()
        return True

    def unmark_unfused_tensors_as_debug_tensors(self) -> bool:
        self._debug_state()["unfused"] = False
        self._touch()
        return True


def debug_roots(network) -> list:
    """The tensors marked with mark_debug: the engine keeps the layers computing them, as
    TensorRT-RTX does (its engine grows by a debug tensor that no output needs)."""
    return list(network.__dict__.get("_debug", {}).get("tensors", []))


def debug_header(network, ids: dict) -> dict:
    """The plan header's "debug" entry ({} without marks): the marked tensors (`ids`: id(ITensor)
    -> plan tensor id) and whether unfused tensors are marked. NetworkError for a marked network
    input, which TensorRT-RTX's builder refuses ("debug output for x has no runners that implement it")."""
    state = network.__dict__.get("_debug")
    if not state or not (state["tensors"] or state["unfused"]):
        return {}
    inputs = [t.name for t in state["tensors"] if any(t is i for i in network._inputs)]
    if inputs:
        raise NetworkError(f"network input(s) {inputs} are marked as debug tensors (mark_debug); TensorRT builds no "
                           "debug output for a network input: mark the tensor a layer computes from it instead")
    kept = [{"id": ids[id(t)], "name": t.name} for t in state["tensors"]]
    return {"debug": {"tensors": kept, "unfused": bool(state["unfused"])}}


def check_debug_header(header: dict, need) -> None:
    """`need(ok, message)` for the plan header's "debug" entry, if any: its tensor ids exist."""
    if "debug" not in header:
        return
    debug = header["debug"]
    need(isinstance(debug, dict) and isinstance(debug.get("tensors"), list) and isinstance(debug.get("unfused"), bool),
         f"'debug' is {debug!r}, not an object with a 'tensors' list and an 'unfused' boolean")
    defined = {t.get("id") for t in header["inputs"] if isinstance(t, dict)}
    defined |= {o.get("id") for e in header["layers"] for o in e["outputs"] if isinstance(o, dict)}
    for i, t in enumerate(debug["tensors"]):
        need(isinstance(t, dict) and isinstance(t.get("name"), str) and t.get("id") in defined,
             f"debug tensors[{i}] is {t!r}, not an object naming a tensor id the plan defines")


class EngineDebugTensors:
    """ICudaEngine.is_debug_tensor (mixed into the reference ICudaEngine)."""

    def is_debug_tensor(self, name: str) -> bool:
        return any(t["name"] == name for t in self._header.get("debug", {}).get("tensors", []))


class ContextDebugState:
    """IExecutionContext's debug listener and debug states (mixed into the reference context)."""

    def _debug_state(self) -> dict:
        return self.__dict__.setdefault("_debug", {"listener": None, "on": set(), "unfused": False})

    def set_debug_listener(self, listener) -> bool:
        if listener is not None and not isinstance(listener, IDebugListener):
            raise NetworkError(f"set_debug_listener: expected a trt.IDebugListener, got {type(listener).__name__}")
        self._debug_state()["listener"] = listener
        return True

    def get_debug_listener(self):
        return self._debug_state()["listener"]

    def set_tensor_debug_state(self, name: str, flag: bool) -> bool:
        if not self.engine.is_debug_tensor(name):
            from .core import ILogger

            self.engine._logger.log(ILogger.ERROR, f"IExecutionContext::setTensorDebugState: tensor '{name}' was not "
                                                   "marked as a debug tensor (mark_debug) when the engine was built")
            return False
        on = self._debug_state()["on"]
        on.add(name) if flag else on.discard(name)
        return True

    def get_debug_state(self, name: str) -> bool:
        return name in self._debug_state()["on"]

    def set_all_tensors_debug_state(self, flag: bool) -> bool:
        names = {t["name"] for t in self.engine._header.get("debug", {}).get("tensors", [])}
        self._debug_state()["on"] = set(names) if flag else set()
        return True

    @property
    def unfused_tensors_debug_state(self) -> bool:
        return self._debug_state()["unfused"]

    @unfused_tensors_debug_state.setter
    def unfused_tensors_debug_state(self, flag: bool) -> None:
        self._debug_state()["unfused"] = bool(flag)

    def _debug_callback(self, device, stream_handle: int):
        """`f(tensor entry, value)` calling the listener for debug tensors that are on, or None."""
        state = self._debug_state()
        debug = self.engine._header.get("debug")
        if state["listener"] is None or not debug:
            return None
        ids = {t["id"] for t in debug["tensors"] if t["name"] in state["on"]}
        unfused = debug["unfused"] and state["unfused"]
        if not ids and not unfused:
            return None
        location = TensorLocation.DEVICE if device.type == "cuda" else TensorLocation.HOST
        from .core import Dims

        def report(entry: dict, value) -> None:
            if unfused or entry["id"] in ids:
                value = value.contiguous()  # kept alive until the listener returns
                state["listener"].process_debug_tensor(address_capsule(value.data_ptr()), location,
                                                       DataType(entry["dtype"]), Dims(value.shape), entry["name"],
                                                       int(stream_handle))
        return report
