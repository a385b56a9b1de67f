"""Exceptions of trtbuild.engine; each message is one sentence saying what is wrong and what to do."""


class EngineError(RuntimeError):
    """Base class for engine build/load/run failures."""


class BuildError(EngineError):
    """TensorRT (or the reference) could not build the network; the message quotes its log."""


class EngineFileError(EngineError):
    """An engine file or its sidecar is missing, truncated, changed or not an engine."""


class EngineCompatibilityError(EngineError):
    """The engine was built for another TensorRT version, backend or GPU architecture."""


class EngineInputError(EngineError, ValueError):
    """Inputs given to Engine.run have the wrong name, shape, dtype or device."""


class EngineWriteError(EngineFileError, OSError):
    """An engine, sidecar or timing cache file could not be written; the message names the target
    file (never the temporary file). Also an OSError, for callers that catch those."""


class TimingCacheError(EngineError, ValueError):
    """The --timing-cache path exists but is not a timing cache, so it is neither read nor overwritten."""


class CrossCheckError(EngineError):
    """The reference backend and TensorRT-RTX disagree on a network: one accepts what the other
    rejects, or a tensor has another shape or dtype. The message names the first differing tensor
    and the layer that produces it."""
