"""Weight dumps: tensorrtx .wts, safetensors and PyTorch .pt/.pth, plus typed access for builders.

    from trtbuild.weights import WeightMap, export_weights
    export_weights(model, "weights/resnet50.wts")          # nn.Module -> file (atomic)
    wm = WeightMap.load("weights/resnet50.wts")
    w = wm.prefix("layer1.0").get("conv1.weight", (64, 64, 1, 1))
    print(wm.unused())                                     # weights no builder read

Every problem with a file, name, shape or value raises WeightsError (a ValueError).
"""

from .errors import WeightsError
from .export import ExportReport, as_weight_map, convert_weights, export_weights
from .formats import FORMATS, format_for_path, read_weights, write_weights
from .weightmap import WeightMap
from .wts import parse_wts, wts_line, write_wts

__all__ = [
    "WeightsError",
    "WeightMap",
    "ExportReport",
    "export_weights",
    "convert_weights",
    "as_weight_map",
    "FORMATS",
    "format_for_path",
    "read_weights",
    "write_weights",
    "parse_wts",
    "wts_line",
    "write_wts",
]
