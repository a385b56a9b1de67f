"""TensorRT network-definition methods that the reference backend does not implement.

A user porting a model calls `network.add_topk(...)` the way TensorRT's documentation shows. On the reference
backend a plain AttributeError ("'INetworkDefinition' object has no attribute 'add_topk'") reads like a
typo and ends the CLI with a traceback. This module turns it into one sentence that names the method and says
which backend builds it. The error is an AttributeError, so `hasattr(network, name)` stays False and code that
probes for a layer (a builder choosing IAttention where the backend has it) takes its other path; it is also a
NotImplementedError, so the CLI reports it as one line instead of a traceback.
"""

from __future__ import annotations

#: The add_* methods of TensorRT 11.4's INetworkDefinition (10.16 has all of them but add_attention_v2;
#: TensorRT-RTX 1.7 all but add_plugin, add_plugin_v2 and add_plugin_v3).
TENSORRT_ADD_METHODS = frozenset({
    "add_activation", "add_assertion", "add_attention", "add_attention_v2", "add_cast", "add_concatenation",
    "add_constant", "add_convolution_nd", "add_cumulative", "add_deconvolution_nd", "add_dequantize",
    "add_dist_collective", "add_dynamic_quantize", "add_dynamic_quantize_v2", "add_einsum", "add_elementwise",
    "add_fill", "add_gather", "add_gather_v2", "add_grid_sample", "add_identity", "add_if_conditional", "add_input",
    "add_kv_cache_update", "add_loop", "add_lrn", "add_matrix_multiply", "add_moe", "add_nms", "add_non_zero",
    "add_normalization", "add_normalization_v2", "add_one_hot", "add_padding_nd", "add_parametric_relu",
    "add_plugin", "add_plugin_v2", "add_plugin_v3", "add_pooling_nd", "add_quantize", "add_ragged_softmax",
    "add_reduce", "add_resize", "add_reverse_sequence", "add_rotary_embedding", "add_scale", "add_scale_nd",
    "add_scatter", "add_select", "add_shape", "add_shuffle", "add_slice", "add_softmax", "add_squeeze",
    "add_topk", "add_unary", "add_unsqueeze",
})

#: Methods the reference does not build, with the reason (TensorRT-RTX 1.7 lacks the legacy plugin calls).
_NEVER = {
    "add_plugin": "TensorRT's legacy plugin API (IPluginV2), which trtbuild does not support: use add_plugin_v3 "
                  "with an IPluginV3",
    "add_plugin_v2": "TensorRT's legacy plugin API (IPluginV2), which trtbuild does not support: use add_plugin_v3 "
                     "with an IPluginV3",
    "add_moe": "a mixture-of-experts layer whose result TensorRT does not define (IMoELayer's documentation names "
               "its inputs and attributes but not the weight layouts, how the expert outputs combine with the "
               "scores, or the SwiGLU formula its limit/alpha/beta parametrize), so the reference cannot compute it: "
               "build it with `--backend tensorrt-rtx` or TensorRT itself",
    "add_dist_collective": "a multi-GPU collective, which the reference backend (one device, no communicator) "
                           "cannot run: build it with TensorRT on a multi-GPU machine",
}


class MissingLayerError(AttributeError, NotImplementedError):
    """A TensorRT network-definition method that the reference backend does not implement."""


def missing_method(owner: str, name: str) -> MissingLayerError:
    """The error for `owner.name`, where `name` is a TensorRT method the reference lacks."""
    if name in _NEVER:
        return MissingLayerError(f"{owner}.{name} is {_NEVER[name]}", name=name)
    return MissingLayerError(
        f"{owner}.{name} is TensorRT API that trtbuild's reference backend does not implement yet: build this "
        "network with `--backend tensorrt-rtx` (TensorRT-RTX's builder has it and needs no GPU) or with TensorRT "
        "itself", name=name)
