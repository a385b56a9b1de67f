"""Deprecated path of :mod:`trtbuild.files.outputs` (the output-path checks every command runs)."""

from trtbuild._moved import forward_module

forward_module(__name__, "trtbuild.files.outputs")
