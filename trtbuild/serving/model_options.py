"""What the model code does around each engine run, the same for ``trtbuild serve`` and for the
``model.py`` of ``trtbuild export-triton --kind python`` (written into config.pbtxt's parameters,
read back by the model when Triton loads it, so it can be changed there without re-exporting).

    options = ModelOptions(threads=2, reject_nonfinite=True)
    text = options.parameters()                 # config.pbtxt "parameters" entries
    options = ModelOptions.from_config(config)  # in the model: Triton's model_config as a dict

threads: PyTorch's intra-op threads in each model instance (each Python-backend instance is a
process of its own). PyTorch's default is one per core in *every* instance and in the server
process, so a loaded server runs cores x instances busy-waiting threads on cores that Triton and
the clients need too, and throughput collapses; one thread per instance is the default, and more
instances (``--instances``) use more cores. 0 keeps PyTorch's default.

reject_nonfinite: refuse a request whose floating-point inputs hold NaN or Inf, in one sentence
to that client, instead of running the engine on it (off by default, as Triton's TensorRT backend
does not look at the values either).
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_THREADS = 1
THREADS_PARAMETER = "trtbuild_threads"
REJECT_NONFINITE_PARAMETER = "trtbuild_reject_nonfinite"
_BOOLS = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}


class ModelOptionsError(ValueError):
    """A model option has a value it cannot take (one sentence naming it)."""


@dataclass(frozen=True)
class ModelOptions:
    threads: int = DEFAULT_THREADS
    reject_nonfinite: bool = False

    def __post_init__(self):
        if isinstance(self.threads, bool) or not isinstance(self.threads, int) or self.threads < 0:
            raise ModelOptionsError(f"threads {self.threads!r}: PyTorch threads per model instance is an integer "
                                    ">= 1, or 0 for PyTorch's default (one per core)")

    def parameters(self) -> str:
        """config.pbtxt ``parameters`` entries carrying these options to the model."""
        values = {THREADS_PARAMETER: str(self.threads),
                  REJECT_NONFINITE_PARAMETER: "true" if self.reject_nonfinite else "false"}
        return "".join(f'parameters {{\n  key: "{k}"\n  value: {{ string_value: "{v}" }}\n}}\n'
                       for k, v in values.items())

    @classmethod
    def from_config(cls, config: dict) -> ModelOptions:
        """The options in Triton's model configuration (JSON as a dict); the defaults where absent."""
        params = config.get("parameters") or {}

        def value(key: str) -> str | None:
            entry = params.get(key)
            return None if entry is None else str(entry.get("string_value", "")).strip()

        threads, reject = value(THREADS_PARAMETER), value(REJECT_NONFINITE_PARAMETER)
        try:
            n = DEFAULT_THREADS if threads is None else int(threads)
        except ValueError:
            raise ModelOptionsError(f"config.pbtxt parameter {THREADS_PARAMETER} {threads!r}: expected an integer "
                                    ">= 1, or 0 for PyTorch's default") from None
        if reject is not None and reject.lower() not in _BOOLS:
            raise ModelOptionsError(f"config.pbtxt parameter {REJECT_NONFINITE_PARAMETER} {reject!r}: expected "
                                    "true or false")
        return cls(threads=n, reject_nonfinite=bool(reject) and _BOOLS[reject.lower()])

    def apply_threads(self) -> int:
        """Set PyTorch's intra-op threads of this process (0: left as they are); returns the count now."""
        import torch

        if self.threads:
            torch.set_num_threads(self.threads)
        return torch.get_num_threads()

    def check_finite(self, name: str, tensor, setting: str = f"{REJECT_NONFINITE_PARAMETER}: true") -> None:
        """ValueError naming input `name` if rejecting non-finite inputs and `tensor` holds NaN or Inf
        (`setting`: what turned the check on, for the message)."""
        import torch

        if not self.reject_nonfinite or not (tensor.is_floating_point() or tensor.is_complex()):
            return
        bad = ~torch.isfinite(tensor)
        if bool(bad.any()):
            nan, total = int(torch.isnan(tensor).sum()), int(bad.sum())
            raise ValueError(f"input '{name}' holds {nan} NaN and {total - nan} infinite value(s) of {tensor.numel()}, "
                             f"and this model rejects non-finite inputs ({setting})")
