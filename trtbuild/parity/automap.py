"""Layerwise parity without a hand-written map: network tensor -> torch module, from the names.

trtbuild's builders name layers after the PyTorch module they implement (``conv1``,
``layer1.0.bn1``) and the parts of a composite ``<module>/<part>`` (``conv4_3_norm/sumsq``), the
result tensor carrying the module name. So for each torch module that runs exactly once per forward
(leaf or not), its network counterpart is the tensor named like the module, else the output of the
last layer (in network order) named like it or ``<module>/...``, kept only when its shape equals the
module's output shape. A BatchNorm fed directly by a convolution is folded into it (``conv_bn``) when
the network has no layer of the BatchNorm's name: the conv's name then stands for the BatchNorm's
output, and the conv alone has no counterpart; with a layer of the BatchNorm's name (BatchNorm not
folded), each maps by its own name. A residual add is named as calibration names it, ``<module>.add``
(``add_1``...: further adds of the same forward), and belongs to ``<module>`` like its ``<module>/...``
layers. Where the module returns that add's result unchanged (MobileNetV2's ``x + self.conv(x)``, seen
in the forward by trtbuild.quant.record.module_adds), the add's layer is the module's counterpart; where
something follows it (ResNet's ReLU), it is only covered by the module, never compared with its output.

The fallback must not claim a tensor the module does not return. A module whose output is a
submodule's output (``attn`` ending in ``attn.proj``: the very same torch tensor), or whose layers
end with a submodule's (``attn.proj...`` after the last ``attn/...``), has no layer of its own that
computes its output: it is left unmapped, and its output is compared under the submodule's name.
Its own ``<module>/...`` layers count as accounted for when that submodule is mapped.

    layer_map, unmapped = automatic_layer_map(network, module, x)
"""

from __future__ import annotations

import re

import torch

from trtbuild.forward_hooks import ForwardCapture, capture_forward
from trtbuild.quant.record import module_adds

__all__ = ["automatic_layer_map", "automap_spec"]


def _returned_by_submodule(capture: ForwardCapture) -> dict[str, str]:
    """{module name: its submodule that returned the very same tensor object}: a module ending in a
    submodule (``attn`` -> ``attn.proj``, ``blocks.0`` -> ``blocks.0.attn`` -> ``blocks.0.attn.proj``)."""
    first_producer: dict[int, str] = {}
    aliases: dict[str, str] = {}
    for c in capture.calls:
        if not isinstance(c.output, torch.Tensor):
            continue
        earlier = first_producer.setdefault(id(c.output), c.name)
        if earlier.startswith(c.name + "."):
            aliases[c.name] = earlier
    return aliases


#: ``layer1.0.add`` -> ``layer1.0``: the add layers calibration and the planned builders name after their module
_ADD_NAME = re.compile(r"^(?P<module>.+)\.add(_\d+)?$")


def _owner(name: str) -> str:
    """The module a layer name belongs to by naming: ``<module>.add`` / ``<module>.add_N`` -> ``<module>``."""
    found = _ADD_NAME.match(name)
    return found["module"] if found else name


Candidate = tuple[str, list[str], tuple]  # (module name, names its tensor may carry, output shape)


def _candidates(capture: ForwardCapture, layer_names: set[str], adds: dict[str, str]) -> list[Candidate]:
    """[(module name, names its tensor may carry, output shape)] for single-call modules with one
    tensor output, in call order; a conv followed by its BatchNorm is one entry (the BatchNorm's)
    unless `layer_names` (the network's layer and tensor names) has one of the BatchNorm's name;
    `adds`: {module: its add whose result it returns}, the add's name a further name of the module's."""
    once = [c for c in capture.calls if capture.counts[c.name] == 1 and isinstance(c.output, torch.Tensor)]
    producer = {id(c.output): c for c in once}
    folded: dict[str, str] = {}  # conv name -> bn name
    for c in once:
        src = producer.get(id(c.input)) if isinstance(c.input, torch.Tensor) else None
        if (isinstance(c.module, torch.nn.modules.batchnorm._BatchNorm) and src is not None
                and isinstance(src.module, torch.nn.modules.conv._ConvNd) and c.name not in layer_names):
            folded[src.name] = c.name
    by_bn = {bn: conv for conv, bn in folded.items()}
    return [(c.name, [c.name] + [by_bn[n] for n in [c.name] if n in by_bn] + [adds[n] for n in [c.name] if n in adds],
             tuple(c.output.shape)) for c in once if c.name not in folded]


def _shape_matches(dims, shape: tuple) -> bool:
    dims = tuple(int(d) for d in dims)
    return len(dims) == len(shape) and all(d < 0 or d == s for d, s in zip(dims, shape))


def automatic_layer_map(network, module: torch.nn.Module, *inputs) -> tuple[dict[str, str], list[str]]:
    """({network tensor name: torch module name} in network order, [names of the network layers no
    mapped module accounts for]) for a defined `network` and `module` run on example `inputs`
    (batch and spatial size as the network's). See the module docstring for the rules."""
    layers = [network.get_layer(i) for i in range(network.num_layers)]
    inputs_by_name = {network.get_input(i).name for i in range(network.num_inputs)}
    tensors: dict[str, tuple[int, object]] = {}
    for li, layer in enumerate(layers):
        for j in range(layer.num_outputs):
            tensors.setdefault(layer.get_output(j).name, (li, layer.get_output(j)))
    found: dict[str, tuple[int, str]] = {}
    _, capture = capture_forward(module.eval(), *inputs)  # every call, the tensors themselves
    aliases = _returned_by_submodule(capture)
    named = set(tensors) | {layer.name.split("/")[0] for layer in layers}
    for mod_name, names, shape in _candidates(capture, named, module_adds(module, *inputs)):
        for name in names:
            hit = tensors.get(name)
            if hit is None and mod_name not in aliases:
                hit = _last_own_layer(layers, name)
            if hit is None or hit[1].name in inputs_by_name or hit[1].name in found:
                continue
            if _shape_matches(hit[1].shape, shape):
                found[hit[1].name] = (hit[0], mod_name)
                break
    mapping = {t: m for t, (_, m) in sorted(found.items(), key=lambda kv: kv[1][0])}
    covered = set(mapping) | set(mapping.values())
    covered |= {alias for alias, source in aliases.items() if source in covered}
    producers = {found[t][0] for t in found}

    def is_covered(li: int, name: str) -> bool:
        parts = [_owner(name.split("/")[0])] + name.split("/")[1:]
        return li in producers or any("/".join(parts[:k]) in covered for k in range(1, len(parts) + 1))

    unmapped = [layer.name for li, layer in enumerate(layers) if not is_covered(li, layer.name)]
    return mapping, unmapped


def _last_own_layer(layers, name: str):
    """(index, output) of the last layer named `name` or `name/...` when no layer of a submodule
    (``name.child...``) follows it in network order, else None: the module's output then comes from
    a submodule, not from one of its own layers."""
    last = None
    for li, layer in enumerate(layers):
        if layer.name == name or layer.name.startswith(name + "/"):
            last = li
        elif layer.name.startswith(name + ".") and last is not None:
            last = None  # a submodule's layer after the module's own ones
    return (last, layers[last].get_output(0)) if last is not None else None


def automap_spec(spec, wm, module: torch.nn.Module, precision: str = "fp32", small: bool = False):
    """automatic_layer_map for a ModelSpec: its network defined on the reference backend from
    WeightMap `wm` (fp16 for fp16, fp32 otherwise: the names are the same) and `module` run on a
    seeded input of the spec's shape in its value range. ValueError if nothing maps."""
    from trtbuild.engine.quick import build_spec_network
    from trtbuild.onnx_export.reference_network import new_reference_network

    network = new_reference_network(spec.name)
    build_spec_network(network, spec, wm, "fp16" if precision == "fp16" else "fp32", small)
    lo, hi = spec.value_range
    gen = torch.Generator().manual_seed(0)
    x = torch.rand(tuple(spec.input_shape(small)), generator=gen) * (hi - lo) + lo
    try:
        device = next(module.parameters()).device
    except StopIteration:
        device = torch.device("cpu")
    mapping, unmapped = automatic_layer_map(network, module, x.to(device))
    if not mapping:
        raise ValueError(f"model '{spec.name}': no network tensor matches a torch module by name and shape, so "
                         "layerwise parity has nothing to compare; name the layers after the modules (docs: "
                         "'Your own model') or give the ModelSpec a layer_map")
    return mapping, unmapped
