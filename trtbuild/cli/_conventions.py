"""Deprecated path of the command-line conventions, now in :mod:`trtbuild.cli.options`."""

from trtbuild._moved import forward_module

forward_module(__name__, "trtbuild.cli.options")
