"""A tiny ViT (patch-embedding conv, flatten/transpose, class token concat, position embedding, pre-norm
multi-head attention block, GELU MLP, head on the class token) as a PyTorch module and as a network
function written with trtbuild.layers builders only (no raw ``network.add_*`` call); used by the builder
and ONNX tests."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from trtbuild.layers import activation, attention, basic, normalization, tensor
from trtbuild.layers.common import constant

IMG, PATCH, DIM, HEADS, MLP, CLASSES, BATCH = 16, 4, 32, 4, 64, 10, 2


class TinyViT(nn.Module):
    def __init__(self):
        super().__init__()
        self.patch = nn.Conv2d(3, DIM, PATCH, PATCH)
        self.cls_token = nn.Parameter(torch.randn(1, 1, DIM))
        self.pos_embed = nn.Parameter(torch.randn(1, (IMG // PATCH) ** 2 + 1, DIM) * 0.5)
        self.norm1 = nn.LayerNorm(DIM)
        self.attn = nn.MultiheadAttention(DIM, HEADS, batch_first=True)
        self.norm2 = nn.LayerNorm(DIM)
        self.fc1, self.fc2 = nn.Linear(DIM, MLP), nn.Linear(MLP, DIM)
        self.norm = nn.LayerNorm(DIM)
        self.head = nn.Linear(DIM, CLASSES)

    def forward(self, x):
        x = self.patch(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1) + self.pos_embed
        h = self.norm1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        x = x + self.fc2(F.gelu(self.fc1(self.norm2(x))))
        return self.head(self.norm(x)[:, 0])


def vit_network(network, x, wm):
    """TinyViT.forward with builders: one line per line of the module's forward."""
    def ln(t, key):
        return normalization.layer_norm(network, t, DIM, wm.get(f"{key}.weight"), wm.get(f"{key}.bias"), 1e-5, key)

    def fc(t, key):
        return basic.linear(network, t, wm.get(f"{key}.weight"), wm.get(f"{key}.bias"), key)

    y = basic.conv(network, x, wm.get("patch.weight"), wm.get("patch.bias"), "patch", stride=PATCH)
    y = tensor.transpose(network, tensor.flatten(network, y, "patch/flatten", start_dim=2), 1, 2, "patch/tokens")
    cls = tensor.expand(network, constant(network, wm.get("cls_token"), x, "cls_token"), (BATCH, -1, -1), "cls")
    y = tensor.concat(network, [cls, y], 1, "tokens")
    y = basic.add(network, y, constant(network, wm.get("pos_embed"), x, "pos_embed"), "pos")
    h = ln(y, "norm1")
    mha = attention.AttentionWeights.from_state_dict(wm, "attn.")
    y = basic.add(network, y, attention.multi_head_attention(network, h, h, h, mha, HEADS, "attn", batch_first=True),
                  "res1")
    y = basic.add(network, y, fc(activation.gelu(network, fc(ln(y, "norm2"), "fc1"), "gelu"), "fc2"), "res2")
    return fc(tensor.select(network, ln(y, "norm"), 1, 0, "cls_out"), "head")
