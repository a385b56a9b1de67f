"""True float32 math while the reference executes a plan.

On CUDA, PyTorch lets cuDNN convolutions use TF32 (a 10-bit mantissa, about 5e-4 relative error)
unless told otherwise, and matmuls use it wherever the float32 matmul precision is not "highest".
A TensorRT engine uses TF32 only where its builder config sets BuilderFlag.TF32 (trtbuild's builds
clear it), and the reference is the judge of exact fp32: so it turns TF32 off for the duration of
an execution and gives the caller's settings back afterwards.
"""

from __future__ import annotations

from contextlib import contextmanager

import torch


@contextmanager
def no_tf32():
    """cuDNN and matmul TF32 off inside the block; the caller's settings restored on the way out."""
    matmul, cudnn = torch.get_float32_matmul_precision(), torch.backends.cudnn.allow_tf32
    torch.set_float32_matmul_precision("highest")
    torch.backends.cudnn.allow_tf32 = False
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(matmul)
        torch.backends.cudnn.allow_tf32 = cudnn
