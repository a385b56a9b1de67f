"""Running a batch that no optimization profile of the engine takes, the way every trtbuild server does.

An engine of several profiles (batch 1..4 and 8..16) leaves gaps (5..7) that Triton's configuration
cannot express: it only knows ``max_batch_size``, so its dynamic batcher, or a client, may form any batch
up to it. Rows of a batch are independent, so such a batch runs zero-padded to the smallest larger batch
that a profile takes (with every other dimension in that profile's ranges) and the padding is cut from the
outputs; a batch that no profile takes even padded runs as it is, so that Engine.run refuses it in its one
sentence listing every profile. ``trtbuild serve`` (pyt_serve) and the model that ``export-triton --kind
python`` writes (python_model) both run batches through ``run_padded``. Only for engines whose every input
and output starts with the batch (Triton's max_batch_size > 0): other outputs could not be cut.
"""

from __future__ import annotations

import torch

from trtbuild.engine.profile_select import shape_fits


def batch_range(profile: dict) -> tuple[int, int]:
    """(min, max) batch of one optimization profile ({input: (min shape, max shape)}): the batches every input takes."""
    return max(lo[0] for lo, _ in profile.values()), min(hi[0] for _, hi in profile.values())


def padded_batch(engine, shapes: dict[str, tuple]) -> int:
    """The batch to run `shapes` ({input: shape}, batch first) at: their own if a profile takes them, else the
    smallest larger batch of a profile whose ranges take every other dimension (the rows added are zeros);
    their own if none does (Engine.run then refuses them, naming every profile)."""
    n = next(iter(shapes.values()))[0]
    best = None
    for p in engine.profiles:
        rest = all(shape_fits(shapes[k][1:], lo[1:], hi[1:]) for k, (lo, hi) in p.items() if k in shapes)
        lo, hi = batch_range(p)
        if rest and lo <= n <= hi:
            return n
        if rest and n < lo <= hi and (best is None or lo < best):
            best = lo
    return n if best is None else best


def run_padded(engine, feeds: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """engine.run(feeds) (synchronized: callers hand the outputs on) with the batch zero-padded to
    padded_batch's and the outputs cut back to the batch of `feeds`; EngineInputError as Engine.run's
    for a batch that no profile takes."""
    n = int(next(iter(feeds.values())).shape[0])
    pad = padded_batch(engine, {k: tuple(v.shape) for k, v in feeds.items()}) - n
    if pad:
        feeds = {k: torch.cat([v, v.new_zeros((pad, *v.shape[1:]))]) for k, v in feeds.items()}
    outputs = engine.run(feeds, synchronize=True)
    return {k: v[:n] for k, v in outputs.items()} if pad else outputs
