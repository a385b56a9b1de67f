"""Engine inspector JSON as NVIDIA's TensorRT writes it, for the parser of trtbuild.engine.inspect_json.

TENSORRT_10_JSON: TensorRT 10.x's schema ("Bindings": names). Layers 0, 1 and the last layer (verbatim) of
  NVIDIA/TensorRT tools/experimental/trt-engine-explorer/examples/pytorch/resnet/A100/fp16/
  resnet.onnx.engine.graph.json (commit 768d994b7305b69eb5db2397337ae96e36586b41, Apache-2.0): a ResNet built
  by TensorRT in fp16 on an A100 with ProfilingVerbosity.DETAILED; the layers between them are left out.
TENSORRT_11_IO_JSON: TensorRT 11.x's schema ("I/O Tensors": objects), the "After (TensorRT 11.x)" example of
  https://docs.nvidia.com/deeplearning/tensorrt/11.4.0/api/migration/tensorrt-10x-to-11x-IEngineInspector.html
  (also in the 11.0.0 and 11.3.0 guides); the guide shows the I/O field only, so "Layers" here is a list of
  names, what TensorRT prints under its default ProfilingVerbosity.LAYER_NAMES_ONLY.
"""

TENSORRT_10_JSON = r'''{"Layers": [{
  "Name": "Reformatting CopyNode for Input Tensor 0 to Conv_0 + Relu_1",
  "LayerType": "Reformat",
  "Inputs": [
  {
    "Name": "input.1",
    "Location": "Device",
    "Dimensions": [32,3,224,224],
    "Format/Datatype": "Row major linear FP32"
  }],
  "Outputs": [
  {
    "Name": "Reformatted Input Tensor 0 to Conv_0 + Relu_1",
    "Location": "Device",
    "Dimensions": [32,3,224,224],
    "Format/Datatype": "Channel major FP16 format where channel % 4 == 0"
  }],
  "ParameterType": "Reformat",
  "Origin": "REFORMAT",
  "TacticValue": "0x0000000000000000"
},{
  "Name": "Conv_0 + Relu_1",
  "LayerType": "CaskConvolution",
  "Inputs": [
  {
    "Name": "Reformatted Input Tensor 0 to Conv_0 + Relu_1",
    "Location": "Device",
    "Dimensions": [32,3,224,224],
    "Format/Datatype": "Channel major FP16 format where channel % 4 == 0"
  }],
  "Outputs": [
  {
    "Name": "onnx::MaxPool_125",
    "Location": "Device",
    "Dimensions": [32,64,112,112],
    "Format/Datatype": "Channel major FP16 format where channel % 8 == 0"
  }],
  "ParameterType": "Convolution",
  "Kernel": [7,7],
  "PaddingMode": "kEXPLICIT_ROUND_DOWN",
  "PrePadding": [3,3],
  "PostPadding": [3,3],
  "Stride": [2,2],
  "Dilation": [1,1],
  "OutMaps": 64,
  "Groups": 1,
  "Weights": {"Type": "Half", "Count": 9408},
  "Bias": {"Type": "Half", "Count": 64},
  "HasSparseWeights": 0,
  "Activation": "RELU",
  "HasBias": 1,
  "HasReLU": 1,
  "TacticName": "trt_turing_cutlass_image_network_first_layer_hmma_fprop_f16f16f32_nhwc_nhwc_k64r7s7c4_stride2x2",
  "TacticValue": "0xe2222883a6602489"
},{
  "Name": "Reformatting CopyNode for Output Tensor 0 to reshape_after_Gemm_48",
  "LayerType": "Reformat",
  "Inputs": [
  {
    "Name": "Reformatted Output Tensor 0 to reshape_after_Gemm_48",
    "Location": "Device",
    "Dimensions": [32,1000],
    "Format/Datatype": "Row major linear FP16 format"
  }],
  "Outputs": [
  {
    "Name": "191",
    "Location": "Device",
    "Dimensions": [32,1000],
    "Format/Datatype": "Row major linear FP32"
  }],
  "ParameterType": "Reformat",
  "Origin": "REFORMAT",
  "TacticValue": "0x00000000000003e8"
}],
"Bindings": ["input.1"
,"191"
]}
'''

TENSORRT_11_IO_JSON = r'''{
   "Layers": ["conv1", "relu1", "fc"],
   "I/O Tensors": [
     {
       "Name": "input_0",
       "IOMode": "Input",
       "DataType": "Float",
       "Dimensions": [1, 3, 224, 224],
       "Location": "Device",
       "IsShapeInferenceIO": false,
       "ProfileInfo": [
       {
         "MinShape": [1,3,224,224],
         "OptShape": [1,3,224,224],
         "MaxShape": [1,3,224,224],
         "Format": "Row major linear FP32 format (kLINEAR)"
       }]
     },
     {
       "Name": "output_0",
       "IOMode": "Output",
       "DataType": "Float",
       "Dimensions": [1, 1000],
       "Location": "Device",
       "IsShapeInferenceIO": false
     }
   ]
}
'''
