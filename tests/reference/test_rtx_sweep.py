"""Seeded random differential sweep of single-layer constructions: the reference vs TensorRT-RTX.

Every case (tests/helpers/rtx_sweep.py, rtx_sweep_shape.py, rtx_sweep_tables.py) is one layer, or a constant
with an identity/shuffle after it, built by the same `build(trt, network)` on trtbuild.reference and
on NVIDIA's tensorrt_rtx (tests/helpers/rtx_sweep_runner.py). The expected behaviour is TensorRT-RTX's:

- the reference must never accept what TensorRT-RTX rejects (accept: no error at definition, every
  output's shape and dtype readable, and a plan from build_serialized_network);
- where both accept, every output's shape and dtype (by name) must be equal; the reference's engine
  is also run at the profile's opt shapes and must produce exactly those shapes and dtypes;
- where the reference rejects and TensorRT-RTX accepts, the reference's message must match an entry
  of SWEEP_STRICTER (tests/helpers/twin.py's REFERENCE_STRICTER plus the INT4-input entry below), each quoting
  the TensorRT 10/11 documentation that forbids the construction.

About a fifth of the random cases have a dynamic batch (input dim 0 = -1, built with an
optimization profile min 1 / opt 2 / max 3); the dtype tables cover every (operation, input type)
cell of every layer type on a rank-4 input, and the cast cases every (input type, target type) pair.

Counts of the default run (seed 0; printed at the end of `python -m pytest -n 0 tests/reference/test_rtx_sweep.py`):
7,845 cases (1,153 with a dynamic batch): 4,477 both accept, 3,250 both reject, 118 documented reference-stricter,
0 differences; about 2 minutes in one process on 2 cores. `-m slow` sweeps four more seeds at three times the size
(each family was swept there with 0 differences when it was added; no run of all of them at once is recorded).
"""

from __future__ import annotations

import logging
import random
import re

import pytest

from helpers import rtx_sweep as S
from helpers import rtx_sweep_attention as SAT
from helpers import rtx_sweep_control as SC
from helpers import rtx_sweep_dds as D
from helpers import rtx_sweep_dynamic_quantize as SDQ
from helpers import rtx_sweep_index as SI
from helpers import rtx_sweep_sample as SA
from helpers import rtx_sweep_shape as SS
from helpers import rtx_sweep_shape_tensor as SST
from helpers import rtx_sweep_topk as ST
from helpers import rtx_sweep_tables as T
from helpers import twin
from helpers.rtx_sweep_runner import RtxRunner, Tally, judge
from helpers.twin import Stricter

#: family -> (generator of one random case, cases per seed in the default run)
FAMILIES = {
    "convolution": (S.conv_case, 300), "deconvolution": (S.deconv_case, 200), "pooling": (S.pool_case, 300),
    "padding": (S.padding_case, 160), "lrn": (S.lrn_case, 160), "scale": (S.scale_case, 300),
    "reduce": (S.reduce_case, 200), "elementwise": (S.elementwise_case, 300), "unary": (S.unary_case, 200),
    "activation": (S.activation_case, 200), "identity": (S.identity_case, 80), "constant": (S.constant_case, 160),
    "shuffle": (SS.shuffle_case, 300), "slice": (SS.slice_case, 300), "concatenation": (SS.concat_case, 200),
    "matrix_multiply": (SS.matmul_case, 300), "softmax": (SS.softmax_case, 120),
    "normalization": (SS.normalization_case, 300),
    "resize": (S.resize_case, 200),
    "squeeze": (SI.squeeze_case, 120), "unsqueeze": (SI.unsqueeze_case, 100),
    "parametric_relu": (SI.parametric_relu_case, 100), "select": (SI.select_case, 120),
    "gather": (SI.gather_case, 200), "cumulative": (SI.cumulative_case, 100), "one_hot": (SI.one_hot_case, 100),
    "non_zero": (D.non_zero_case, 80), "nms": (D.nms_case, 120), "assertion": (D.assertion_case, 60),
    "topk": (ST.topk_case, 200), "scatter": (ST.scatter_case, 120),
    "reverse_sequence": (ST.reverse_sequence_case, 100), "einsum": (ST.einsum_case, 250),
    "grid_sample": (SA.grid_sample_case, 120), "ragged_softmax": (SA.ragged_softmax_case, 80),
    "rotary_embedding": (SA.rotary_embedding_case, 120), "kv_cache_update": (SA.kv_cache_update_case, 120),
    "shape_tensor": (SST.shape_tensor_case, 120), "fill": (SST.fill_case, 120),
    "attention": (SAT.attention_case, 60), "qdq_block": (SAT.block_qdq_case, 60),
}
FAMILIES.update({"conditional": (SC.conditional_case, 60), "loop": (SC.loop_case, 60)})
FAMILIES.update({"broadcast_slice": (SST.broadcast_slice_case, 80)})
#: families TensorRT-RTX judges for an sm120 target (FP4/FP8 data build for Blackwell only), with `runner120`
SM120_FAMILIES = {"dynamic_quantize": (SDQ.dynamic_quantize_case, 200)}
SEED = 0

#: INT4 network inputs: tests/helpers/twin.py cannot express this example (it twins layers, not add_input)
INT4_INPUT = Stricter(
    r"only Q/DQ layers interpret",
    'DataType.INT4: "Signed 4-bit integer representing a quantized floating-point value." (TensorRT 10 and 11); '
    'IDequantizeLayer "supports tensorrt.int8, tensorrt.float8, tensorrt.int4 and tensorrt.fp4 precision". The '
    "reference has no Q/DQ layers and no storage for 4-bit types, so add_input refuses FP8/INT4/FP4",
    lambda network, trt: network.add_shuffle(network.add_input("x", trt.DataType.INT4, (2, 4))))
SWEEP_STRICTER = [*twin.REFERENCE_STRICTER, INT4_INPUT, ST.EINSUM_DYNAMIC_DIAGONAL, SDQ.PARTIAL_BLOCK]


def stricter(case, message: str) -> bool:
    return any(re.search(e.pattern, message) for e in SWEEP_STRICTER)


def random_cases(family: str, seed: int, count: int) -> list:
    rng = random.Random(f"{seed}-{family}")
    generate = (FAMILIES.get(family) or SM120_FAMILIES[family])[0]
    return [generate(rng) for _ in range(count)]


_TOTAL = Tally()


@pytest.fixture(scope="module")
def runner(rtx, request):
    """One TensorRT-RTX builder for the module; its error log is not echoed (thousands of expected
    rejections) and the module's counts are printed at the end."""
    log = logging.getLogger("trtbuild.tensorrt")
    level = log.level
    log.setLevel(logging.CRITICAL + 1)
    yield RtxRunner(rtx)
    log.setLevel(level)
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if reporter is not None and capture is not None and _TOTAL.cases:
        with capture.global_and_fixture_disabled():
            reporter.write_line(f"\nrtx sweep: {_TOTAL}")


@pytest.fixture(scope="module")
def runner120(rtx, runner):
    """TensorRT-RTX building for sm120 (after `runner`, whose teardown prints the module's counts)."""
    return RtxRunner(rtx, targets=("12.0",))


def _judge(cases, runner):
    tally, problems = judge(cases, runner, stricter)
    _TOTAL.add(tally)
    assert not problems, f"{len(problems)} of {len(cases)} cases differ (expected: TensorRT-RTX's verdict):\n  " + \
        "\n  ".join(problems)
    return tally


@pytest.mark.parametrize("family", list(FAMILIES))
def test_random_single_layer_cases(runner, family):
    tally = _judge(random_cases(family, SEED, FAMILIES[family][1]), runner)
    assert tally.both_accept >= tally.cases // 5  # the draws are not all rejections


@pytest.mark.parametrize("family", list(SM120_FAMILIES))
def test_random_sm120_cases(runner120, family):
    tally = _judge(random_cases(family, SEED, SM120_FAMILIES[family][1]), runner120)
    assert tally.both_accept >= tally.cases // 5


def test_dtype_tables(runner):
    _judge(T.dtype_table_cases(), runner)


def test_every_cast_pair(runner):
    cases = S.cast_cases(random.Random(f"{SEED}-cast"))
    assert len(cases) == len(S.DTYPES) * len(S.CAST_TARGETS) * 2
    _judge(cases, runner)


def test_default_run_has_enough_cases():
    n = (sum(count for _, count in [*FAMILIES.values(), *SM120_FAMILIES.values()]) + len(T.dtype_table_cases())
         + 2 * len(S.DTYPES) * len(S.CAST_TARGETS))
    assert n >= 1500


def test_int4_input_entry_is_still_stricter(runner):
    """The reference refuses an INT4 network input (documented); TensorRT-RTX takes one into a shuffle."""
    import trtbuild.reference as ref
    from helpers.rtx_sweep_runner import run_reference

    case = S.Case("identity", "INT4 input into a shuffle",
                  lambda trt, net: [INT4_INPUT.example(net, trt).get_output(0)])
    verdict = run_reference(case)
    assert not verdict.accepted and re.search(INT4_INPUT.pattern, verdict.message), verdict.message
    assert runner.verdicts([case])[0].accepted, "TensorRT-RTX rejects INT4 inputs now: drop the entry"
    assert ref.DataType.INT4  # the reference knows the type, it only refuses to hold it


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2, 3, 4])
@pytest.mark.parametrize("family", list(FAMILIES))
def test_random_single_layer_cases_more_seeds(runner, family, seed):
    _judge(random_cases(family, seed, 3 * FAMILIES[family][1]), runner)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2, 3, 4])
@pytest.mark.parametrize("family", list(SM120_FAMILIES))
def test_random_sm120_cases_more_seeds(runner120, family, seed):
    _judge(random_cases(family, seed, 3 * SM120_FAMILIES[family][1]), runner120)
