"""Debugging tools built on parity: ``trtbuild debug precision`` (trtbuild.debug.precision)."""

from .precision import PrecisionSearchError, SearchResult, Trial, search_precision

__all__ = ["PrecisionSearchError", "SearchResult", "Trial", "search_precision"]
