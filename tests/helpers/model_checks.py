"""Output checks shared by the zoo parity tests (tests/models/test_zoo_parity.py, tests/models/test_rednet.py).

Tolerances, against the fp32 PyTorch output of the same input:
  fp32: max|y - ref| <= 1e-5 + 1e-4 * max|ref|
  fp16: max|y - ref| <= 1e-2 * max|ref|  and  cosine(y, ref) > 0.999
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from trtbuild.forward_hooks import CaptureOptions, ForwardCapture


def check_fp32(y, ref, what):
    """Assert `y` is float32 with `ref`'s shape and within the fp32 tolerance of `ref`."""
    assert y.dtype == torch.float32 and y.shape == ref.shape, (what, y.dtype, y.shape, ref.shape)
    err = (y - ref).abs().max().item()
    assert err <= 1e-5 + 1e-4 * ref.abs().max().item(), f"{what}: max abs err {err:.3g}, max|ref| {ref.abs().max():.3g}"


def check_fp16(y, ref, what):
    """Assert `y` is float16 with `ref`'s shape, finite, and within the fp16 tolerance of `ref`."""
    assert y.dtype == torch.float16 and y.shape == ref.shape, (what, y.dtype, y.shape, ref.shape)
    y = y.float()
    assert torch.isfinite(y).all(), what
    err = (y - ref).abs().max().item()
    scale = ref.abs().max().item()
    assert err <= 1e-2 * scale, f"{what}: max abs err {err:.3g} vs max|ref| {scale:.3g}"
    cos = F.cosine_similarity(y.flatten().double(), ref.flatten().double(), dim=0).item()
    assert cos > 0.999, f"{what}: cosine {cos}"


def capture_module_outputs(model, module_names, run) -> dict[str, list]:
    """Call `run()` with forward hooks on `model`'s submodules named in `module_names`; return
    {module name: [a detached copy of its output, one per call]} (each name once)."""
    names = list(dict.fromkeys(module_names))
    with ForwardCapture(model, CaptureOptions(names=names, keep="calls", copy=True)) as capture:
        run()
    captured: dict[str, list] = {name: [] for name in names}
    for call in capture.calls:
        captured[call.name].append(call.output)
    return captured
