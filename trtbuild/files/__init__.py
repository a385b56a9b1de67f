"""File safety shared by every command and writer of trtbuild, on the standard library alone:

* :mod:`trtbuild.files.atomic`: replace files atomically (temp file, fsync, rename), several at once;
* :mod:`trtbuild.files.outputs`: refuse an output path that would destroy an input or a file of
  another kind, before any work is done.

It sits below every other package (weights included), so that any layer may write files safely.
"""
