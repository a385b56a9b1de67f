"""The one error type raised for bad weight files, names, shapes and values, and its kind for files
that could not be written."""

from trtbuild.files.atomic import AtomicWriteError


class WeightsError(ValueError):
    """A weight file, weight name or weight value is not what the caller needs.

    The message always names the file and/or tensor and says what is wrong
    (expected vs found, line and column for text formats).
    """


class WeightsWriteError(AtomicWriteError, WeightsError):
    """A weight file could not be written; the message names the target path."""


def show_bytes(raw: bytes, limit: int = 40) -> str:
    """Printable, length-limited repr of a byte string for error messages."""
    text = raw.decode("utf-8", errors="backslashreplace")
    if len(text) > limit:
        text = text[:limit] + "..."
    return repr(text)
