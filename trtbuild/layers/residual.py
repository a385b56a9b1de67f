"""Which input of a residual add is the identity, told from the network graph and the calibration,
never from the order in which a builder passes the operands.

NVIDIA's Q/DQ placement quantizes the residual (identity) input of an add, so that the add can fuse
into the convolution that produces the other input. PyTorch writes both orders (torchvision's
ResNet ``out += identity``, MobileNetV2 ``x + self.conv(x)``), and a builder may pass the operands
either way, so the order says nothing. Instead each network operand is matched to one of the add's
calibrated inputs (trtbuild.quant.plan.AddInput) by name, as trtbuild's builders name layers after
PyTorch modules: the layer producing the operand (a ``<module>.add`` layer counts as ``<module>``,
the module that returned the sum), or the convolution/matmul it comes straight from, is the
calibrated input's module, its Conv/Linear, or a module containing them (``layer1.0.downsample`` for
``layer1.0.downsample.0``). Where names do not decide, one operand straight from a convolution/
matmul and one not, on both sides, do. The identity is then the calibrated input that no Conv/Linear
produced; with both (a downsampling shortcut) or neither, PyTorch's second operand, as
pytorch-quantization's ResNet quantizes ``identity`` in ``out += identity``.

    identity, amax = residual_input(network, x, residual, "layer1.0.add", quant.add_operands("layer1.0.add"))
"""

from __future__ import annotations

import re

from .common import BuilderError

__all__ = ["residual_input"]

_ADD_NAME = re.compile(r"^(?P<module>.+)\.add(_\d+)?$")


def _producers(network) -> dict:
    """{tensor name: the layer producing it}."""
    found = {}
    for i in range(network.num_layers):
        layer = network.get_layer(i)
        for j in range(layer.num_outputs):
            found.setdefault(layer.get_output(j).name, layer)
    return found


def _kind(layer) -> str:
    """CONVOLUTION, MATRIX_MULTIPLY, ...: ILayer.type, the LayerType (get_layer returns an ILayer on every
    backend)."""
    kind = layer.type
    return getattr(kind, "name", str(kind).split(".")[-1])


def _conv_group(layer, producers) -> str | None:
    """`layer`'s name if it is a convolution/matmul, or the last layer of a group named after one
    (``name/matmul`` + bias ``name``, ``name/fp16`` + cast back ``name``), else None."""
    group, stack, seen = layer.name, [layer], set()
    while stack:
        current = stack.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if _kind(current) in ("CONVOLUTION", "MATRIX_MULTIPLY"):
            return group
        for i in range(current.num_inputs):
            t = current.get_input(i)
            before = producers.get(t.name) if t is not None else None
            if before is not None and (before.name == group or before.name.startswith(group + "/")):
                stack.append(before)
    return None


def _names(tensor, producers) -> tuple[set[str], bool]:
    """(the module names the operand can stand for, whether it comes straight from a conv/matmul)."""
    layer = producers.get(tensor.name)
    if layer is None:  # a network input
        return {tensor.name}, False
    names = {layer.name, tensor.name}
    names |= {found["module"] for n in list(names) if (found := _ADD_NAME.match(n))}
    conv = _conv_group(layer, producers)
    return names | ({conv} if conv else set()), conv is not None


def _matches(names: set[str], operand) -> bool:
    wanted = {n for n in (operand.module, operand.source) if n}
    return any(w == n or w.startswith(n + ".") for n in names for w in wanted)


def residual_input(network, x, residual, name: str, operands, identity: int | None = None):
    """(the network operand that is the add's identity input, the amax to quantize it with), given
    the add's two calibrated inputs `operands` (QuantPlan.add_operands, PyTorch's order). BuilderError
    in one sentence when the graph cannot tell which operand is which calibrated input. `identity`: PyTorch's
    operand index of the identity where the calibration cannot tell (both or neither input straight from a
    Conv/Linear, e.g. YOLOv8's ``x + cv2(cv1(x))`` whose cv2 ends in a SiLU); default the second."""
    producers = _producers(network)
    (nx, cx), (nr, cr) = _names(x, producers), _names(residual, producers)
    straight = _matches(nx, operands[0]) + _matches(nr, operands[1])
    crossed = _matches(nx, operands[1]) + _matches(nr, operands[0])
    if straight == crossed:  # names do not decide: an operand from a conv on both sides does
        conv_in_torch = [op.source is not None for op in operands]
        if cx == cr or conv_in_torch[0] == conv_in_torch[1]:
            raise BuilderError(
                f"residual add '{name}': the graph does not tell which of its inputs '{x.name}' and "
                f"'{residual.name}' is PyTorch's {operands[0].key} and which {operands[1].key}; name the layers "
                "producing them after their PyTorch modules, as the calibration keys them")
        straight, crossed = (1, 0) if cx == conv_in_torch[0] else (0, 1)
    network_order = (x, residual) if straight > crossed else (residual, x)
    plain = [k for k, op in enumerate(operands) if op.source is None]
    if len(plain) == 1:
        identity = plain[0]
    elif identity not in (0, 1):
        identity = 1
    return network_order[identity], operands[identity].amax
