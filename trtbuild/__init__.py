"""trtbuild: build TensorRT engines layer by layer from PyTorch weights.

Layers of the package, each depending only on those before it:
weights -> reference/backend -> layers (builders) -> models -> engine, parity, onnx_export -> cli
"""

__version__ = "0.1.0"
