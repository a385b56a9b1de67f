"""Custom ops that TensorRT lacks, each with a PyTorch reference, CUDA kernels and a plugin.

- involution: :mod:`trtbuild.ops.involution` (op, autograd Function, RedNet module) and
  :mod:`trtbuild.ops.involution_reference_plugin` (the plugin for the reference backend).
"""

from trtbuild.ops.involution import (
    Involution,
    InvolutionFunction,
    involution,
    involution_output_size,
    involution_reference,
)

__all__ = [
    "Involution",
    "InvolutionFunction",
    "involution",
    "involution_output_size",
    "involution_reference",
]

# Register the reference-backend plugin so reference plans that use it can be deserialized.
from trtbuild import reference as _reference
from trtbuild.ops.involution_reference_plugin import register_reference_involution

register_reference_involution(_reference)
__all__.append("register_reference_involution")
