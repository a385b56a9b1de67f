"""Layer builders: plain functions `(network, tensor, params..., name) -> ITensor`.

Each builder names every layer it adds (and that layer's output tensor) under `name`, e.g.
"conv4_3_norm/sumsq", and runs unchanged on the real tensorrt module and the reference backend.

The builders a network function written from a PyTorch ``forward`` uses most are importable from here
(``from trtbuild.layers import linear, gelu, multi_head_attention``); every builder lives in its module.
``slice`` is here too but left out of ``__all__``, so that ``import *`` does not shadow the builtin.
"""

from .activation import gelu, hardsigmoid, hardswish, mish, prelu, relu6, silu
from .attention import (AttentionWeights, attention_path, multi_head_attention, planned_multi_head_attention,
                        scaled_dot_product_attention)
from .basic import add, avg_pool, conv, global_avg_pool, linear, max_pool, relu
from .embeddings import embedding
from .normalization import layer_norm
from .planned import planned_linear
from .recurrent import lstm
from .resize import interpolate
from .tensor import DimOf, chunk, concat, expand, flatten, matmul, permute, reshape, select, softmax, split, transpose
from .tensor import slice  # noqa: A004, F401 - PyTorch's name; not in __all__ (see above)

__all__ = ["gelu", "hardsigmoid", "hardswish", "mish", "prelu", "relu6", "silu", "AttentionWeights", "attention_path",
           "multi_head_attention", "planned_multi_head_attention", "scaled_dot_product_attention", "add", "avg_pool",
           "conv", "global_avg_pool", "linear", "max_pool", "relu", "embedding", "layer_norm", "lstm", "planned_linear",
           "interpolate", "DimOf", "chunk", "concat", "expand", "flatten", "matmul", "permute", "reshape", "select",
           "softmax", "split", "transpose"]
