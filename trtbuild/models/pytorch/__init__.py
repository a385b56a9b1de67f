"""PyTorch reference models for the model zoo (no torchvision needed).

Constructors take a ``seed`` (default 0) and are deterministic. Use :func:`randomize_bn_`
to give BatchNorm layers non-trivial statistics before checking BN folding.
"""

from .alexnet import AlexNet, alexnet
from .common import randomize_bn_, seeded
from .crnn import CRNN, crnn
from .l2norm import L2Norm
from .repvgg import RepVGG, RepVGGBlock, repvgg_a0, repvgg_model_convert
from .resnet import ResNet, resnet18, resnet50
from .unet import UNet, unet
from .vgg import VGG16RefineDet, VGG16SSD, rename_vgg_keys, vgg16_refinedet, vgg16_ssd
from .vit import VisionTransformer, vit_tiny
from .yolov8 import YOLOv8, yolov8n

__all__ = [
    "AlexNet",
    "alexnet",
    "L2Norm",
    "RepVGG",
    "RepVGGBlock",
    "repvgg_a0",
    "repvgg_model_convert",
    "ResNet",
    "resnet18",
    "resnet50",
    "VGG16SSD",
    "VGG16RefineDet",
    "vgg16_ssd",
    "vgg16_refinedet",
    "rename_vgg_keys",
    "UNet",
    "unet",
    "CRNN",
    "crnn",
    "YOLOv8",
    "yolov8n",
    "VisionTransformer",
    "vit_tiny",
    "randomize_bn_",
    "seeded",
]
