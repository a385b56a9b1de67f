"""Layer builders: plain functions `(network, tensor, params..., name) -> ITensor`.

Each builder names every layer it adds (and that layer's output tensor) under `name`, e.g.
"conv4_3_norm/sumsq", and runs unchanged on the real tensorrt module and the reference backend.
"""
