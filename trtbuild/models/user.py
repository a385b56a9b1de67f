"""Models from the user's own files and modules, the way Polygraphy takes network scripts.

    spec = resolve_model("alexnet")                        # a registered model (built-in or entry point)
    spec = resolve_model("net.py")                         # the only ModelSpec net.py defines
    spec = resolve_model("path/net.py:SPEC")               # a named ModelSpec
    spec = resolve_model("mypkg.nets:build_net", input="input:1x3x32x32", torch="mypkg.nets:make_model")

A reference names a ``ModelSpec`` or a plain network function ``(network, weights, input) ->
{name: ITensor}``. A function needs ``input`` ("NAME:1x3x224x224", batch first) and, to export
seeded weights or check parity, ``torch``: a factory returning the ``nn.Module`` (called with no
arguments under ``torch.manual_seed(seed)``). ``outputs`` are the output names in the order of the
torch forward's outputs (default: the keys the function returns). The model is registered under its
name (the spec's, or the function's) so every command finds it; its origin is "file <path>" or
"module <name>". A file is imported under a private module name (``_trtbuild_user_<stem>_<hash>``),
never under a name that could shadow a real module. Every failure is a ValueError in one sentence.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import re
import sys
import traceback
from collections.abc import Mapping
from pathlib import Path

from . import registry
from .registry import ModelSpec

__all__ = ["resolve_model", "load_object", "load_module_factory", "module_factory", "parse_input", "is_user_reference"]

USER_ORIGINS = ("file ", "module ")
_MODULE_RE = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")
NETWORK_SIGNATURE = "(network, weights, input) -> {name: ITensor}"


def is_user_reference(text: str) -> bool:
    """True for `file.py[:attr]` and `package.module:attr`; False for a registry name."""
    return ":" in text or text.endswith(".py") or "/" in text or "\\" in text


def _split(ref: str) -> tuple[str, str | None]:
    head, sep, attr = ref.rpartition(":")
    if sep and head and (head.endswith(".py") or _MODULE_RE.match(head)) and attr:
        return head, attr
    if sep and not attr:
        raise ValueError(f"model reference {ref!r} ends with ':'; write FILE.py:NAME or package.module:NAME")
    return ref, None


def _error_line(exc: BaseException, path: Path) -> str:
    if isinstance(exc, SyntaxError) and exc.lineno:
        return f", line {exc.lineno}"
    lines = [f.lineno for f in traceback.extract_tb(exc.__traceback__) if Path(f.filename) == path]
    return f", line {lines[-1]}" if lines else ""


def _import_file(path: Path):
    if not path.exists():
        raise ValueError(f"model file {path} does not exist")
    if path.suffix != ".py" or not path.is_file():
        raise ValueError(f"model file {path} is not a Python file (.py)")
    path = path.resolve()
    digest = hashlib.sha1(str(path).encode()).hexdigest()[:10]
    stem = re.sub(r"\W", "_", path.stem)
    name = f"_trtbuild_user_{stem}_{digest}"  # a private name: never shadows a real module
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pickling look the module up while it runs
    sys.path.insert(0, str(path.parent))  # siblings of the script import as they would when run
    try:
        spec.loader.exec_module(module)
    except BaseException as e:
        sys.modules.pop(name, None)
        if isinstance(e, KeyboardInterrupt):
            raise
        kind = "syntax error" if isinstance(e, SyntaxError) else type(e).__name__
        msg = e.msg if isinstance(e, SyntaxError) else str(e)
        raise ValueError(f"cannot import model file {path}{_error_line(e, path)}: {kind}: {msg}") from None
    finally:
        if str(path.parent) in sys.path:
            sys.path.remove(str(path.parent))
    return module


def _import_module(name: str):
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as e:
        if e.name and (name == e.name or name.startswith(e.name + ".")):
            raise ValueError(f"no module named '{e.name}' (from model reference '{name}'); check the name, or "
                             "give a file path (net.py:NAME)") from None
        raise ValueError(f"cannot import module '{name}': ModuleNotFoundError: {e}") from None
    except Exception as e:  # noqa: BLE001 - the user's code can raise anything
        raise ValueError(f"cannot import module '{name}': {type(e).__name__}: {e}") from None


def _is_network_function(obj) -> bool:
    if not callable(obj) or isinstance(obj, type):
        return False
    try:
        inspect.signature(obj).bind(None, None, None)
    except (TypeError, ValueError):
        return False
    return True


def _candidates(module) -> str:
    own = getattr(module, "__name__", None)
    specs = [n for n, v in vars(module).items() if isinstance(v, ModelSpec) and not n.startswith("_")]
    funcs = [n for n, v in vars(module).items() if inspect.isfunction(v) and v.__module__ == own
             and not n.startswith("_")]
    parts = ([f"ModelSpecs {', '.join(specs)}"] if specs else []) + ([f"functions {', '.join(funcs)}"] if funcs else [])
    return "; ".join(parts) or "no ModelSpec or function"


def load_object(ref: str):
    """(object, where, origin) named by `path/file.py[:attr]` or `package.module:attr`. Without an
    attribute, a file's default is the only ModelSpec it defines (several: refused, name one)."""
    target, attr = _split(ref)
    if target.endswith(".py") or "/" in target or "\\" in target or Path(target).is_file():
        path = Path(target)
        module, where, origin = _import_file(path), str(path), f"file {path}"
    elif attr is None:
        raise ValueError(f"model reference {ref!r} is neither a registered model, a .py file nor package.module:NAME")
    else:
        module, where, origin = _import_module(target), target, f"module {target}"
    if attr is None:
        own = [n for n, v in vars(module).items() if isinstance(v, ModelSpec) and not n.startswith("_")
               and not (registry.ORIGINS.get(v.name) == registry.BUILT_IN and registry.MODELS.get(v.name) is v)]
        if len(own) != 1:
            how = "defines no ModelSpec" if not own else f"defines {len(own)} ModelSpecs ({', '.join(own)})"
            raise ValueError(f"{where} {how}; name the ModelSpec or network function to use as {where}:NAME "
                             f"(it defines {_candidates(module)})")
        attr = own[0]
    if not hasattr(module, attr):
        raise ValueError(f"{where} has no attribute '{attr}'; what it defines that could fit: {_candidates(module)}")
    return getattr(module, attr), f"{where}:{attr}", origin


def a_type(value) -> str:
    """"a dict", "an ITensor", "an int": the type of `value` with its article, for messages."""
    name = type(value).__name__
    return f"{'an' if name[:1].lower() in 'aeiou' else 'a'} {name}"


def parse_input(text: str) -> tuple[str, tuple[int, ...]]:
    """'NAME:1x3x224x224' -> ('NAME', (1, 3, 224, 224)); ValueError naming --input otherwise."""
    name, sep, dims = text.rpartition(":")
    try:
        shape = tuple(int(d) for d in dims.lower().split("x"))
    except ValueError:
        shape = ()
    if not sep or not name.strip() or not shape or any(d < 1 for d in shape):
        raise ValueError(f"--input {text!r}: expected NAME:SHAPE with positive dimensions separated by 'x', batch "
                         "first, e.g. input:1x3x224x224")
    return name.strip(), shape


def load_module_factory(ref: str, option: str = "--torch"):
    """`(seed, small) -> nn.Module` in eval mode from a factory reference (`net.py:make_model`,
    `module:attr`): the factory is called with no arguments under torch.manual_seed(seed). A
    ModelSpec named instead gives its own torch_factory."""
    if ":" not in ref:
        raise ValueError(f"{option} {ref!r}: name the factory function, e.g. {ref}:make_model")
    fn, where, _ = load_object(ref)
    return module_factory(fn, where, option)


def call_without_arguments(fn, what: str, advice: str):
    """fn() for a user's factory (`what`: e.g. "--torch net.py:make_model"). ValueError in one sentence
    if its signature needs arguments (+ `advice`), or if it raises: its own exception, with the file and
    line of the user's code where it was raised (a TypeError inside it is its bug, not a wrong call)."""
    try:
        inspect.signature(fn).bind()
    except TypeError as e:
        raise ValueError(f"{what} cannot be called without arguments ({e}); {advice}") from None
    except ValueError:
        pass  # no signature to read (a builtin): call it and see
    try:
        return fn()
    except Exception as e:
        code = getattr(fn, "__code__", None)
        path = Path(code.co_filename) if code is not None else None
        frames = traceback.extract_tb(e.__traceback__)[1:]  # without this function's own frame
        mine = [f for f in frames if path is not None and Path(f.filename) == path] or frames[-1:]
        at = f" ({mine[-1].filename}, line {mine[-1].lineno})" if mine else ""
        raise ValueError(f"{what} raised {type(e).__name__}: {e}{at}") from e


def module_factory(fn, where: str, option: str = "--torch"):
    """load_module_factory for an already loaded object `fn` (a ModelSpec or a factory function)."""
    if isinstance(fn, ModelSpec):
        return fn.torch_factory
    if not callable(fn):
        raise ValueError(f"{option} {where} is {a_type(fn)}, not a function returning a torch.nn.Module")

    def factory(seed: int = 0, small: bool = False):
        import torch

        torch.manual_seed(seed)
        module = call_without_arguments(fn, f"{option} {where}", "it must be a factory returning the torch.nn.Module")
        if not isinstance(module, torch.nn.Module):
            raise ValueError(f"{option} {where} returned {a_type(module)}, not a torch.nn.Module")
        return module.eval()

    factory.__qualname__ = factory.__name__ = getattr(fn, "__name__", "factory")
    return factory


def _takes_quant(fn) -> bool:
    """True if the network function accepts ``quant=`` (a trtbuild.quant.QuantPlan, for its planned layers)."""
    try:
        return "quant" in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def _no_torch(name: str, where: str):
    def factory(seed: int = 0, small: bool = False):
        raise ValueError(f"model '{name}' (network function {where}) has no PyTorch model: pass --torch "
                         "FILE.py:FACTORY (a function returning the nn.Module) to export its weights, check parity or "
                         "check a calibration file against it")
    return factory


def _function_spec(fn, where: str, input_spec: str | None, torch: str | None, outputs) -> ModelSpec:
    name = getattr(fn, "__name__", "network")
    if input_spec is None:
        raise ValueError(f"{where} is a network function: give its input as --input NAME:SHAPE "
                         "(e.g. --input input:1x3x224x224, batch first)")
    input_name, shape = parse_input(input_spec)
    names = list(outputs or [])

    takes_quant = _takes_quant(fn)

    def build_network(network, weights, x, quant=None):
        try:
            result = fn(network, weights, x, quant=quant) if takes_quant else fn(network, weights, x)
        except Exception as e:
            if len(shape) != 3:
                raise
            raise ValueError(f"{e} (note: --input {input_spec} has rank 3, but --input gives the batch first, e.g. "
                             f"{input_name}:1x{'x'.join(map(str, shape))}: is the batch dimension missing?)") from e
        if not isinstance(result, Mapping):
            raise ValueError(f"network function {where} returned {a_type(result)}, not a dict "
                             "{output name: ITensor}")
        if not names:  # default: the keys the function returns, in its order
            names.extend(result)
        return result

    if not takes_quant:  # what quant_plan and check_quant read: no quant= parameter, as the user's function
        build_network.__signature__ = inspect.Signature(list(inspect.signature(build_network).parameters.values())[:3])
    build_network.__name__ = build_network.__qualname__ = name
    build_network.__module__ = getattr(fn, "__module__", None)
    return ModelSpec(name=name, description=f"network function {where}",
                     torch_factory=load_module_factory(torch) if torch else _no_torch(name, where),
                     build_network=build_network, input_shape=lambda small=False: shape, output_names=names,
                     input_name=input_name)


def resolve_model(ref: str, *, input: str | None = None,  # noqa: A002 - public keyword, as --input
                  torch: str | None = None, outputs=None) -> ModelSpec:
    """The ModelSpec `ref` names: a registered model, `file.py[:attr]` or `package.module:attr`
    (see the module docstring); registered under its name. ValueError in one sentence otherwise."""
    given = [o for o, v in (("--input", input), ("--torch", torch), ("--output", outputs)) if v]
    if not is_user_reference(ref):
        if ref not in registry.MODELS:
            broken = (f"; {len(registry.LOAD_ERRORS)} entry point(s) failed to load, see `trtbuild models`"
                      if registry.LOAD_ERRORS else "")
            raise ValueError(f"unknown model {ref!r}; known models: {', '.join(registry.names())} (or a file "
                             f"net.py[:NAME], or package.module:NAME){broken}")
        if given:
            raise ValueError(f"{', '.join(given)} only apply to a network function (net.py:FUNCTION); "
                             f"model '{ref}' carries its own")
        return registry.get(ref)
    obj, where, origin = load_object(ref)
    if isinstance(obj, ModelSpec):
        if given:
            raise ValueError(f"{where} is a ModelSpec, which carries its input, PyTorch model and outputs; drop "
                             f"{', '.join(given)}")
        spec = obj
    elif _is_network_function(obj):
        spec = _function_spec(obj, where, input, torch, outputs)
    else:
        raise ValueError(f"{where} is {a_type(obj)}, not a ModelSpec or a network function "
                         f"{NETWORK_SIGNATURE}")
    previous = registry.ORIGINS.get(spec.name)
    if previous is not None and not previous.startswith(USER_ORIGINS) and registry.MODELS.get(spec.name) is not spec:
        raise ValueError(f"{where} defines a model named '{spec.name}', the name of a {previous} model; rename it")
    return registry.register(spec, origin, replace=True)
