"""Route TensorRT's log (real or reference) to Python logging and keep its error messages.

TensorRT reports most failures by logging an ERROR and returning None (a failed build, an engine
it cannot deserialize). `CapturingLogger` forwards every message to the Python logger
"trtbuild.tensorrt" and remembers the ERROR / INTERNAL_ERROR ones, so the caller can raise an
exception that quotes them instead of a bare "got None". `.messages` also keeps the warnings, as
(severity, text) pairs; INFO and VERBOSE messages only go to Python logging.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from types import ModuleType

LOGGER_NAME = "trtbuild.tensorrt"

# TensorRT's ILogger.Severity values (the same in 10.x, 11.x and the reference).
_INTERNAL_ERROR, _ERROR, _WARNING, _INFO, _VERBOSE = 0, 1, 2, 3, 4
_PY_LEVEL = {_INTERNAL_ERROR: logging.CRITICAL, _ERROR: logging.ERROR, _WARNING: logging.WARNING,
             _INFO: logging.INFO, _VERBOSE: logging.DEBUG}

_classes: dict[int, type] = {}


def _logger_class(trt: ModuleType) -> type:
    """A subclass of `trt.ILogger` for this module (real TensorRT or the reference)."""
    cls = _classes.get(id(trt))
    if cls is not None:
        return cls

    class CapturingLogger(trt.ILogger):
        """Forwards TensorRT's messages to logging.getLogger("trtbuild.tensorrt") and keeps errors."""

        def __init__(self, name: str = LOGGER_NAME, min_severity=None):
            trt.ILogger.__init__(self)
            self.py_logger = logging.getLogger(name)
            self.errors: list[str] = []
            self.messages: list[tuple[int, str]] = []  # (severity, text) of every warning and error
            self._lock = threading.Lock()  # TensorRT may log from its worker threads
            # Our own filter: TensorRT calls log() of an ILogger subclass for every message (only
            # trt.Logger has a min_severity that TensorRT honours), so log() drops the messages
            # less severe than this before they reach Python logging. None: Python logging decides.
            self._min_severity = None if min_severity is None else int(min_severity)

        def log(self, severity, msg):  # TensorRT's callback signature
            sev = int(severity)
            if sev <= _WARNING:
                with self._lock:
                    self.messages.append((sev, str(msg)))
                    if sev <= _ERROR:
                        self.errors.append(str(msg))
            if self._min_severity is not None and sev > self._min_severity:
                return
            level = _PY_LEVEL.get(sev, logging.DEBUG)
            if self.py_logger.isEnabledFor(level):
                self.py_logger.log(level, "%s", msg)

        def clear(self) -> None:
            """Forget the errors and warnings captured so far (call before an operation you want to check)."""
            with self._lock:
                self.errors.clear()
                self.messages.clear()

        def error_text(self, default: str = "no error message was logged") -> str:
            """The captured errors joined into one string, or `default`."""
            with self._lock:
                return "; ".join(self.errors) if self.errors else default

    _classes[id(trt)] = CapturingLogger
    return CapturingLogger


_shared: dict[int, object] = {}
_shared_lock = threading.Lock()


def make_logger(trt: ModuleType, name: str = LOGGER_NAME, min_severity=None):
    """A logger for trt.Builder / trt.Runtime that forwards to Python logging and captures errors.

    Warnings and errors are always kept in `.messages` (errors also in `.errors`). A message is
    forwarded to the Python logger `name` if that logger is enabled for its level and, when
    `min_severity` (a trt.ILogger.Severity) is given, it is at least that severe.

    Real TensorRT (and TensorRT-RTX) keep the first logger given to a builder or runtime while any
    of them lives, and ignore later ones with a warning, so a second logger would never see the
    errors of its own build. For those modules this returns one shared logger per module, with
    `name` and `min_severity` set to this call's; callers clear() it before each operation. The
    reference honours every logger, so there each call gets a new one."""
    if getattr(trt, "__name__", "") == "trtbuild.reference":
        return _logger_class(trt)(name, min_severity)
    with _shared_lock:
        logger = _shared.get(id(trt))
        if logger is None:
            logger = _shared[id(trt)] = _logger_class(trt)(name, min_severity)
            logger.operation = threading.RLock()
        else:
            logger.py_logger = logging.getLogger(name)
            logger._min_severity = None if min_severity is None else int(min_severity)
    return logger


def exclusive(logger):
    """A context in which `logger`'s captured errors belong to one operation: the shared logger of
    a real TensorRT module is held by one thread's definition or build at a time (others wait), so
    concurrent builds never quote each other's errors. A reference logger needs no lock."""
    return getattr(logger, "operation", None) or contextlib.nullcontext()
