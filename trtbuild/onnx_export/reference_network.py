"""Networks on the reference backend for the ONNX export: empty ones and zoo models with their weights.

    network, outputs = build_reference_network("resnet18", small=True)   # seeded PyTorch weights
    network, outputs = build_reference_network(spec, "resnet18.wts", precision="fp16")
"""

from __future__ import annotations

from trtbuild import reference as trt


def new_reference_network(name: str | None = None) -> trt.INetworkDefinition:
    """An empty strongly typed network on the reference backend (named `name` when given)."""
    network = trt.Builder(trt.Logger()).create_network(1 << int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED))
    if name is not None:
        network.name = name
    return network


def build_reference_network(spec_or_name, weights=None, *, precision: str = "fp32", small: bool = False,
                            seed: int = 0, quant=None) -> tuple[trt.INetworkDefinition, dict]:
    """Build a zoo model layer by layer on the reference backend, its outputs named and marked.

    `spec_or_name`: a registry model name or a ModelSpec. `weights`: a weight file (.wts,
    .safetensors, .pt) or a WeightMap; None takes the registry's PyTorch model (`seed`, `small`).
    `precision` is the network input type ("fp32" or "fp16"), `small` the model's small test
    configuration. The network is named after the model. Returns (network, {output name: ITensor})
    in `spec.output_names` order. Raises KeyError for an unknown model name, WeightsError for an
    unreadable weight file, ValueError for another precision and RuntimeError for a failed build.
    int8/fp8 (and --keep): `quant`, a trtbuild.quant.QuantPlan (trtbuild.engine.quant_plan); the
    Q/DQ layers export as QuantizeLinear/DequantizeLinear.
    """
    from trtbuild.engine.quick import build_spec_network
    from trtbuild.models import registry
    from trtbuild.weights import WeightMap

    spec = registry.get(spec_or_name) if isinstance(spec_or_name, str) else spec_or_name
    if weights is None:
        wm = WeightMap.from_module(registry.get_torch_model(spec.name, seed=seed, small=small))
    elif isinstance(weights, WeightMap):
        wm = weights
    else:
        wm = WeightMap.load(weights)
    network = new_reference_network(spec.name)
    outs = build_spec_network(network, spec, wm, precision, small, quant)
    outputs = {}
    for name in spec.output_names:
        outs[name].name = name
        network.mark_output(outs[name])
        outputs[name] = outs[name]
    return network, outputs


__all__ = ["new_reference_network", "build_reference_network"]
