"""Helpers for tests/reference/test_api_conformance.py: NVIDIA's real TensorRT Python bindings (read-only,
no GPU, no TensorRT libraries), a dump of their API, and an ast scan of trtbuild's own code."""
