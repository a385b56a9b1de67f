"""Parity of an engine with several optimization profiles: one report per profile, each run at
that profile's opt shapes with the engine pinned to it (a context runs one profile at a time, so
every profile's kernels are exercised only if each is selected in turn)."""

from __future__ import annotations

import os

from .compare import Report


def profile_input_shapes(engine, k: int, batch: int | None = None, source: str | None = None) -> dict[str, list[int]]:
    """{input name: shape} inside optimization profile `k` of `engine` (an Engine): its opt shapes,
    with the batch dimension `batch` where given. Raises ValueError naming the profile and its
    batch range if `batch` is outside it, or if `k` is not a profile of the engine."""
    source = source or engine.name
    count = len(engine.profiles)
    if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k < count:
        raise ValueError(f"engine {source} has {count} optimization profile(s) (0 to {count - 1}); profile {k!r} "
                         "is none of them")
    shapes = {}
    for name in engine.input_names:
        info = engine.tensors[name]
        if name not in engine.profiles[k]:  # a static input: its own shape in every profile
            shapes[name] = list(info.shape)
            continue
        _, opt, _ = (tuple(int(d) for d in s) for s in engine._engine.get_tensor_profile_shape(name, k))
        dims = list(opt)
        if batch is not None:
            lo, hi = engine.profiles[k][name][0][0], engine.profiles[k][name][1][0]
            if not lo <= int(batch) <= hi:
                raise ValueError(f"batch {batch} is outside the batch range [{lo}, {hi}] of optimization profile {k} "
                                 f"of engine {source} (input '{name}'); pick a batch in that range")
            dims[0] = int(batch)
        shapes[name] = dims
    return shapes


def check_model_parity_profiles(model, trt, *, engine, options=None, **kwargs) -> list[Report]:
    """check_model_parity once per optimization profile of `engine` (a path or an Engine), each at
    that profile's opt shapes (with `batch`: only the profiles whose batch range takes it) with the
    engine pinned to it: [Report of profile 0, profile 1, ...], each with meta["profile"] = its index.
    An engine with one profile (or none) gives one report, as check_model_parity does. `options` (a
    BuildOptions: the precision and small variant the engine must have) and `kwargs`: as there."""
    from trtbuild.engine import load_engine

    from .check import check_model_parity

    if isinstance(engine, (str, os.PathLike)):
        engine = load_engine(engine, trt)
    profiles = range(len(engine.profiles))
    batch = kwargs.get("batch")
    if batch is not None:  # only the profiles that take it
        first = engine.input_names[0]
        profiles = [k for k in profiles if first not in engine.profiles[k] or
                    engine.profiles[k][first][0][0] <= int(batch) <= engine.profiles[k][first][1][0]]
        if not profiles:
            ranges = "; ".join(f"profile {k} [{r[first][0][0]}, {r[first][1][0]}]"
                               for k, r in enumerate(engine.profiles))
            raise ValueError(f"batch {batch} is in no optimization profile of engine {engine.name} (input '{first}' "
                             f"batch ranges: {ranges}); pick a batch in one of them")
    return [check_model_parity(model, trt, engine=engine, profile=k, options=options, **kwargs) for k in profiles]
