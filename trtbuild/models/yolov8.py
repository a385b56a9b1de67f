"""YOLOv8 detector (Ultralytics weights and module names), raw head output: (N, 4 + classes, anchors).

Reads Ultralytics' state-dict names (see trtbuild.models.pytorch.yolov8) from a WeightMap; widths,
C2f repeats, classes and DFL bins come from the weights, so every YOLOv8 scale (n/s/m/l/x) builds.
Each Conv (conv + BatchNorm, eps 1e-3) is ONE convolution layer; SiLU is sigmoid(x) * x.

Layer / tensor names follow the modules: ``model.I.conv`` (conv+bn) and ``model.I`` (its SiLU, the
Conv module's output); C2f ``model.I.cv1``, ``model.I/split:0|1``, ``model.I.m.J.cv1|cv2``,
``model.I.m.J`` (shortcut add), ``model.I/cat``, ``model.I.cv2``; SPPF ``model.9.m/K``;
``model.10`` and ``model.13`` (nearest x2), ``model.11``... (concats); the head
``model.22.cv2|cv3.L.{0,1,2}``, ``model.22/box|cls``, ``model.22.dfl`` (box distances, N x 4 x A),
``model.22/decode`` and ``model.22/sigmoid``; the last concat ``model.22``, its output ``output0``
(Ultralytics' export name).

The decode is one matrix multiply: the distances (l, t, r, b) to corners are ``anchor -/+ (l, t) / (r, b)``
and to centre-size boxes ``anchor + (r - l, b - t) / 2, (l + r, t + b)``, both linear in the distances,
so a constant 4x4 matrix, the anchor points and the strides (constants of the input size) do it for
any batch. By default NMS is not part of the network (the raw output is what Ultralytics exports).

INT8 / FP8 (``quant``, trtbuild.layers.planned, NVIDIA's explicit-quantization placement): every Conv's
convolution and the head's 1x1 convs take quantized inputs; a Bottleneck's shortcut add (``model.I.m.J``,
calibrated as ``model.I.m.J.add``) quantizes its identity input ``x`` of ``x + cv2(cv1(x))``, named here: the
calibration cannot tell it, as cv2 ends in a SiLU, not straight in a Conv. The DFL (softmax over the bins and its
fixed-weight conv ``model.22.dfl.conv``), the box decode, the sigmoid scores and NMS stay float: they turn
the head's outputs into coordinates, where an 8-bit step would move every box.

``nms=on`` replaces ``output0`` with ``num_detections`` (N,), ``boxes`` (K, 4) corners, ``scores`` (K,) and
``classes`` (K,) through INMSLayer (trtbuild.layers.detection.batched_nms, layer ``model.22/nms``): the decoded
boxes (CENTER_SIZES for ``boxes=xywh``, CORNER_PAIRS for ``xyxy``) and every class's sigmoid score, class-aware
(a box suppresses only boxes of its class), with Ultralytics' predict defaults: ``conf`` 0.25 (scores must
exceed it), ``iou`` 0.7 (suppress above it), ``max_det`` 300 (here per class: INMSLayer's
max_output_boxes_per_class). Unlike Ultralytics' default NMS, a box may be kept for several classes (its scores
per class, as Ultralytics' ``multi_label=True``). Rows come by batch item, then decreasing score. TensorRT-RTX 1.7
has no NMS kernel: it builds the ``nms=off`` network only; the reference runs both.

Sizes: full = YOLOv8n (80 classes) at 640x640, 8400 anchors; small = the same weights at 64x64
(84 anchors). Input H and W must be multiples of 32 and known at build time; the batch may be dynamic.
"""

from __future__ import annotations

import re

import numpy as np

from trtbuild.backend import trt_of
from trtbuild.layers.basic import conv, max_pool
from trtbuild.layers.common import BuilderError, constant, keep_alive, named, out
from trtbuild.layers.detection import NMS_OUTPUTS, NMSOptions, batched_nms
from trtbuild.layers.planned import planned_add, planned_conv, planned_conv_bn
from trtbuild.layers.resize import interpolate
from trtbuild.models import pytorch as tm
from trtbuild.models.pytorch.yolov8 import BN_EPS, YOLOV8_STRIDES, make_anchors

from .registry import ModelSpec, register

__all__ = ["build_yolov8", "yolov8_layer_map", "YOLOV8_OPTIONS", "decode_matrix"]

FULL_SIZE, SMALL_SIZE = 640, 64
OUTPUT = "output0"
#: build options (first = default; values as the command line gives them). boxes: Ultralytics exports
#: centre-size boxes (xywh); xyxy gives corners. nms: on adds INMSLayer and its four outputs; max_det, iou and
#: conf are its limits (Ultralytics' predict defaults first), read only with nms=on.
YOLOV8_OPTIONS = {"boxes": ("xywh", "xyxy"), "nms": ("off", "on"), "max_det": ("300", "100", "1000"),
                  "iou": ("0.7", "0.45", "0.5", "0.6"), "conf": ("0.25", "0.001", "0.1", "0.5")}


# -- small private layer helpers (to be swapped for trtbuild.layers' shared builders) -------------------------

def _silu(network, x, name: str):
    """SiLU as sigmoid(x) * x: layers ``name/sigmoid`` and ``name``."""
    trt = trt_of(network)
    s = out(network.add_activation(x, trt.ActivationType.SIGMOID), f"{name}/sigmoid")
    return out(network.add_elementwise(x, s, trt.ElementWiseOperation.PROD), name)


def _concat(network, tensors, axis: int, name: str):
    layer = named(network.add_concatenation(list(tensors)), name)
    layer.axis = axis
    return layer.get_output(0)


def _reshape(network, x, dims, name: str, second=None):
    """Shuffle to ``dims`` (0 copies the input's dim, so a dynamic batch passes), then transpose ``second``."""
    trt = trt_of(network)
    layer = named(network.add_shuffle(x), name)
    layer.reshape_dims = trt.Dims(tuple(int(d) for d in dims))
    if second is not None:
        layer.second_transpose = trt.Permutation(list(second))
    return layer.get_output(0)


def _split_channels(network, x, sizes, name: str):
    """``torch.split(x, sizes, 1)`` of an (N, C, H, W) tensor: ``name:0``, ``name:1``... Static shapes slice;
    with a dynamic batch each part gathers its channels (a slice's size would need the input's shape, and
    the reference has no IShapeLayer)."""
    trt = trt_of(network)
    shape = tuple(int(d) for d in x.shape)
    if any(d < 0 for d in shape[1:]):
        raise BuilderError(f"layer '{name}': channels and spatial dims of '{x.name}' {shape} must be static")
    outs, start = [], 0
    for i, c in enumerate(sizes):
        if shape[0] >= 0:
            layer = network.add_slice(x, trt.Dims((0, start, 0, 0)), trt.Dims((shape[0], c) + shape[2:]),
                                      trt.Dims((1, 1, 1, 1)))
        else:
            index = np.arange(start, start + c, dtype=np.int32)
            idx = out(network.add_constant(trt.Dims((c,)), trt.Weights(keep_alive(network, index))),
                      f"{name}:{i}/index")
            layer = network.add_gather(x, idx, 1)
        outs.append(out(layer, f"{name}:{i}"))
        start += c
    return outs


# -- the model ------------------------------------------------------------------------------------------------

def _conv(network, x, wm, p: str, kernel: int, stride: int = 1, quant=None):
    """Ultralytics' Conv ``p``: conv+bn folded (``p.conv``), SiLU (``p``)."""
    y = planned_conv_bn(network, x, wm, f"{p}.conv", f"{p}.bn", f"{p}.conv", quant, stride=stride,
                        padding=kernel // 2, eps=BN_EPS, kernel=(kernel, kernel))
    return _silu(network, y, p)


def _repeats(wm, p: str) -> int:
    ids = {int(m.group(1)) for k in wm.keys() if (m := re.match(rf"{re.escape(p)}\.m\.(\d+)\.cv1\.conv\.weight$", k))}
    if not ids or ids != set(range(len(ids))):
        raise BuilderError(f"yolov8: C2f {p} has no bottlenecks numbered 0..n-1 (found {sorted(ids)}) in {wm.source}")
    return len(ids)


def _c2f(network, x, wm, p: str, shortcut: bool, quant=None):
    y = _conv(network, x, wm, f"{p}.cv1", 1, quant=quant)
    c = int(y.shape[1]) // 2
    parts = _split_channels(network, y, (c, c), f"{p}/split")
    for j in range(_repeats(wm, p)):
        b = f"{p}.m.{j}"
        z = _conv(network, _conv(network, parts[-1], wm, f"{b}.cv1", 3, quant=quant), wm, f"{b}.cv2", 3, quant=quant)
        if shortcut and int(z.shape[1]) == int(parts[-1].shape[1]):  # the layer is the Bottleneck's output
            z = planned_add(network, parts[-1], z, b, quant, add_name=f"{b}.add", identity=0)  # x + cv2(cv1(x))
        parts.append(z)
    return _conv(network, _concat(network, parts, 1, f"{p}/cat"), wm, f"{p}.cv2", 1, quant=quant)


def _sppf(network, x, wm, p: str, k: int = 5, quant=None):
    ys = [_conv(network, x, wm, f"{p}.cv1", 1, quant=quant)]
    for i in range(3):
        ys.append(max_pool(network, ys[-1], k, 1, k // 2, f"{p}.m/{i}"))
    return _conv(network, _concat(network, ys, 1, f"{p}/cat"), wm, f"{p}.cv2", 1, quant=quant)


def _plain_conv(network, x, wm, p: str, quant=None):
    """nn.Conv2d ``p`` (1x1 with bias); output channels from the bias."""
    b = wm.get(f"{p}.bias").reshape(-1)
    w = wm.get(f"{p}.weight", (b.size, int(x.shape[1]), 1, 1))
    return planned_conv(network, x, w, b, p, quant)


def decode_matrix(boxes: str) -> np.ndarray:
    """(4, 4) matrix M and the anchor rows: box = M @ (l, t, r, b) + (ax, ay, ax, ay) for xyxy, + (ax, ay, 0, 0)
    for xywh (see the module doc)."""
    if boxes == "xyxy":
        return np.array([[-1, 0, 0, 0], [0, -1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]], dtype=np.float64)
    return np.array([[-0.5, 0, 0.5, 0], [0, -0.5, 0, 0.5], [1, 0, 1, 0], [0, 1, 0, 1]], dtype=np.float64)


def _detect(network, feats, wm, p: str, boxes: str, nms: NMSOptions | None = None, quant=None) -> dict:
    trt = trt_of(network)
    box, cls = [], []
    for i, f in enumerate(feats):
        for branch, dst in (("cv2", box), ("cv3", cls)):
            q = f"{p}.{branch}.{i}"
            y = _conv(network, _conv(network, f, wm, f"{q}.0", 3, quant=quant), wm, f"{q}.1", 3, quant=quant)
            y = _plain_conv(network, y, wm, f"{q}.2", quant)
            dst.append(_reshape(network, y, (0, int(y.shape[1]), -1), f"{q}/flat"))
    box = _concat(network, box, 2, f"{p}/box")
    cls = _concat(network, cls, 2, f"{p}/cls")
    dfl_w = wm.get(f"{p}.dfl.conv.weight")
    bins = dfl_w.size
    if int(box.shape[1]) != 4 * bins:
        raise BuilderError(f"yolov8: {p}.dfl.conv.weight has {bins} bins but the box branches give "
                           f"{int(box.shape[1])} channels, not 4 x {bins}")
    anchors_n = int(box.shape[2])
    # (N, 4*bins, A) -> (N, 4, bins, A) -> (N, bins, 4, A): softmax over the bins, then their expectation
    bins_t = _reshape(network, box, (0, 4, bins, anchors_n), f"{p}.dfl/bins", second=(0, 2, 1, 3))
    sm = network.add_softmax(bins_t)
    sm.axes = 1 << 1
    prob = out(sm, f"{p}.dfl/softmax")
    # the DFL's fixed 0..bins-1 weights take the expectation of a softmax: part of the box decode, kept float
    expect = conv(network, prob, dfl_w.reshape(1, bins, 1, 1), None, f"{p}.dfl.conv")
    dist = _reshape(network, expect, (0, 4, anchors_n), f"{p}.dfl")
    shapes = [tuple(int(d) for d in f.shape[2:]) for f in feats]
    points, strides = (t.numpy().astype(np.float64) for t in make_anchors(shapes, YOLOV8_STRIDES))
    offset = np.zeros((1, 4, anchors_n))
    offset[0, :2] = points.T
    if boxes == "xyxy":
        offset[0, 2:] = points.T
    m = constant(network, decode_matrix(boxes)[None], dist, f"{p}/decode/matrix")
    mm = out(network.add_matrix_multiply(m, trt.MatrixOperation.NONE, dist, trt.MatrixOperation.NONE),
             f"{p}/decode/matmul")
    ew = trt.ElementWiseOperation
    shifted = out(network.add_elementwise(mm, constant(network, offset, dist, f"{p}/decode/anchors"), ew.SUM),
                  f"{p}/decode/shift")
    decoded = out(network.add_elementwise(shifted, constant(network, strides.T[None], dist, f"{p}/decode/strides"),
                                          ew.PROD), f"{p}/decode")
    scores = out(network.add_activation(cls, trt.ActivationType.SIGMOID), f"{p}/sigmoid")
    if nms is not None:
        to_rows = (0, 2, 1)  # (N, 4 | C, A) -> (N, A, 4 | C), INMSLayer's layout
        dets = batched_nms(network, _reshape(network, decoded, (0, 4, anchors_n), f"{p}/nms/boxes_in", to_rows),
                           _reshape(network, scores, (0, int(scores.shape[1]), anchors_n), f"{p}/nms/scores_in",
                                    to_rows), f"{p}/nms", nms)
        for key in NMS_OUTPUTS:
            dets[key].name = key
        return dets
    y = _concat(network, [decoded, scores], 1, p)  # the layer is the Detect module's; its output is output0
    y.name = OUTPUT
    return {OUTPUT: y}


#: layer index -> (kind, inputs): the yolov8.yaml table (-1 = the previous layer)
_LAYERS = (("conv", 3, 2), ("conv", 3, 2), ("c2f", True), ("conv", 3, 2), ("c2f", True), ("conv", 3, 2),
           ("c2f", True), ("conv", 3, 2), ("c2f", True), ("sppf",), ("up",), ("cat", 6), ("c2f", False), ("up",),
           ("cat", 4), ("c2f", False), ("conv", 3, 2), ("cat", 12), ("c2f", False), ("conv", 3, 2), ("cat", 9),
           ("c2f", False))
_HEAD_FROM = (15, 18, 21)
#: kind -> builder(network, previous output, wm, module name, earlier outputs, quant, *args)
_KINDS = {
    "conv": lambda network, y, wm, p, outs, quant, kernel, stride: _conv(network, y, wm, p, kernel, stride, quant),
    "c2f": lambda network, y, wm, p, outs, quant, shortcut: _c2f(network, y, wm, p, shortcut, quant),
    "sppf": lambda network, y, wm, p, outs, quant: _sppf(network, y, wm, p, quant=quant),
    "up": lambda network, y, wm, p, outs, quant: interpolate(network, y, p, scale_factor=2, mode="nearest"),
    "cat": lambda network, y, wm, p, outs, quant, other: _concat(network, [y, outs[other]], 1, p),
}


def _nms_options(boxes: str, max_det, iou, conf) -> NMSOptions:
    try:
        return NMSOptions(max_det=int(max_det), iou=float(iou), conf=float(conf), center=boxes == "xywh")
    except ValueError:
        raise BuilderError(f"yolov8: max_det={max_det!r}, iou={iou!r} and conf={conf!r} must be an integer and two "
                           "numbers") from None


def build_yolov8(network, wm, x, boxes: str = "xywh", nms: str = "off", max_det="300", iou="0.7",
                 conf="0.25", quant=None) -> dict:
    """Add YOLOv8 (any scale) read from ``wm`` (Ultralytics' names); returns ``{"output0": ITensor}``,
    (N, 4 + classes, anchors): boxes (``boxes``: "xywh" centre-size as Ultralytics, or "xyxy"), then
    sigmoid class scores. ``nms="on"``: ``{"num_detections", "boxes", "scores", "classes"}`` instead (see the
    module doc; ``max_det``, ``iou``, ``conf`` as numbers or the strings the command line gives).
    quant: a trtbuild.quant.QuantPlan (int8/fp8 Q/DQ or kept layers, trtbuild.layers.planned) or None."""
    if boxes not in YOLOV8_OPTIONS["boxes"]:
        raise BuilderError(f"yolov8: boxes={boxes!r} is not one of {YOLOV8_OPTIONS['boxes']}")
    if nms not in YOLOV8_OPTIONS["nms"]:
        raise BuilderError(f"yolov8: nms={nms!r} is not one of {YOLOV8_OPTIONS['nms']}")
    options = _nms_options(boxes, max_det, iou, conf) if nms == "on" else None
    h, w = (int(d) for d in x.shape[2:])
    if h < 0 or w < 0 or h % 32 or w % 32:
        raise BuilderError(f"yolov8: input '{x.name}' {tuple(x.shape)} needs H and W known at build time and "
                           "multiples of 32 (the largest stride)")
    outs = []
    y = x
    for i, (kind, *args) in enumerate(_LAYERS):
        y = _KINDS[kind](network, y, wm, f"model.{i}", outs, quant, *args)
        outs.append(y)
    return _detect(network, [outs[i] for i in _HEAD_FROM], wm, "model.22", boxes, options, quant)


def yolov8_layer_map(repeats=(1, 2, 2, 1, 1, 1, 1, 1)) -> dict[str, str]:
    """Network tensor -> torch module (single call per forward) with the same output: every Conv, the
    C2f and SPPF modules (their cv2), the shortcut adds, upsamples, concats, the DFL and the output."""
    m = {}
    c2f_ids = [i for i, layer in enumerate(_LAYERS) if layer[0] == "c2f"]
    for i, (kind, *args) in enumerate(_LAYERS):
        p = f"model.{i}"
        if kind == "conv":
            m[p] = p
        elif kind == "c2f":
            m[f"{p}.cv1"] = f"{p}.cv1"
            for j in range(repeats[c2f_ids.index(i)]):
                m[f"{p}.m.{j}.cv1"] = f"{p}.m.{j}.cv1"
                m[f"{p}.m.{j}" if args[0] else f"{p}.m.{j}.cv2"] = f"{p}.m.{j}"
            m[f"{p}.cv2"] = p
        elif kind == "sppf":
            m[f"{p}.cv1"] = f"{p}.cv1"
            m[f"{p}.cv2"] = p
        else:
            m[p] = p
    for i in range(3):
        for branch in ("cv2", "cv3"):
            q = f"model.22.{branch}.{i}"
            m.update({f"{q}.0": f"{q}.0", f"{q}.1": f"{q}.1", f"{q}.2": f"{q}.2"})
    m["model.22.dfl"] = "model.22.dfl"
    m[OUTPUT] = "model.22"
    return m


def _factory(seed: int = 0, small: bool = False):
    return tm.randomize_bn_(tm.yolov8n(seed=seed), seed).eval()


def _input_shape(small: bool = False) -> tuple:
    s = SMALL_SIZE if small else FULL_SIZE
    return (1, 3, s, s)


register(ModelSpec(
    name="yolov8n",
    description="YOLOv8n detector (Ultralytics state-dict names), raw head: (N, 4 + 80, anchors) boxes and scores",
    torch_factory=_factory,
    build_network=build_yolov8,
    input_shape=_input_shape,
    output_names=[OUTPUT],
    value_range=(0.0, 1.0),
    layer_map=yolov8_layer_map(),
    options=YOLOV8_OPTIONS,
    outputs_for=lambda chosen: list(NMS_OUTPUTS) if chosen.get("nms") == "on" else [OUTPUT],
    notes=f"full: 1x3x{FULL_SIZE}x{FULL_SIZE} (8400 anchors); small: the same weights at 1x3x{SMALL_SIZE}x{SMALL_SIZE} "
          "(84 anchors); raw output (as Ultralytics exports it), or --option nms=on for INMSLayer's detections",
))
