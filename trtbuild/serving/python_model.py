"""What the ``model.py`` of a ``trtbuild export-triton --kind python`` model runs inside Triton's
Python backend: the engine copied into the version directory, loaded with trtbuild's Engine on
whichever backend built it (TensorRT, TensorRT-RTX or the reference), run per batch of requests.

    # DIR/<name>/1/model.py (written by export-triton)
    import triton_python_backend_utils as pb_utils
    from trtbuild.serving.python_model import EngineModel

    class TritonPythonModel(EngineModel):
        utils = pb_utils

The model's ``trtbuild_batching`` parameter chooses how a batch of requests runs: "concatenate"
stacks them along the batch dimension into one engine run (up to max_batch_size, which Triton's
dynamic batcher respects); "per-request" runs the engine once per request, so every response is
bit-identical to a direct ``Engine`` run on that request's input (PyTorch's CPU kernels round
differently at another batch size). ``trtbuild_threads`` sets the PyTorch threads of each
instance when it loads, ``trtbuild_reject_nonfinite`` refuses requests holding NaN or Inf
(trtbuild.serving.model_options). A batch that no optimization profile of the engine takes (Triton
may form any batch up to max_batch_size: 5..7 for profiles 1..4 and 8..16) runs zero-padded to the next
profile's min, its padding cut from the answers, as ``trtbuild serve`` runs it (trtbuild.serving.padding).
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

from .model_options import THREADS_PARAMETER, ModelOptions
from .padding import run_padded

log = logging.getLogger("trtbuild.serving")

#: the engine's file name inside the version directory (its sidecar is ENGINE_FILE + ".json").
ENGINE_FILE = "model.engine"


def load_plugins(trt, model_dir: Path) -> None:
    """Register the plugins the engine needs before it is deserialized: on real TensorRT the plugin
    libraries export-triton copied beside the model (``*.so`` in `model_dir`); on the reference,
    trtbuild's Involution twin."""
    from trtbuild.backend import is_reference, is_rtx
    from trtbuild.layers import involution

    if is_rtx(trt):
        return  # TensorRT-RTX has no plugins
    if is_reference(trt):
        involution.load_plugin_library(trt)
        return
    load_plugin_libraries(trt, model_dir)


def load_plugin_libraries(trt, model_dir: Path) -> None:
    """Load the plugin libraries beside the model (``*.so`` in `model_dir`) into real TensorRT's registry."""
    from trtbuild.backend import is_rtx
    from trtbuild.layers import involution

    if is_rtx(trt):
        raise ValueError(f"{model_dir}: TensorRT-RTX has no plugins, so no plugin library can be loaded")
    for library in sorted(model_dir.glob("*.so")):
        if library.name == involution.PLUGIN_LIBRARY:
            involution.load_plugin_library(trt, library)  # checks that the creator got registered
        else:
            trt.get_plugin_registry().load_library(str(library))


def load_model_engine(version_dir: str | os.PathLike):
    """The Engine of `version_dir`/model.engine, its plugins registered first (sidecar checked by load_engine)."""
    from trtbuild.backend import load_trt
    from trtbuild.engine import load_engine, read_sidecar
    from trtbuild.engine.serialize import sidecar_backend

    path = Path(version_dir) / ENGINE_FILE
    sidecar = read_sidecar(path)
    trt = load_trt(sidecar_backend(sidecar)) if sidecar is not None else None
    if trt is not None:
        load_plugins(trt, Path(version_dir).parent)
    return load_engine(path, trt)


class EngineModel:
    """Triton Python-backend model (``TritonPythonModel``) running a trtbuild engine; subclasses set
    ``utils`` to ``triton_python_backend_utils``, which only exists inside Triton."""

    utils = None

    def initialize(self, args: dict) -> None:
        config = json.loads(args["model_config"])
        self.options = ModelOptions.from_config(config)
        threads = self.options.apply_threads()  # before the engine loads: this instance's own PyTorch threads
        self._log(f"trtbuild: model '{args.get('model_name')}' instance '{args.get('model_instance_name')}' runs "
                  f"{threads} PyTorch thread(s) (config.pbtxt parameter {THREADS_PARAMETER})")
        self.engine = load_model_engine(Path(args["model_repository"]) / str(args["model_version"]))
        self.batched = int(config.get("max_batch_size", 0)) > 0
        parameter = (config.get("parameters") or {}).get("trtbuild_batching") or {}
        self.concatenate = self.batched and parameter.get("string_value", "concatenate") == "concatenate"

    def _log(self, message: str) -> None:
        """INFO line in Triton's log (pb_utils.Logger), else this module's logger."""
        logger = getattr(self.utils, "Logger", None)
        if logger is not None:
            logger.log_info(message)
        else:
            log.info(message)

    def _inputs(self, request) -> dict:
        from torch.utils.dlpack import from_dlpack

        feeds = {}
        for name in self.engine.input_names:
            tensor = self.utils.get_input_tensor_by_name(request, name)
            if tensor is None:
                raise ValueError(f"the request has no input '{name}'")
            feeds[name] = from_dlpack(tensor.to_dlpack()).to(self.engine.device, copy=True)
            self.options.check_finite(name, feeds[name])  # ValueError: answered to this request's client only
        return feeds

    def _response(self, outputs: dict):
        import torch
        from torch.utils.dlpack import to_dlpack

        tensors = []
        for name, value in outputs.items():
            value = value.contiguous()
            if value.device.type == "cpu" and value.dtype != torch.bfloat16:  # numpy has no bfloat16
                tensors.append(self.utils.Tensor(name, value.numpy()))
            else:
                tensors.append(self.utils.Tensor.from_dlpack(name, to_dlpack(value)))
        return self.utils.InferenceResponse(output_tensors=tensors)

    def _error(self, error: Exception):
        return self.utils.InferenceResponse(error=self.utils.TritonError(f"{type(error).__name__}: {error}"))

    def _run(self, feeds: dict) -> dict:
        """The engine's outputs for `feeds`, synchronized (Triton reads GPU outputs after execute returns);
        with max_batch_size > 0 (every input and output starts with the batch), a batch no profile takes
        is zero-padded to one that a profile takes and the padding cut from the outputs."""
        return run_padded(self.engine, feeds) if self.batched else self.engine.run(feeds, synchronize=True)

    def _run_concatenated(self, feeds: list[dict]) -> list:
        import torch

        sizes = [int(next(iter(f.values())).shape[0]) for f in feeds]
        stacked = {name: torch.cat([f[name] for f in feeds]) for name in feeds[0]}
        outputs = self._run(stacked)
        parts = {name: torch.split(value, sizes) for name, value in outputs.items()}
        return [self._response({name: parts[name][i] for name in parts}) for i in range(len(feeds))]

    def execute(self, requests: list) -> list:
        feeds, responses = [], [None] * len(requests)
        for i, request in enumerate(requests):
            try:
                feeds.append((i, self._inputs(request)))
            except Exception as e:  # noqa: BLE001 - answered to the client that sent it
                responses[i] = self._error(e)
        if self.concatenate and len(feeds) > 1:
            try:
                for (i, _), response in zip(feeds, self._run_concatenated([f for _, f in feeds])):
                    responses[i] = response
                return responses
            except Exception as e:  # noqa: BLE001 - run them one by one, so each request gets its own answer
                log.warning("one engine run for %d requests failed (%s); running them one by one", len(feeds), e)
        for i, feed in feeds:
            try:
                responses[i] = self._response(self._run(feed))
            except Exception as e:  # noqa: BLE001 - answered to the client that sent it
                responses[i] = self._error(e)
        return responses

    def finalize(self) -> None:
        self.engine = None


MODEL_PY = '''"""Triton Python-backend model written by `trtbuild export-triton --kind python`: runs the trtbuild
engine {engine} of this version directory with trtbuild's Engine (trtbuild must be importable in the
Python that Triton's Python-backend stub embeds)."""

import os
import sys

# The stub starts Python ignoring the environment (like python -E): apply PYTHONPATH here, so that the
# trtbuild and packages of the server's environment are found as in any Python started there.
sys.path[:0] = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p not in sys.path]

import triton_python_backend_utils as pb_utils  # noqa: E402

from trtbuild.serving.python_model import EngineModel  # noqa: E402


class TritonPythonModel(EngineModel):
    utils = pb_utils
'''


def model_py() -> str:
    """The text of model.py."""
    return MODEL_PY.format(engine=ENGINE_FILE)
