"""Names in the reference INetworkDefinition: layer and tensor names as TensorRT-RTX gives and checks them,
the network's own name, and TensorRT's way with a misused call (a logged API usage error)."""

from __future__ import annotations

from .core import ILogger, ITensor, NetworkError


def _name_argument(network, value, api: str) -> str | None:
    """A name as TensorRT's bindings take it: a str (bytes are decoded as UTF-8); None is TensorRT's null
    name, refused with a logged API usage error (the caller then does nothing); anything else is a TypeError."""
    if isinstance(value, bytes):
        return value.decode("utf-8")
    if isinstance(value, str):
        return value
    if value is None:
        network._api_usage_error(f"{api}: Error Code 3: API Usage Error (Parameter check failed, condition: "
                                 "(name) != nullptr.)")
        return None
    raise TypeError(f"{api}: incompatible function arguments: a name is a str, got {type(value).__name__}")


class NetworkNames:
    """The naming part of INetworkDefinition (a mixin; the state is created in INetworkDefinition.__init__)."""

    # -- names ------------------------------------------------------------------------------
    # What TensorRT-RTX 1.7 does, probed (tests/reference/test_names.py compares both on the same calls):
    # - a layer is named "(Unnamed Layer* k) [Type]" from a per-network counter; a name a renamed layer
    #   already has is skipped (the counter moves on, so later layers' numbers shift too);
    # - output i of a layer named L is "L_output" (i = 0) or "L_output (i)"; if any tensor already has
    #   that name, "_1", "_2", ... is appended from one counter per network, skipping names in use;
    # - a name given by add_input or a rename is *explicit*: renaming to another tensor's explicit name
    #   is refused (logged), but an automatic name may be taken: its holder is then renamed
    #   "L_output_<counter>" (L its layer; " (i)" is not kept), so names stay unique;
    # - renaming a layer names its automatic outputs again from the new name (its own old names count
    #   as in use); renaming it to another layer's *automatic* name is accepted (two layers then share
    #   a name), to a renamed layer's name refused; renaming a layer to the name it has is not checked and
    #   makes that name no more explicit than it was (a tensor's is made explicit); renaming a layer away
    #   frees its old name, even where another layer shares it explicitly.
    def _auto_layer_name(self, label: str) -> str:
        while True:
            self._layer_counter += 1
            name = f"(Unnamed Layer* {self._layer_counter - 1}) [{label}]"
            if name not in self._explicit_layers:
                return name

    def _auto_tensor_name(self, layer, index: int) -> str:
        base = f"{layer._name}_output" + (f" ({index})" if index else "")
        name = base
        while self._tensors_by_name.get(name):
            self._suffix_counter += 1
            name = f"{base}_{self._suffix_counter}"
        return name

    def _register_tensor(self, tensor: ITensor) -> None:
        self._tensors_by_name.setdefault(tensor._name, []).append(tensor)

    def _unregister_tensor(self, tensor: ITensor) -> None:
        holders = self._tensors_by_name.get(tensor._name, [])
        if tensor in holders:
            holders.remove(tensor)
            if not holders:
                del self._tensors_by_name[tensor._name]
        if self._explicit_tensors.get(tensor._name) is tensor:
            del self._explicit_tensors[tensor._name]

    def _set_tensor_name(self, tensor: ITensor, name: str, explicit: bool) -> None:
        self._unregister_tensor(tensor)
        tensor._name, tensor._explicit = name, explicit
        self._register_tensor(tensor)
        if explicit:
            self._explicit_tensors[name] = tensor
            for other in list(self._tensors_by_name[name]):  # automatic holders give the name up
                if other is not tensor and not other._explicit:
                    self._set_tensor_name(other, self._auto_tensor_name(other._producer, 0), False)

    def _name_outputs(self, layer) -> None:
        """(Re)name the outputs of `layer` that have no explicit name."""
        for i, t in enumerate(layer._outputs):
            if not t._explicit:
                self._set_tensor_name(t, self._auto_tensor_name(layer, i), False)

    def _rename_tensor(self, tensor: ITensor, name: str) -> None:
        name = _name_argument(self, name, "ITensor::setName")
        if name is None:
            return None
        if not name:
            raise NetworkError(f"tensor '{tensor._name}': a tensor name cannot be empty")
        holder = self._explicit_tensors.get(name)
        if holder is not None and holder is not tensor:
            return self._refuse_rename("ITensor", "tensor", tensor._name, name)
        self._set_tensor_name(tensor, name, True)

    def _rename_layer(self, layer, name: str) -> None:
        layer = layer._self  # the layer, where a get_layer view renames it
        name = _name_argument(self, name, "ILayer::setName")
        if name is None:
            return None
        holder = self._explicit_layers.get(name)
        if holder is not None and holder is not layer and name != layer._name:
            return self._refuse_rename("ILayer", "layer", layer._name, name)
        if name != layer._name:  # TensorRT-RTX: renaming a layer to its own name checks and registers nothing
            # the old name is released whoever registered it (TensorRT-RTX: a layer that shares a renamed
            # layer's name, its own automatic one, frees that name by being renamed)
            self._explicit_layers.pop(layer._name, None)
            layer._name = name
            self._explicit_layers[name] = layer
        self._name_outputs(layer)

    def _refuse_rename(self, cls: str, kind: str, old: str, new: str) -> None:
        """A name already in use: TensorRT (and TensorRT-RTX) log an API usage error and keep the old
        name; so does the reference, through its builder's logger (an error without one)."""
        self._api_usage_error(f"{cls}::setName: Error Code 3: API Usage Error (Failed attempt to rename a {kind} "
                              f"from {old} to {new} as the new name is already in use.)")

    @property
    def name(self) -> str:
        return self._name

    @name.setter
    def name(self, value) -> None:
        value = _name_argument(self, value, "INetworkDefinition::setName")
        if value is not None:
            self._name = value

    def _api_usage_error(self, message: str) -> None:
        """TensorRT's way with a misused API call: an error logged through the builder's logger (and the
        call has no effect); without a logger, a NetworkError."""
        logger = getattr(self._builder, "logger", None)
        if logger is None:
            raise NetworkError(message)
        logger.log(ILogger.ERROR, message)
