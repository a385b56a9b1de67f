"""The add_* methods of the layer types in reference/layers.py, with TensorRT's parameter names and defaults
(the layer types that have a module in reference/ops/ bring their own add_* method)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from .core import Dims, ITensor, NetworkError, Weights
from .enums import (ActivationType, DataType, ElementWiseOperation, MatrixOperation, PaddingMode, PoolingType,
                    ReduceOperation, SampleMode, ScaleMode, UnaryOperation)
from . import layers as L

if TYPE_CHECKING:  # the annotations' names; argtypes.api_types resolves them itself
    from .plugins import IPluginV3


_IDENTITY = tuple(range(Dims.MAX_DIMS))
_FLT_MAX = 3.4028234663852886e38
#: alpha and beta that add_activation gives each type (float32 values, as TensorRT stores them):
#: observed on TensorRT-RTX 1.7 (ONNX's defaults; CLIP unbounded); other types get (0, 0).
#: Changing `type` afterwards keeps them, as there.
_ACTIVATION_DEFAULTS = {
    ActivationType.LEAKY_RELU: (0.009999999776482582, 0.0), ActivationType.ELU: (1.0, 0.0),
    ActivationType.SELU: (1.6732631921768188, 1.0507010221481323), ActivationType.SOFTPLUS: (1.0, 1.0),
    ActivationType.CLIP: (-_FLT_MAX, _FLT_MAX), ActivationType.HARD_SIGMOID: (0.20000000298023224, 0.5),
    ActivationType.SCALED_TANH: (1.0, 1.0), ActivationType.THRESHOLDED_RELU: (1.0, 0.0),
}


class NetworkLayers:
    """The add_* part of INetworkDefinition (a mixin: each method adds its layer through INetworkDefinition._add)."""

    def add_constant(self, shape: Dims, weights: Weights) -> L.IConstantLayer:
        if not isinstance(weights, Weights):  # a numpy array (TensorRT's bindings take one as Weights)
            weights = Weights(weights)
        if weights.size == 0 and not weights._null:
            raise NetworkError("add_constant: the weights hold no values but point at memory (an empty numpy array); "
                               "TensorRT requires count > 0 exactly when values is non-null: pass "
                               "trt.Weights(trt.DataType.<type>) for an empty constant")
        return self._add(L.IConstantLayer, [], {"shape": tuple(Dims(shape))}, {"weights": weights})

    def add_scale(self, input: ITensor, mode: ScaleMode, shift: Weights | None = None, scale: Weights | None = None,
                  power: Weights | None = None) -> L.IScaleLayer:
        """ScaleMode.CHANNEL's documentation: "The channel dimension is assumed to be the third to
        last dimension" (dimension 1 of NCHW, but 0 of a rank-3 and 2 of a rank-5 tensor); builders
        use add_scale_nd with an explicit channel_axis."""
        return self.add_scale_nd(input, mode, shift, scale, power, channel_axis=max(len(input.shape) - 3, 0))

    def add_scale_nd(self, input: ITensor, mode: ScaleMode, shift: Weights | None = None, scale: Weights | None = None,
                     power: Weights | None = None, channel_axis: int = None) -> L.IScaleLayer:
        if channel_axis is None:
            raise TypeError("add_scale_nd() missing required argument 'channel_axis'")
        return self._add(L.IScaleLayer, [input], {"mode": int(mode), "channel_axis": int(channel_axis)},
                         {"shift": shift, "scale": scale, "power": power})

    def add_reduce(self, input: ITensor, op: ReduceOperation, axes: int, keep_dims: bool) -> L.IReduceLayer:
        return self._add(L.IReduceLayer, [input], {"op": int(op), "axes": int(axes), "keep_dims": bool(keep_dims)})

    def add_elementwise(self, input1: ITensor, input2: ITensor, op: ElementWiseOperation) -> L.IElementWiseLayer:
        return self._add(L.IElementWiseLayer, [input1, input2], {"op": int(op)})

    def add_unary(self, input: ITensor, op: UnaryOperation) -> L.IUnaryLayer:
        return self._add(L.IUnaryLayer, [input], {"op": int(op)})

    def add_activation(self, input: ITensor, type: ActivationType) -> L.IActivationLayer:
        alpha, beta = _ACTIVATION_DEFAULTS.get(ActivationType(type), (0.0, 0.0))
        return self._add(L.IActivationLayer, [input], {"type": int(type), "alpha": alpha, "beta": beta})

    def _conv_params(self, num_output_maps, kernel_shape):
        ks = Dims(kernel_shape)
        n = len(ks)
        return {"num_output_maps": int(num_output_maps), "kernel_size_nd": tuple(ks), "stride_nd": (1,) * n,
                "dilation_nd": (1,) * n, "pre_padding": (0,) * n, "post_padding": (0,) * n,
                "padding_mode": int(PaddingMode.EXPLICIT_ROUND_DOWN), "num_groups": 1}

    def add_convolution_nd(self, input: ITensor, num_output_maps: int, kernel_shape: Dims, kernel: Weights,
                           bias: Weights | None = None) -> L.IConvolutionLayer:
        return self._add(L.IConvolutionLayer, [input], self._conv_params(num_output_maps, kernel_shape),
                         {"kernel": kernel, "bias": bias}, eager=False)

    def add_deconvolution_nd(self, input: ITensor, num_output_maps: int, kernel_shape: Dims, kernel: Weights,
                             bias: Weights | None = None) -> L.IDeconvolutionLayer:
        return self._add(L.IDeconvolutionLayer, [input], self._conv_params(num_output_maps, kernel_shape),
                         {"kernel": kernel, "bias": bias}, eager=False)

    def add_pooling_nd(self, input: ITensor, type: PoolingType, window_size: Dims) -> L.IPoolingLayer:
        ws = Dims(window_size)
        n = len(ws)
        return self._add(L.IPoolingLayer, [input], {
            "type": int(type), "window_size_nd": tuple(ws), "stride_nd": (1,) * n, "pre_padding": (0,) * n,
            "post_padding": (0,) * n, "padding_mode": int(PaddingMode.EXPLICIT_ROUND_DOWN), "blend_factor": 0.0,
            "average_count_excludes_padding": True}, eager=False)

    def add_lrn(self, input: ITensor, window: int, alpha: float, beta: float, k: float) -> L.ILRNLayer:
        return self._add(L.ILRNLayer, [input], {"window_size": int(window), "alpha": float(alpha),
                                                 "beta": float(beta), "k": float(k)})

    def _normalization(self, input, scale, bias, axesMask, v2):
        return self._add(L.INormalizationLayer, [input, scale, bias],
                         {"axes": int(axesMask), "epsilon": 1e-5, "num_groups": 1, "is_v2": v2}, eager=False)

    def add_normalization(self, input: ITensor, scale: ITensor, bias: ITensor, axesMask: int) -> L.INormalizationLayer:
        return self._normalization(input, scale, bias, axesMask, False)

    def add_normalization_v2(self, input: ITensor, scale: ITensor,
                             bias: ITensor, axesMask: int) -> L.INormalizationLayer:
        return self._normalization(input, scale, bias, axesMask, True)

    def add_shuffle(self, input: ITensor) -> L.IShuffleLayer:
        return self._add(L.IShuffleLayer, [input], {"first_transpose": _IDENTITY, "reshape_dims": None,
                                                     "second_transpose": _IDENTITY, "zero_is_placeholder": True})

    def add_concatenation(self, inputs: Sequence[ITensor]) -> L.IConcatenationLayer:
        inputs = list(inputs)
        if not inputs:
            raise NetworkError("add_concatenation: needs at least one input")
        rank = len(inputs[0].shape)
        return self._add(L.IConcatenationLayer, inputs, {"axis": rank - 3 if rank >= 3 else 0}, eager=False)

    def add_slice(self, input: ITensor, start: Dims, shape: Dims, stride: Dims) -> L.ISliceLayer:
        return self._add(L.ISliceLayer, [input], {"start": tuple(Dims(start)), "shape": tuple(Dims(shape)),
                                                  "stride": tuple(Dims(stride)),
                                                  "mode": int(SampleMode.STRICT_BOUNDS)},
                         eager=False)

    def add_padding_nd(self, input: ITensor, pre_padding: Dims, post_padding: Dims) -> L.IPaddingLayer:
        return self._add(L.IPaddingLayer, [input], {"pre_padding_nd": tuple(Dims(pre_padding)),
                                                     "post_padding_nd": tuple(Dims(post_padding))})

    def add_matrix_multiply(self, input0: ITensor, op0: MatrixOperation,
                            input1: ITensor, op1: MatrixOperation) -> L.IMatrixMultiplyLayer:
        return self._add(L.IMatrixMultiplyLayer, [input0, input1], {"op0": int(MatrixOperation(op0)),
                                                                     "op1": int(MatrixOperation(op1))})

    def add_softmax(self, input: ITensor) -> L.ISoftMaxLayer:
        rank = len(input.shape)
        return self._add(L.ISoftMaxLayer, [input], {"axes": 1 << (rank - 3 if rank >= 3 else 0)}, eager=False)

    def add_cast(self, input: ITensor, to_type: DataType) -> L.ICastLayer:
        return self._add(L.ICastLayer, [input], {"to_type": int(DataType(to_type))})

    def add_identity(self, input: ITensor) -> L.IIdentityLayer:
        return self._add(L.IIdentityLayer, [input], {})

    def add_quantize(self, input: ITensor, scale: ITensor, output_type: DataType = DataType.INT8) -> L.IQuantizeLayer:
        """TensorRT 10's default output_type (INT8); TensorRT 11 requires it. Semantics: quantize.py. Checked
        when a shape or type is read or at build (not here): the axis is usually set after the add."""
        return self._add(L.IQuantizeLayer, [input, scale], {"axis": -1, "to_type": int(DataType(output_type))},
                         eager=False)

    def add_dequantize(self, input: ITensor, scale: ITensor,
                       output_type: DataType = DataType.FLOAT) -> L.IDequantizeLayer:
        """TensorRT 10's default output_type (FLOAT); TensorRT 11 requires it."""
        return self._add(L.IDequantizeLayer, [input, scale], {"axis": -1, "to_type": int(DataType(output_type))},
                         eager=False)

    def add_plugin_v3(self, inputs: Sequence[ITensor],
                      shape_inputs: Sequence[ITensor], plugin: IPluginV3) -> L.IPluginV3Layer:
        from .plugins import IPluginV3

        if list(shape_inputs):
            raise NetworkError("add_plugin_v3: shape inputs are not supported by the reference backend")
        if not isinstance(plugin, IPluginV3):
            raise NetworkError("add_plugin_v3: expected a plugin created by a reference plugin creator, got "
                               f"{type(plugin).__name__}")
        inputs = list(inputs)
        n = len(plugin._output_shapes([tuple(t.shape) for t in inputs]))
        return self._add(L.IPluginV3Layer, inputs, None, plugin=plugin, num_outputs=n)
