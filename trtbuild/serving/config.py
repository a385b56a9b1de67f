"""A Triton model configuration (``config.pbtxt``) from an engine's sidecar.

    text = config_text(sidecar, "resnet18", kind="tensorrt")     # platform: "tensorrt_plan" ...
    text = config_text(sidecar, "resnet18", kind="python", instance_kind="KIND_CPU")

Everything comes from the sidecar (trtbuild.engine.serialize.make_sidecar): tensor names, shapes
and dtypes, and the batch profile. An engine built with ``--batch MIN,OPT,MAX`` (batch dimension -1
on every I/O tensor) becomes ``max_batch_size: MAX`` with dims *without* the batch dimension and
dynamic batching preferring OPT and MAX. Several profiles (--profile repeated, trtbuild build):
max_batch_size is the largest batch any takes, the preferred sizes are every profile's OPT and MAX,
and the TensorRT kind lists every profile in its instance group (Triton's TensorRT backend picks one
per request); batch sizes between the profiles cannot be said in Triton's configuration (a comment
names them: Triton may form them; the python kind zero-pads them to the next profile's min, as
``trtbuild serve`` does, and the TensorRT kind's engine refuses them). A static engine becomes
``max_batch_size: 0`` with full dims and no dynamic batching (Triton only batches models with
max_batch_size > 0), and so does a dynamic-batch engine with an output whose first dimension is not
the batch (NMS detections, found by trtbuild.serving.batch_dims), its batch then one of the dims (-1).
The text is protobuf text format for Triton's ``inference.ModelConfig`` (tests parse it with
tritonclient's model_config_pb2).
"""

from __future__ import annotations

import json

from trtbuild.engine.records import build_info_of

from .batch_dims import dynamic_batch_profile
from .model_options import ModelOptions

#: TensorRT DataType name (sidecar "dtype") -> Triton data type.
TRITON_DTYPES = {"FLOAT": "TYPE_FP32", "HALF": "TYPE_FP16", "BF16": "TYPE_BF16", "INT32": "TYPE_INT32",
                 "INT64": "TYPE_INT64", "INT8": "TYPE_INT8", "UINT8": "TYPE_UINT8", "BOOL": "TYPE_BOOL"}
KINDS = ("tensorrt", "python")
#: --batching of --kind python: one engine run on the requests stacked along the batch dimension,
#: or one run per request (responses bit-identical to a direct Engine run on each request's input).
BATCHING = ("concatenate", "per-request")
BATCHING_PARAMETER = "trtbuild_batching"


class ConfigError(ValueError):
    """The engine cannot be described to Triton as asked (one sentence)."""


def triton_dtype(name: str, tensor: str) -> str:
    if name not in TRITON_DTYPES:
        raise ConfigError(f"tensor '{tensor}' has TensorRT type {name}, which Triton's model configuration cannot "
                          f"express (supported: {', '.join(TRITON_DTYPES)})")
    return TRITON_DTYPES[name]


def parse_version_policy(text: str | None) -> str | None:
    """"latest:N" | "all" | "specific:1,2" -> the ModelVersionPolicy text; None -> None (Triton's default, latest 1)."""
    if text is None:
        return None
    kind, _, rest = text.partition(":")
    try:
        if kind == "all" and not rest:
            return "{ all: {} }"
        if kind == "latest":
            n = int(rest)
            if n >= 1:
                return f"{{ latest: {{ num_versions: {n} }} }}"
        if kind == "specific":
            versions = [int(v) for v in rest.split(",")]
            if versions and all(v >= 1 for v in versions):
                return f"{{ specific: {{ versions: [ {', '.join(map(str, versions))} ] }} }}"
    except ValueError:
        pass
    raise ConfigError(f"--version-policy {text!r}: expected latest:N, all or specific:V1,V2 (positive integers)")


def batch_limits(sidecar, max_batch: int | None = None, off_batch=()) -> tuple[int, list[int]]:
    """(max_batch_size, preferred batch sizes) for the engine the sidecar (a Sidecar, or a dict read as
    one) describes (see module doc); `max_batch` (--max-batch) lowers the maximum. `off_batch`: outputs
    whose first dimension is not the batch although the sidecar shows -1 there
    (trtbuild.serving.batch_dims): Triton cannot batch such an engine, so it gets max_batch_size 0.
    ConfigError in one sentence where it does not fit."""
    dynamic = dynamic_batch_profile(sidecar) is not None
    if dynamic and off_batch:
        if max_batch not in (None, 0):
            names = [repr(o) for o in off_batch]
            listed = f" {names[0]}" if len(names) == 1 else f"s {', '.join(names[:-1])} and {names[-1]}"
            raise ConfigError(f"--max-batch {max_batch}: output{listed} of the engine "
                              f"{'does' if len(names) == 1 else 'do'} not start with the batch dimension (a size "
                              "that depends on the data, as NMS detections have), so Triton cannot batch the "
                              "engine (max_batch_size 0, the batch one of the dims); leave out --max-batch")
        return 0, []
    if not dynamic:
        if max_batch not in (None, 0):
            raise ConfigError(f"--max-batch {max_batch}: the engine has a static batch (no --batch profile), so "
                              "Triton cannot batch it (max_batch_size 0); rebuild it with --batch 1,OPT,MAX")
        return 0, []
    ranges = [profile_batches(p) for p in build_info_of(sidecar).all_profiles]
    low = min(lo for lo, _, _ in ranges)
    top = max(hi for _, _, hi in ranges)  # several profiles: the largest batch any of them takes
    if low > 1:
        raise ConfigError(f"the engine's batch profile starts at {low}, but Triton sends batches from 1 up to "
                          "max_batch_size; rebuild it with --batch 1,OPT,MAX")
    if max_batch is not None:
        if not 1 <= max_batch <= top:
            raise ConfigError(f"--max-batch {max_batch}: must be between 1 and the engine profile's maximum "
                              f"batch {top}")
        top = max_batch
    return top, sorted({b for _, opt, hi in ranges for b in (opt, hi, top) if b <= top and in_a_profile(b, ranges)})


def profile_batches(profile: dict) -> tuple[int, int, int]:
    """(min, opt, max) batch of one optimization profile ({input: {"min", "opt", "max"}}): the batch
    range every input takes."""
    return (max(int(p["min"][0]) for p in profile.values()), min(int(p["opt"][0]) for p in profile.values()),
            min(int(p["max"][0]) for p in profile.values()))


def in_a_profile(batch: int, ranges) -> bool:
    return any(lo <= batch <= hi for lo, _, hi in ranges)


def batch_gaps(sidecar, max_batch_size: int) -> list[tuple[int, int]]:
    """[(first, last)] runs of batch sizes in 1..max_batch_size that no optimization profile takes
    (profiles 1..4 and 8..16: [(5, 7)]). Triton's configuration cannot express them: its dynamic
    batcher forms any batch up to max_batch_size (preferring preferred_batch_size), and a batch in a
    gap is refused by the engine (TensorRT: no profile for that shape)."""
    ranges = [profile_batches(p) for p in build_info_of(sidecar).all_profiles]
    gaps, start = [], None
    for b in range(1, max_batch_size + 2):
        inside = b > max_batch_size or in_a_profile(b, ranges)
        if not inside and start is None:
            start = b
        elif inside and start is not None:
            gaps.append((start, b - 1))
            start = None
    return gaps


def _dims(shape, batched: bool) -> str:
    dims = [int(d) for d in shape][1 if batched else 0:]
    return f"[ {', '.join(map(str, dims))} ]"


def _tensors(kind: str, tensors: list[dict], batched: bool) -> str:
    rows = [f'  {{\n    name: {json.dumps(t["name"])}\n    data_type: {triton_dtype(t["dtype"], t["name"])}\n'
            f'    dims: {_dims(t["shape"], batched)}\n  }}' for t in tensors]
    return f"{kind} [\n" + ",\n".join(rows) + "\n]\n"


def _warmup(inputs: list[dict], batched: bool) -> str:
    entries = []
    for t in inputs:
        dims = [int(d) for d in t["shape"]][1 if batched else 0:]
        if any(d < 0 for d in dims):
            raise ConfigError(f"--warmup: input '{t['name']}' has dynamic dimensions besides the batch "
                              f"({t['shape']}), so Triton cannot make warmup data for it; leave out --warmup")
        data = "random_data" if t["dtype"] in ("FLOAT", "HALF", "BF16") else "zero_data"
        entries.append(f'    inputs {{\n      key: {json.dumps(t["name"])}\n      value: {{\n'
                       f'        data_type: {triton_dtype(t["dtype"], t["name"])}\n'
                       f'        dims: {_dims([1, *dims] if batched else dims, batched)}\n        {data}: true\n'
                       "      }\n    }")
    batch = "    batch_size: 1\n" if batched else ""
    return 'model_warmup [\n  {\n    name: "trtbuild_warmup"\n' + batch + "\n".join(entries) + "\n  }\n]\n"


def config_text(sidecar, name: str, kind: str = "tensorrt", *, max_batch: int | None = None,
                version_policy: str | None = None, warmup: bool = False, instance_kind: str = "KIND_GPU",
                instances: int = 1, batching: str = "concatenate", max_queue_delay_us: int = 100,
                options: ModelOptions | None = None, off_batch=()) -> str:
    """The config.pbtxt text of model `name` (kind "tensorrt": platform tensorrt_plan; "python":
    backend python running trtbuild's Engine, with `batching` and `options` (default ModelOptions())
    as parameters its model.py reads; Triton's TensorRT backend runs no trtbuild code to read them).
    off_batch: as in batch_limits."""
    if kind not in KINDS:
        raise ConfigError(f"--kind {kind!r}: expected one of {', '.join(KINDS)}")
    if batching not in BATCHING:
        raise ConfigError(f"--batching {batching!r}: expected one of {', '.join(BATCHING)}")
    if kind == "tensorrt" and options is not None:
        raise ConfigError("--threads and --reject-nonfinite apply to --kind python only: Triton's TensorRT backend "
                          "runs no trtbuild code")
    if instances < 1:
        raise ConfigError(f"--instances {instances}: must be at least 1 (model instances per device)")
    max_batch_size, preferred = batch_limits(sidecar, max_batch, off_batch)
    batched = max_batch_size > 0
    policy = parse_version_policy(version_policy)
    head = 'platform: "tensorrt_plan"\n' if kind == "tensorrt" else 'backend: "python"\n'
    text = f"name: {json.dumps(name)}\n{head}max_batch_size: {max_batch_size}\n"
    if policy:
        text += f"version_policy: {policy}\n"
    build = build_info_of(sidecar)
    text += _tensors("input", build.inputs or [], batched)
    text += _tensors("output", build.outputs or [], batched)
    if batched:
        text += (f"dynamic_batching {{\n  preferred_batch_size: [ {', '.join(map(str, preferred))} ]\n"
                 f"  max_queue_delay_microseconds: {int(max_queue_delay_us)}\n}}\n")
    profiles = build.all_profiles
    # Triton's TensorRT backend picks, per request, a profile among those an instance group lists; the
    # python kind runs trtbuild's Engine, which picks the first profile that takes the input shapes
    listed = (f"\n    profile: [ {', '.join(json.dumps(str(k)) for k in range(len(profiles)))} ]"
              if kind == "tensorrt" and len(profiles) > 1 else "")
    text += f"instance_group [\n  {{\n    kind: {instance_kind}\n    count: {int(instances)}{listed}\n  }}\n]\n"
    for first, last in batch_gaps(sidecar, max_batch_size) if batched else ():
        sizes = f"batch {first}" if first == last else f"batches {first} to {last}"
        then = ("the model zero-pads them to the next profile's min and cuts the padding from the answers"
                if kind == "python" else "the engine then refuses the request")
        text = f"# {sizes}: in no optimization profile of the engine; Triton may still form them ({then})\n" + text
    if kind == "python":
        text += (f'parameters {{\n  key: "{BATCHING_PARAMETER}"\n  value: {{ string_value: "{batching}" }}\n}}\n')
        text += (options or ModelOptions()).parameters()
    if warmup:
        text += _warmup(build.inputs or [], batched)
    return text
