"""Vision Transformer with timm's module tree, so its state dict is timm's ``vit_tiny_patch16_224``.

Written from the architecture timm publishes (``timm/models/vision_transformer.py``: VisionTransformer,
Block, Attention; ``timm/layers/patch_embed.py``, ``mlp.py``); no timm code or package is needed. Only the
modules that hold weights or compute something are here (timm's dropouts, LayerScale and the norms that
are Identity for this model have no state and do nothing at inference), so the keys are timm's::

    cls_token [1, 1, D]   pos_embed [1, 1 + patches, D]   patch_embed.proj.{weight [D, 3, P, P], bias}
    blocks.N.norm1.{weight,bias}  blocks.N.attn.qkv.{weight [3D, D], bias}  blocks.N.attn.proj.{weight, bias}
    blocks.N.norm2.{weight,bias}  blocks.N.mlp.fc1.{weight [4D, D], bias}   blocks.N.mlp.fc2.{weight [D, 4D], bias}
    norm.{weight,bias}   head.{weight [classes, D], bias}

vit_tiny: D = 192, 12 blocks of 3 heads (head dim 64, as every timm ViT size), MLP ratio 4, LayerNorm
eps 1e-6, exact (erf) GELU, qkv with bias, class-token pooling (``norm(x)[:, 0]`` into ``head``).

The attention is timm's: one fused ``qkv`` Linear, viewed as (B, N, 3, heads, head_dim) and permuted
to (3, B, heads, N, head_dim), then ``F.scaled_dot_product_attention`` (scale head_dim ** -0.5), heads
merged back to (B, N, D) and ``proj``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .common import seeded

__all__ = ["VisionTransformer", "vit_tiny", "LN_EPS", "HEAD_DIM"]

LN_EPS = 1e-6
HEAD_DIM = 64


class PatchEmbed(nn.Module):
    """Non-overlapping P x P patches projected by a conv of stride P, as tokens (B, patches, D)."""

    def __init__(self, patch: int, in_chans: int, dim: int):
        super().__init__()
        self.proj = nn.Conv2d(in_chans, dim, patch, patch)

    def forward(self, x):
        return self.proj(x).flatten(2).transpose(1, 2)


class Attention(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, dim * 3)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        b, n, c = x.shape
        q, k, v = self.qkv(x).reshape(b, n, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4).unbind(0)
        y = F.scaled_dot_product_attention(q, k, v)
        return self.proj(y.transpose(1, 2).reshape(b, n, c))


class Mlp(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class Block(nn.Module):
    """Pre-norm transformer block: ``x + attn(norm1(x))``, then ``x + mlp(norm2(x))``."""

    def __init__(self, dim: int, heads: int, mlp_ratio: float):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=LN_EPS)
        self.attn = Attention(dim, heads)
        self.norm2 = nn.LayerNorm(dim, eps=LN_EPS)
        self.mlp = Mlp(dim, int(dim * mlp_ratio))

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class VisionTransformer(nn.Module):
    """timm's VisionTransformer with a class token, learned position embedding and token pooling.
    The input size is fixed by ``pos_embed`` (timm resamples it for other sizes; this model refuses)."""

    def __init__(self, img_size: int = 224, patch_size: int = 16, in_chans: int = 3, num_classes: int = 1000,
                 embed_dim: int = 192, depth: int = 12, num_heads: int = 3, mlp_ratio: float = 4.0):
        super().__init__()
        if img_size % patch_size:
            raise ValueError(f"VisionTransformer: img_size {img_size} is not a multiple of patch_size {patch_size}")
        self.img_size = img_size
        self.cls_token = nn.Parameter(torch.zeros(1, 1, embed_dim))
        self.pos_embed = nn.Parameter(torch.zeros(1, (img_size // patch_size) ** 2 + 1, embed_dim))
        self.patch_embed = PatchEmbed(patch_size, in_chans, embed_dim)
        self.blocks = nn.Sequential(*[Block(embed_dim, num_heads, mlp_ratio) for _ in range(depth)])
        self.norm = nn.LayerNorm(embed_dim, eps=LN_EPS)
        self.head = nn.Linear(embed_dim, num_classes)

    def forward(self, x):
        if tuple(x.shape[2:]) != (self.img_size, self.img_size):
            raise ValueError(f"VisionTransformer: input H and W must be {self.img_size}, got {tuple(x.shape[2:])}")
        x = self.patch_embed(x)
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1) + self.pos_embed
        x = self.norm(self.blocks(x))
        return self.head(x[:, 0])


def vit_tiny(img_size: int = 224, depth: int = 12, num_classes: int = 1000, seed: int | None = 0) -> VisionTransformer:
    """vit_tiny_patch16_224 (D 192, 3 heads, patch 16), PyTorch's default init drawn under ``seed``; the class
    token and position embedding (zeros at construction, as in timm) drawn from N(0, 0.5^2) and the LayerNorms'
    scale from U(0.5, 1.5) and shift from N(0, 0.2^2), so that each of them changes the output."""
    with seeded(seed):
        model = VisionTransformer(img_size, 16, 3, num_classes, 192, depth, 3, 4.0)
    gen = torch.Generator().manual_seed(0 if seed is None else int(seed))
    with torch.no_grad():
        for p in (model.cls_token, model.pos_embed):
            p.copy_(torch.randn(p.shape, generator=gen) * 0.5)
        for m in model.modules():
            if isinstance(m, nn.LayerNorm):
                m.weight.copy_(torch.rand(m.weight.shape, generator=gen) + 0.5)
                m.bias.copy_(torch.randn(m.bias.shape, generator=gen) * 0.2)
    return model.eval()
