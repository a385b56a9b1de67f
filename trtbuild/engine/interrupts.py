"""Ctrl-C while TensorRT works: never raised inside a callback that TensorRT calls from C++.

Python raises KeyboardInterrupt at the next Python code the main thread runs. While TensorRT
builds, that is a callback it calls from C++ (the logger, the progress monitor): the exception
then crosses C++ as pybind11::error_already_set, and TensorRT prints and drops it ("Exception
caught in log()": the build goes on and is saved) or aborts the process ("terminate called ...").

Calls into real TensorRT or TensorRT-RTX that may call Python back run inside
:func:`calling_tensorrt`. There a SIGINT is only recorded: the progress monitors then cancel the
build (step_complete returns False, see :func:`interrupt_pending`), the call returns, and the
KeyboardInterrupt is raised when the block ends. The reference backend calls its callbacks from
Python, where raising is safe, so it needs none of this.
"""

from __future__ import annotations

import contextlib
import signal
import threading

__all__ = ["calling_tensorrt", "interrupt_pending"]

_pending = threading.Event()
_depth = 0  # calling_tensorrt blocks open in the main thread


def interrupt_pending() -> bool:
    """True once a Ctrl-C arrived inside calling_tensorrt and was not raised yet."""
    return _pending.is_set()


def _handler(signum, frame) -> None:
    if _depth > 0:
        _pending.set()
        return
    raise KeyboardInterrupt


@contextlib.contextmanager
def calling_tensorrt(trt=None):
    """Run the block (a call into TensorRT that may call Python back) with Ctrl-C deferred to its
    end, as the module docstring says; also an error the cancelled call caused becomes the
    KeyboardInterrupt. Nothing changes for the reference backend (`trt` named), outside the main
    thread, or where the application installed its own SIGINT handler. Reentrant."""
    global _depth
    if (getattr(trt, "__name__", "") == "trtbuild.reference"
            or threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGINT) not in (signal.default_int_handler, _handler)):
        yield
        return
    previous = signal.signal(signal.SIGINT, _handler)
    _depth += 1
    try:
        yield
    except Exception:
        if _depth == 1 and _pending.is_set():  # e.g. the BuildError of the build the interrupt cancelled
            _pending.clear()
            raise KeyboardInterrupt from None
        raise
    finally:
        _depth -= 1
        signal.signal(signal.SIGINT, previous)
    if _depth == 0 and _pending.is_set():
        _pending.clear()
        raise KeyboardInterrupt
