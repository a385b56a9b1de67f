"""Serving trtbuild engines with NVIDIA Triton Inference Server.

``python_env`` finds the ``tritonserver`` binary that nvidia-pytriton bundles and prepares what its
Python backend needs to run in *this* interpreter.
"""
