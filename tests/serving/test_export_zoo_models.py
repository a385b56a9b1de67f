"""`trtbuild export-triton --kind python` on the zoo's newer models (yolov8n, unet, vit_tiny, crnn), small,
reference backend: each config.pbtxt, parsed with Triton's own schema, describes the engine's I/O as the
loaded engine reports it (names, types, dims without the batch, max_batch_size from the --batch profile),
including crnn's INT32 labels, unet's dynamic H and W (--profile), and yolov8n with NMS, whose detections
do not start with the batch, so Triton must not batch it. Serving one of them: test_python_backend_server."""

from __future__ import annotations

import pytest
from helpers.triton_models import skip_or_fail

from trtbuild.cli import main

try:
    from google.protobuf import text_format
    from tritonclient.grpc import model_config_pb2 as mc
except ImportError as e:  # the test and serve extras install tritonclient
    mc = None
    _MISSING = f"tritonclient is not installed ({e}); `pip install -e .[test]` installs it"

#: TensorRT type -> Triton type, from Triton's model configuration docs (datatypes table).
TRITON = {"FLOAT": "TYPE_FP32", "INT32": "TYPE_INT32"}
MODELS = {"yolov8n": ["--batch", "1,2,4"], "unet": ["--batch", "1,2,4"], "vit_tiny": ["--batch", "1,2,4"],
          "crnn": ["--batch", "1,2,4"],
          "unet_hw": ["--profile", "1x3x32x32,1x3x64x64,2x3x128x128"],
          "yolov8n_nms": ["--option", "nms=on", "--batch", "1,2,4"]}


@pytest.fixture(scope="module")
def engines(tmp_path_factory):
    if mc is None:
        skip_or_fail(_MISSING)
    from trtbuild.engine import export_seeded_weights

    work = tmp_path_factory.mktemp("zoo-engines")
    out = {}
    for case, more in MODELS.items():
        model = case.split("_")[0] if case != "vit_tiny" else case
        weights = work / f"{model}-small.wts"
        if not weights.exists():
            export_seeded_weights(model, weights, 0, small=True)
        out[case] = (model, work / f"{case}.engine")
        assert main(["build", model, "--small", "--weights", str(weights), "-o", str(out[case][1]), "--no-progress",
                     *more]) == 0
    return out


def export(engines, case, repo, *more) -> int:
    model, engine = engines[case]
    return main(["export-triton", model, "--small", "--engine", str(engine), "--repo", str(repo), "--kind", "python",
                 "--name", case, *more])


def io(entries):
    return [(t.name, mc.DataType.Name(t.data_type), list(t.dims)) for t in entries]


def engine_io(engine, batched: bool):
    """(inputs, outputs) as config.pbtxt must list them, from the loaded engine's tensors."""
    rows = {True: [], False: []}
    for t in engine.tensors.values():
        rows[t.is_input].append((t.name, TRITON[t.trt_dtype], [int(d) for d in t.shape][1 if batched else 0:]))
    return rows[True], rows[False]


@pytest.mark.parametrize("case", ["yolov8n", "unet", "vit_tiny", "crnn", "unet_hw"])
def test_config_describes_the_engine(engines, tmp_path, case):
    from trtbuild.engine import load_engine

    assert export(engines, case, tmp_path) == 0
    cfg = text_format.Parse((tmp_path / case / "config.pbtxt").read_text(), mc.ModelConfig())
    engine = load_engine(engines[case][1])
    top = 2 if case == "unet_hw" else 4  # the profile's max batch
    assert cfg.backend == "python" and cfg.max_batch_size == top
    assert (io(cfg.input), io(cfg.output)) == engine_io(engine, batched=True)
    assert list(cfg.dynamic_batching.preferred_batch_size) == ([1, 2] if case == "unet_hw" else [2, 4])
    assert (tmp_path / case / "1" / "model.engine").read_bytes() == engines[case][1].read_bytes()


def test_the_expected_io_by_hand(engines, tmp_path):
    """The same configurations against I/O written out by hand (the model docs), not read from an engine."""
    want = {"yolov8n": ([("input", "TYPE_FP32", [3, 64, 64])], [("output0", "TYPE_FP32", [84, 84])]),
            "crnn": ([("input", "TYPE_FP32", [1, 32, 32])],
                     [("log_probs", "TYPE_FP32", [8, 37]), ("labels", "TYPE_INT32", [8])]),
            "unet_hw": ([("input", "TYPE_FP32", [3, -1, -1])], [("logits", "TYPE_FP32", [2, -1, -1])]),
            "vit_tiny": ([("input", "TYPE_FP32", [3, 48, 48])], [("logits", "TYPE_FP32", [1000])])}
    for case, (inputs, outputs) in want.items():
        assert export(engines, case, tmp_path) == 0
        cfg = text_format.Parse((tmp_path / case / "config.pbtxt").read_text(), mc.ModelConfig())
        assert (io(cfg.input), io(cfg.output)) == (inputs, outputs), case


def test_nms_detections_make_the_engine_unbatched(engines, tmp_path, capsys):
    """yolov8n with NMS built with --batch 1,2,4: num_detections is (N,), but boxes, scores and classes have
    one row per detection of the whole batch (K), so Triton must neither strip their first dimension nor
    split a concatenated run by it: max_batch_size 0, every dim listed (the batch -1), no dynamic batching."""
    assert export(engines, "yolov8n_nms", tmp_path) == 0
    cfg = text_format.Parse((tmp_path / "yolov8n_nms" / "config.pbtxt").read_text(), mc.ModelConfig())
    assert cfg.max_batch_size == 0 and not cfg.HasField("dynamic_batching")
    assert io(cfg.input) == [("input", "TYPE_FP32", [-1, 3, 64, 64])]
    assert io(cfg.output) == [("num_detections", "TYPE_INT32", [-1]), ("boxes", "TYPE_FP32", [-1, 4]),
                              ("scores", "TYPE_FP32", [-1]), ("classes", "TYPE_INT32", [-1])]
    capsys.readouterr()
    assert export(engines, "yolov8n_nms", tmp_path / "other", "--max-batch", "2") == 1
    err = capsys.readouterr().err
    assert ("--max-batch 2: outputs 'boxes', 'scores' and 'classes' of the engine do not start with the batch "
            "dimension") in err and "leave out --max-batch" in err
    assert not (tmp_path / "other").exists()


def test_off_batch_outputs_follow_the_run(engines):
    """The probe's answer, checked by running the engine at two batch sizes: an output it lists does not have
    the run's batch as its first dimension at some batch, one it leaves out has it at both."""
    import torch

    from trtbuild.engine import load_engine, read_sidecar
    from trtbuild.serving.batch_dims import outputs_off_batch

    for case in ("yolov8n", "crnn", "yolov8n_nms"):
        path = engines[case][1]
        off = outputs_off_batch(path.read_bytes(), read_sidecar(path), str(path))
        engine = load_engine(path)
        follows = {name: True for name in engine.output_names}
        for batch in (1, 3):
            x = torch.rand(batch, *engine.tensors["input"].shape[1:], generator=torch.Generator().manual_seed(batch))
            for name, y in engine(x).items():
                follows[name] &= y.shape[0] == batch
        assert off == [n for n, ok in follows.items() if not ok], case
    assert off == ["boxes", "scores", "classes"]
