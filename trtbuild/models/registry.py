"""The model zoo registry: one :class:`ModelSpec` per model, registered by the model's own module.

    from trtbuild.models import registry
    registry.names()                       # ['alexnet', 'vgg16_ssd', ...]
    spec = registry.get("resnet50")
    model = registry.get_torch_model("resnet50", seed=0, small=True)   # eval mode, BN randomized

Adding a model is one call in its module (e.g. ``trtbuild/models/rednet.py``)::

    from .registry import ModelSpec, register
    register(ModelSpec(name="rednet", ...))

and the module's name in :data:`MODEL_MODULES`. Model modules are imported lazily, the first time
the registry is read (``MODELS``, :func:`get`, :func:`names`), so importing this module is cheap.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import importlib.util
from dataclasses import dataclass, field
from typing import Callable

__all__ = ["ModelSpec", "MODELS", "MODEL_MODULES", "ORIGINS", "LOAD_ERRORS", "register", "get", "names", "origin",
           "get_torch_model", "UnknownModelError"]

#: Modules (under trtbuild.models) that register models when imported.
MODEL_MODULES = ("alexnet", "vgg_ssd", "resnet", "repvgg", "rednet", "unet", "yolov8", "crnn", "vit")


class UnknownModelError(KeyError):
    """No model of that name is registered; the message lists the known names."""

    def __str__(self) -> str:  # KeyError would print the repr of the message
        return str(self.args[0])


@dataclass
class ModelSpec:
    """Everything needed to build, run and check one zoo model.

    Attributes:
        name: registry name, e.g. ``"resnet50"``.
        description: one line for ``trtbuild models``.
        torch_factory: ``(seed, small) -> nn.Module`` in eval mode with BN statistics randomized.
        build_network: ``(network, wm, input) -> {output name: ITensor}`` adding the layers to
            ``network`` from the WeightMap ``wm`` (PyTorch state-dict names); outputs are named as
            the keys and NOT marked. Works for fp32 and fp16 inputs.
        input_name: name of the network input.
        input_shape: ``(small) -> (1, C, H, W)``.
        output_names: network output names, in the order of the torch forward's outputs.
        value_range: range of the uniform random inputs used for parity checks.
        layer_map: network tensor name -> torch module name whose forward output equals it (each
            such module runs exactly once per forward), for layerwise parity.
        uses_plugins: True if the network needs a TensorRT plugin (with its default options).
        notes: free text (e.g. what ``small`` changes).
        options: keyword options ``build_network`` accepts, ``{name: allowed values}`` (the first is
            the default), e.g. rednet's ``{"involution_impl": ("auto", "plugin", "composed")}``.
        chosen: the options bound by :meth:`with_options` (empty for a registered spec).
        outputs_for: ``(chosen options) -> output names`` for a model whose outputs depend on an option
            (yolov8n's ``nms``); :meth:`with_options` sets :attr:`output_names` from it. None: they do not.
        argmax_of: ``{index output: score output}`` for an output that is the argmax over the last dim of
            another (crnn's ``labels`` of ``log_probs``): parity forgives an index that differs from
            PyTorch's at a near-tie of the scores, which an fp16/int8 engine may break either way.
        tolerances: ``{precision: (relative atol, rtol)}`` replacing trtbuild.parity's defaults for this model,
            where its own quantization error (measured on a PyTorch fake-quant model) exceeds them.
    """

    name: str
    description: str
    torch_factory: Callable
    build_network: Callable
    input_shape: Callable
    output_names: list
    input_name: str = "input"
    value_range: tuple = (-1.0, 1.0)
    layer_map: dict = field(default_factory=dict)
    uses_plugins: bool = False
    notes: str = ""
    options: dict = field(default_factory=dict)
    chosen: dict = field(default_factory=dict)
    outputs_for: Callable | None = None
    argmax_of: dict = field(default_factory=dict)
    tolerances: dict = field(default_factory=dict)

    def with_options(self, **options) -> "ModelSpec":
        """A copy whose ``build_network`` is called with ``options`` (checked against :attr:`options`;
        ValueError names the model, the option and the allowed values). No options: ``self``."""
        if not options:
            return self
        for key, value in options.items():
            if key not in self.options:
                known = ", ".join(self.options) or "none"
                raise ValueError(f"model '{self.name}' has no build option '{key}' (its options: {known})")
            if value not in self.options[key]:
                raise ValueError(f"model '{self.name}': {key}={value!r} is not one of "
                                 f"{', '.join(map(repr, self.options[key]))}")
        chosen = {**self.chosen, **options}
        outputs = list(self.outputs_for(chosen)) if self.outputs_for is not None else self.output_names
        return dataclasses.replace(self, build_network=functools.partial(self.build_network, **options),
                                   chosen=chosen, output_names=outputs)


class _Registry(dict):
    """A dict of ModelSpecs that imports the model modules on first read."""

    _loaded = False

    def _load(self) -> None:
        if _Registry._loaded:
            return
        _Registry._loaded = True
        for module in MODEL_MODULES:
            importlib.import_module(f"{__package__}.{module}")
        from .entry_points import register_entry_points

        register_entry_points()

    def __getitem__(self, key):
        self._load()
        return super().__getitem__(key)

    def __contains__(self, key) -> bool:
        self._load()
        return super().__contains__(key)

    def __iter__(self):
        self._load()
        return super().__iter__()

    def __len__(self) -> int:
        self._load()
        return super().__len__()

    def keys(self):
        self._load()
        return super().keys()

    def values(self):
        self._load()
        return super().values()

    def items(self):
        self._load()
        return super().items()

    def get(self, key, default=None):
        self._load()
        return super().get(key, default)


#: name -> ModelSpec, filled by the model modules (read it like a dict).
MODELS: dict = _Registry()


#: name -> where the model comes from: "built-in", "entry point <distribution>", "file <path>", ...
ORIGINS: dict = {}
#: one line per entry point of the group ``trtbuild.models`` that could not be loaded or registered.
LOAD_ERRORS: list = []
BUILT_IN = "built-in"


def register(spec: ModelSpec, origin: str | None = None, replace: bool = False) -> ModelSpec:
    """Add ``spec`` to :data:`MODELS` (a second model of the same name is an error unless ``replace``).
    ``origin`` says where it comes from (default: built-in for trtbuild's own modules, else the
    module that defines its network). Returns it."""
    if not isinstance(spec, ModelSpec):
        raise TypeError(f"register: expected a ModelSpec, got {type(spec).__name__}")
    if dict.__contains__(MODELS, spec.name) and not replace:
        raise ValueError(f"register: a model named '{spec.name}' is already registered ({ORIGINS.get(spec.name)})")
    if origin is None:
        module = getattr(spec.build_network, "__module__", "") or ""
        origin = BUILT_IN if module.startswith(f"{__package__}.") else f"module {module or '?'}"
    dict.__setitem__(MODELS, spec.name, spec)
    ORIGINS[spec.name] = origin
    return spec


def unregister(name: str) -> None:
    """Remove the model ``name`` (no error if absent)."""
    dict.pop(MODELS, name, None)
    ORIGINS.pop(name, None)


def origin(name: str) -> str:
    """Where the registered model ``name`` comes from (see :data:`ORIGINS`)."""
    get(name)
    return ORIGINS.get(name, BUILT_IN)


def names() -> list[str]:
    """Registered model names: the built-in models in MODEL_MODULES order (whatever order their
    modules happened to be imported in), then any others in registration order."""
    rank = {f"{__package__}.{m}": i for i, m in enumerate(MODEL_MODULES)}
    specs = sorted(MODELS.values(), key=lambda s: rank.get(getattr(s.build_network, "__module__", ""), len(rank)))
    return [s.name for s in specs]


def get(name: str) -> ModelSpec:
    """The ModelSpec called ``name``; UnknownModelError lists the known names otherwise."""
    spec = MODELS.get(name)
    if spec is None:
        raise UnknownModelError(f"unknown model '{name}'; known models: {', '.join(names())}")
    return spec


def get_torch_model(name: str, seed: int = 0, small: bool = False):
    """The PyTorch reference model ``name``: eval mode, weights drawn under ``seed``, BatchNorm
    statistics randomized (trtbuild.models.pytorch.randomize_bn_) so BN folding is exercised."""
    model = get(name).torch_factory(seed, small)
    if model.training:
        raise RuntimeError(f"model '{name}': torch_factory returned a module in training mode")
    return model
