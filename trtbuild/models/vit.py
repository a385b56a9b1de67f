"""Vision Transformer network builder (timm's ``vit_tiny_patch16_224`` names, see trtbuild.models.pytorch.vit).

Built from trtbuild.layers builders only (no raw ``network.add_*`` here). The weights decide the size:
embedding width D from ``cls_token``, patch size from ``patch_embed.proj.weight``, depth from the
``blocks.N`` keys, MLP width and classes from ``fc1`` and ``head``; heads are D / 64 (every timm ViT
size uses head dim 64; weights cannot tell). timm's fused ``qkv`` Linear is one linear layer whose
(B, N, 3D) output one shuffle views as (3, B, heads, N, 64); q, k and v are its three slices (gathers,
which keep the batch dynamic) into trtbuild.layers.attention.scaled_dot_product_attention.

INT8 / FP8 (``quant``, trtbuild.layers.planned, NVIDIA's explicit-quantization placement): the patch
conv and every Linear (qkv, proj, fc1, fc2, head) take quantized inputs; so do attention's two matrix
multiplies (the scaled query and the key, the softmax output and the value, ``B.attn/attention/scores``
and ``B.attn/attention``, with the ranges calibration records for ``B.attn.sdpa.query|key|value``); each residual add
quantizes its identity input (the other comes from proj / fc2, into which it can fuse). LayerNorm, the
softmax, GELU and the position-embedding add stay in the float type.

Dynamic batch: build with an input of shape (-1, 3, H, W) and a batch profile (build_plan's ``batch``,
the CLI's ``--batch 1,2,4``); the class token is broadcast to the run's batch by ``expand`` with the
batch read from the patch tokens' shape (``DimOf``). H and W must be known: ``pos_embed`` holds one
vector per patch of that size.

Layer / tensor names (module names; ``B`` = ``blocks.N``)::

    patch_embed.proj (conv)  patch_embed/flatten  patch_embed (tokens, B x patches x D)
    cls_token  cls_token/expand (+ its shape layers)  tokens (concat)  pos_embed  pos_embed/add
    B.norm1  B.attn.qkv  B.attn/heads  B.attn/q|k|v  B.attn/attention...  B.attn/merge  B.attn.proj  B.add
    B.norm2  B.mlp.fc1  B.mlp.act  B.mlp.fc2  B.add_1 (the block's output, named ``B``)
    norm  pool (the class token)  head -> "logits"

Sizes: full = vit_tiny at 224x224 (196 patches + the class token); small = 2 blocks at 48x48 (9 patches),
every other weight of the full model's shape.
"""

from __future__ import annotations

import math
import re

from trtbuild.layers import activation, basic, normalization, tensor
from trtbuild.layers.common import BuilderError, constant
from trtbuild.layers.planned import planned_add, planned_attention, planned_conv, planned_linear
from trtbuild.models import pytorch as tm
from trtbuild.models.pytorch.vit import HEAD_DIM, LN_EPS

from .registry import ModelSpec, register

__all__ = ["build_vit", "vit_layer_map", "vit_depth"]

FULL_SIZE, SMALL_SIZE, SMALL_DEPTH = 224, 48, 2
OUTPUT = "logits"


def vit_depth(wm) -> int:
    """Number of transformer blocks: the ``blocks.N`` in the weights, numbered 0..depth-1."""
    key = re.compile(r"blocks\.(\d+)\.attn\.qkv\.weight$")
    ids = {int(m.group(1)) for k in wm.keys() if (m := key.match(k))}
    if not ids or ids != set(range(len(ids))):
        raise BuilderError(f"vit: weights for blocks.0..blocks.N-1 are missing or not numbered 0..N-1 "
                           f"(found {sorted(ids)}) in {wm.source}")
    return len(ids)


def _linear(network, x, wm, p: str, quant=None):
    b = wm.get(f"{p}.bias").reshape(-1)
    return planned_linear(network, x, wm.get(f"{p}.weight", (b.size, -1)), b, p, quant, flatten=False)


def _layer_norm(network, x, wm, p: str, dim: int):
    return normalization.layer_norm(network, x, dim, wm.get(f"{p}.weight"), wm.get(f"{p}.bias"), LN_EPS, p)


def _attention(network, x, wm, p: str, dim: int, quant=None):
    """timm's Attention ``p``: qkv, heads split, sdpa, heads merged, proj."""
    heads = dim // HEAD_DIM
    qkv = _linear(network, x, wm, f"{p}.qkv", quant)
    # (B, N, 3D) -> (B, N, 3, heads, d) -> (3, B, heads, N, d); 0 copies B and N, so the batch stays dynamic
    split = tensor.shuffle(network, qkv, f"{p}/heads", dims=(0, 0, 3, heads, HEAD_DIM), then=(2, 0, 3, 1, 4))
    q, k, v = (tensor.select(network, split, 0, i, f"{p}/{part}") for i, part in enumerate("qkv"))
    y = planned_attention(network, q, k, v, f"{p}/attention", quant, p)
    merged = tensor.shuffle(network, y, f"{p}/merge", perm=(0, 2, 1, 3), dims=(0, 0, dim))
    return _linear(network, merged, wm, f"{p}.proj", quant)


def _block(network, x, wm, p: str, dim: int, quant=None):
    a = _attention(network, _layer_norm(network, x, wm, f"{p}.norm1", dim), wm, f"{p}.attn", dim, quant)
    x = planned_add(network, x, a, f"{p}.add", quant)
    h = _linear(network, _layer_norm(network, x, wm, f"{p}.norm2", dim), wm, f"{p}.mlp.fc1", quant)
    h = _linear(network, activation.gelu(network, h, f"{p}.mlp.act"), wm, f"{p}.mlp.fc2", quant)
    return planned_add(network, x, h, f"{p}.add_1", quant)


def _patch_embed(network, x, wm, dim: int, quant=None):
    """PatchEmbed: the P x P conv of stride P, flattened to tokens (B, patches, D)."""
    cin = int(x.shape[1])
    b = wm.get("patch_embed.proj.bias").reshape(-1)
    size = int(math.prod(wm.shape_of("patch_embed.proj.weight")))
    patch = math.isqrt(size // max(dim * cin, 1))
    if b.size != dim or dim * cin * patch * patch != size:
        raise BuilderError(f"vit: patch_embed.proj.weight of {size} values is not ({dim}, {cin}, P, P) for the "
                           f"embedding width {dim} and the input's {cin} channels")
    h, w = (int(d) for d in x.shape[2:])
    if h < 0 or w < 0 or h % patch or w % patch:
        raise BuilderError(f"vit: input '{x.name}' {tuple(x.shape)} needs H and W known at build time and "
                           f"multiples of the patch size {patch}")
    y = planned_conv(network, x, wm.get("patch_embed.proj.weight", (dim, cin, patch, patch)), b, "patch_embed.proj",
                     quant, stride=patch)
    return tensor.transpose(network, tensor.flatten(network, y, "patch_embed/flatten", start_dim=2), 1, 2,
                            "patch_embed")


def build_vit(network, wm, x, quant=None) -> dict:
    """Add a ViT read from ``wm`` (timm's names); returns ``{"logits": ITensor}`` (N, classes).
    quant: a trtbuild.quant.QuantPlan (int8/fp8 Q/DQ or kept layers, trtbuild.layers.planned) or None."""
    if len(tuple(x.shape)) != 4:
        raise BuilderError(f"vit: input '{x.name}' {tuple(x.shape)} must be (N, C, H, W)")
    dim = math.prod(wm.shape_of("cls_token"))  # not read here: each key is read once, for its layer
    if dim % HEAD_DIM:
        raise BuilderError(f"vit: the embedding width {dim} (cls_token) is not a multiple of the head dim {HEAD_DIM}")
    y = _patch_embed(network, x, wm, dim, quant)
    tokens = int(y.shape[1]) + 1
    pos = wm.get("pos_embed")
    if pos.size != tokens * dim:
        raise BuilderError(f"vit: pos_embed has {pos.size // dim} positions but input '{x.name}' "
                           f"{tuple(x.shape)} gives {tokens} tokens (patches + the class token)")
    cls = constant(network, wm.get("cls_token", (1, 1, dim)), x, "cls_token")
    cls = tensor.expand(network, cls, (tensor.DimOf(y, 0), -1, -1), "cls_token/expand")
    y = tensor.concat(network, [cls, y], 1, "tokens")
    y = basic.add(network, y, constant(network, pos.reshape(1, tokens, dim), x, "pos_embed"), "pos_embed/add")
    for i in range(vit_depth(wm)):
        y = _block(network, y, wm, f"blocks.{i}", dim, quant)
    y = tensor.select(network, _layer_norm(network, y, wm, "norm", dim), 1, 0, "pool")
    logits = _linear(network, y, wm, "head", quant)
    logits.name = OUTPUT
    return {OUTPUT: logits}


def vit_layer_map(depth: int) -> dict[str, str]:
    """Network tensor -> torch module (single call per forward) with the same output."""
    m = {"patch_embed.proj": "patch_embed.proj", "patch_embed": "patch_embed"}
    for i in range(depth):
        p = f"blocks.{i}"
        m.update({f"{p}.{n}": f"{p}.{n}" for n in ("norm1", "attn.qkv", "attn.proj", "norm2", "mlp.fc1", "mlp.act",
                                                   "mlp.fc2")})
        m[f"{p}.add_1"] = p
    m.update({"norm": "norm", OUTPUT: "head"})
    return m


def _factory(seed: int = 0, small: bool = False):
    if small:
        return tm.vit_tiny(img_size=SMALL_SIZE, depth=SMALL_DEPTH, seed=seed)
    return tm.vit_tiny(seed=seed)


def _input_shape(small: bool = False) -> tuple:
    s = SMALL_SIZE if small else FULL_SIZE
    return (1, 3, s, s)


register(ModelSpec(
    name="vit_tiny",
    description="ViT-Tiny/16 (timm vit_tiny_patch16_224 state-dict names): 12 pre-norm blocks, D 192, 3 heads",
    torch_factory=_factory,
    build_network=build_vit,
    input_shape=_input_shape,
    output_names=[OUTPUT],
    layer_map=vit_layer_map(SMALL_DEPTH),  # the small model's blocks (the full model has them too)
    notes=f"full: 1x3x{FULL_SIZE}x{FULL_SIZE} (196 patches of 16x16); small: {SMALL_DEPTH} blocks at "
          f"1x3x{SMALL_SIZE}x{SMALL_SIZE} (9 patches of 16x16), other weights as the full model's; the batch may "
          "be dynamic",
))
