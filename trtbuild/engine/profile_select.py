"""Which optimization profile runs a set of input shapes: each profile's ranges read from an ICudaEngine, the first
profile that takes every shape (or the pinned one), and the one-sentence refusal that lists every profile's range;
the switch itself (ProfileSwitch, shared by Engine and PycudaEngine so both follow the same TensorRT rules). Also the
check that a sidecar records the engine's own profiles. TensorRT 10 and later name tensors the same in every
profile, so a profile is a {input name: (min, max)} mapping."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .errors import EngineError, EngineFileError, EngineInputError
from .options import format_range

if TYPE_CHECKING:  # runner imports this module
    from .runner import TensorInfo


def profile_ranges(engine, tensors: dict[str, TensorInfo]) -> list[dict[str, tuple[tuple, tuple]]]:
    """[{dynamic input name: (min shape, max shape)}] of every optimization profile of an ICudaEngine,
    in index order (one empty dict for an engine without dynamic inputs). Tensor names are the same in
    every profile (TensorRT 10 and later)."""
    dynamic = [n for n, t in tensors.items() if t.is_input and any(d < 0 for d in t.shape)]
    count = max(1, int(engine.num_optimization_profiles)) if dynamic else 1
    out = []
    for k in range(count):
        ranges = {}
        for n in dynamic:
            mn, _, mx = (tuple(int(d) for d in s) for s in engine.get_tensor_profile_shape(n, k))
            ranges[n] = (mn, mx)
        out.append(ranges)
    return out


def shape_fits(shape: tuple, lo: tuple, hi: tuple) -> bool:
    return len(shape) == len(lo) and all(a <= d <= b for d, a, b in zip(shape, lo, hi))


def choose_profile(ranges: list[dict], shapes: dict[str, tuple], pinned: int | None, engine_name: str,
                   owner: str = "Engine") -> int:
    """The optimization profile to run `shapes` ({input: shape}) with: `pinned` if it takes them, else
    (pinned None) the first profile whose ranges contain every input shape. Raises EngineInputError
    naming the input, its shape and every profile's range (in `--profile` syntax) where none (or not the
    pinned one) does; `owner`: the class the profile was pinned with."""
    def fits(k):
        return all(shape_fits(shapes[n], lo, hi) for n, (lo, hi) in ranges[k].items() if n in shapes)

    candidates = [pinned] if pinned is not None else range(len(ranges))
    for k in candidates:
        if fits(k):
            return k
    names = [n for n in ranges[0] if n in shapes]
    bad = next((n for n in names if not all(shape_fits(shapes[n], *r[n]) for r in
                                            ([ranges[pinned]] if pinned is not None else ranges))), names[0])
    every = "; ".join(f"profile {k} {format_range(*r[bad])}" for k, r in enumerate(ranges))
    if pinned is not None:
        raise EngineInputError(f"input '{bad}' has shape {shapes[bad]}, outside optimization profile {pinned} "
                               f"{format_range(*ranges[pinned][bad])} that {engine_name} is pinned to "
                               f"({owner}(profile={pinned})); its profiles: {every}")
    raise EngineInputError(f"input '{bad}' has shape {shapes[bad]}, which no optimization profile of {engine_name} "
                           f"takes: {every}")


def check_pinned(profile, ranges: list[dict], engine_name: str, owner: str = "Engine") -> int | None:
    """`profile` if it is None or the index of one of `ranges`' profiles; else EngineInputError in one sentence
    (`owner`: the class it was given to)."""
    if profile is not None and (isinstance(profile, bool) or not isinstance(profile, int)
                                or not 0 <= profile < len(ranges)):
        raise EngineInputError(f"{engine_name} has {len(ranges)} optimization profile(s) (0 to {len(ranges) - 1}); "
                               f"{owner}(profile={profile!r}) names none of them")
    return profile


class ProfileSwitch:
    """Picks and activates the optimization profile of each run, for an engine wrapper holding `context`,
    `profiles` (profile_ranges), `profile` (pinned index or None), `name`, `backend` and `logger`.

    TensorRT's order, which the wrappers follow: set_optimization_profile_async(k, stream) on the stream
    the run is queued on (so the switch is ordered before it), then set_input_shape for every input
    (a switch drops the shapes set before), then the tensor addresses, then execute_async_v3. Tensor
    names, and so addresses, are the same in every profile (TensorRT 10 and later)."""

    context: object
    profiles: list[dict]
    profile: int | None
    name: str
    backend: str
    logger: object

    @property
    def _single_profile(self) -> bool:
        """True when profile 0 runs every shape it takes: then check_input_shape checks its ranges."""
        return len(self.profiles) == 1 and self.profile is None

    def _select_profile(self, shapes: dict[str, tuple], handle: int) -> None:
        """Switch to the profile that runs `shapes` ({input: shape}); EngineInputError listing every profile's
        range where none (or not the pinned one) takes them."""
        if not self._single_profile:
            self._use_profile(choose_profile(self.profiles, shapes, self.profile, self.name,
                                                 type(self).__name__), handle)

    def _use_profile(self, k: int, handle: int) -> None:
        """Switch the context to optimization profile k on the stream `handle` (no call if it is active)."""
        ctx = self.context
        if ctx.active_optimization_profile == k:
            return
        if not ctx.set_optimization_profile_async(k, handle):
            raise EngineError(f"{self.backend} could not switch {self.name} to optimization profile {k}: "
                              f"{self.logger.error_text()}")


def check_sidecar_profiles(recorded: list[dict], ranges: list[dict], path) -> None:
    """EngineFileError (one sentence) if the sidecar's optimization profiles ({input: {"min", "opt",
    "max"}}, in order) are not the engine's (`ranges`: Engine.profiles); a sidecar without any says nothing."""
    if not recorded:
        return
    def show(profiles):
        return "; ".join(", ".join(f"{n} {format_range(lo, hi)}" for n, (lo, hi) in p.items()) for p in profiles)

    said = [{n: (tuple(r["min"]), tuple(r["max"])) for n, r in p.items() if n in ranges[0]} for p in recorded]
    if said != ranges:
        raise EngineFileError(f"the sidecar of {path} records {len(recorded)} optimization profile(s) ({show(said)}) "
                              f"but the engine has {len(ranges)} ({show(ranges)}), so the sidecar belongs to another "
                              "engine; rebuild it")
