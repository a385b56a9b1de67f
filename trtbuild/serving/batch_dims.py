"""Which outputs of a dynamic-batch engine do not carry the batch as their first dimension.

Triton batches a model (max_batch_size > 0) only if the first dimension of every input and output is
the batch: it strips it from config.pbtxt's dims, checks it against the request, and the Python model
splits a concatenated run's outputs by it. The sidecar cannot tell: a data-dependent dimension (the
detections of an NMS layer, ``boxes (K, 4)``) is -1 there just like the batch. The execution context
can: with the inputs set to a batch size, an output's batch dimension resolves to it, while a
data-dependent one stays -1 (TensorRT's rule, mirrored by the reference). So the engine is opened and
asked at each optimization profile's smallest and largest batch. Triton has one configuration for
every profile, so an output that follows the batch in one profile and not in another is refused.
That needs the engine loadable here: reference plans always are (PyTorch on the CPU); for TensorRT
and TensorRT-RTX engines, which need their GPU, the sidecar's shapes decide.
"""

from __future__ import annotations

from trtbuild.engine.records import build_info_of


def dynamic_batch_profile(sidecar) -> dict | None:
    """The first optimization profile ({input: {"min", "opt", "max"}}) of the engine the sidecar (a Sidecar,
    or a dict read as one) describes if it has a dynamic batch (a profile, and -1 first in every I/O tensor's
    shape), else None."""
    build = build_info_of(sidecar)
    tensors = [*(build.inputs or []), *(build.outputs or [])]
    profiles = build.all_profiles
    if profiles and profiles[0] and tensors and all(t["shape"] and int(t["shape"][0]) == -1 for t in tensors):
        return profiles[0]
    return None


def outputs_off_batch(data, sidecar, name: str = "engine") -> list[str] | None:
    """Names of the outputs whose first dimension is not the batch at each optimization profile's min and
    max batch (data-dependent rows, or the batch folded into another dimension), in engine order; [] if
    every output follows the batch or the engine has no dynamic batch; None if a dynamic-batch engine is
    not a reference plan (not opened, see above). ConfigError in one sentence naming the output and the
    profiles where an output follows the batch in some profiles only."""
    from trtbuild.backend import load_trt
    from trtbuild.engine import Engine
    from trtbuild.engine.serialize import sidecar_backend

    from .config import ConfigError  # config imports this module
    from .python_model import load_plugins

    if dynamic_batch_profile(sidecar) is None:
        return []  # no dynamic batch: nothing for Triton to batch
    if sidecar_backend(sidecar) != "reference":
        return None
    trt = load_trt("reference")
    load_plugins(trt, None)  # the reference's plugins are PyTorch twins: no library to find
    engine = Engine(data, trt, sidecar=sidecar, name=name)
    profiles = build_info_of(sidecar).all_profiles
    off: dict[str, list[int]] = {o: [] for o in engine.output_names}  # output -> profiles where it is off
    for k, profile in enumerate(profiles):
        engine._use_profile(k, 0)
        for end in ("min", "max"):
            for tensor, shapes in profile.items():
                engine.context.set_input_shape(tensor, tuple(int(d) for d in shapes[end]))
            batch = int(next(iter(profile.values()))[end][0])
            for output in engine.output_names:
                shape = tuple(engine.context.get_tensor_shape(output))
                if (not shape or int(shape[0]) != batch) and k not in off[output]:
                    off[output].append(k)
    for output, where in off.items():
        if where and len(where) < len(profiles):
            follows = [k for k in range(len(profiles)) if k not in where]
            raise ConfigError(f"output '{output}' of {name} starts with the batch dimension in optimization "
                              f"{_listed(follows)} but not in {_listed(where)}, and Triton's configuration "
                              "has one batch layout for every profile; build the engine with profiles that agree")
    return [o for o in engine.output_names if off[o]]


def _listed(indices: list[int]) -> str:
    """"profile 1" or "profiles 0, 2 and 3"."""
    if len(indices) == 1:
        return f"profile {indices[0]}"
    return f"profiles {', '.join(map(str, indices[:-1]))} and {indices[-1]}"
