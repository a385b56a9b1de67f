"""Calibration and quantization plans for explicit (Q/DQ) INT8 / FP8 builds.

TensorRT 11 removed implicit INT8 and its calibrators: ranges are computed here, in PyTorch, and
the Q/DQ builders turn them into scales.

* :mod:`.histogram`: amax of |x| by max, percentile, mse or entropy (NVIDIA's calibrators' rules);
* :mod:`.record`: forward hooks finding every tensor that is quantized (Conv/Linear inputs, residual add inputs);
* :mod:`.data`: calibration data (folder of .npy/.pt, ``module:attr`` iterable, seeded random);
* :mod:`.calibrate`: :func:`calibrate` (model + batches -> :class:`Calibration`), :func:`calibrate_data`
  (+ a data source);
* :mod:`.calibfile`: the JSON calibration file (:func:`write_calibration`, :func:`load_calibration`);
* :mod:`.plan`: :class:`QuantPlan` (per module: quantized? ranges? kept in which precision?).

Layering: above trtbuild.models (it resolves ``module:attr`` data like models), below trtbuild.engine.
"""

from .calibfile import CalibrationFileError, load_calibration, write_calibration
from .calibrate import Calibration, calibrate, calibrate_data, network_tensors, weight_amax
from .data import folder_source, iterable_source, random_source
from .histogram import METHODS, AbsHistogram, compute_amax
from .plan import LayerPlan, QuantPlan, folded_weight_amax, parse_keep, scale_of

__all__ = ["METHODS", "AbsHistogram", "Calibration", "CalibrationFileError", "LayerPlan", "QuantPlan", "calibrate",
           "calibrate_data", "compute_amax", "folded_weight_amax", "folder_source", "iterable_source",
           "load_calibration", "network_tensors", "parse_keep", "random_source", "scale_of", "weight_amax",
           "write_calibration"]
