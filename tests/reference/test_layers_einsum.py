"""trtbuild.reference: Einsum (explicit and implicit output, transposes, reductions, products, diagonals, ellipsis,
broadcasting, one to three inputs) against torch.einsum in float64; each construction also built by TensorRT-RTX
(the `refnet` twin)."""

from __future__ import annotations

import pytest
import torch

import trtbuild.reference as trt
from helpers.refnet import close

gen = torch.Generator().manual_seed(29)


def einsum_case(refnet, equation, *shapes, dt=trt.float32):
    xs = [torch.randn(s, generator=gen) for s in shapes]
    ins = [refnet.input(f"x{k}", s, dt) for k, s in enumerate(shapes)]
    layer = refnet.network.add_einsum(ins, equation)
    assert layer.equation == equation and layer.num_inputs == len(shapes)
    y = refnet.run({f"x{k}": x for k, x in enumerate(xs)}, y=layer.get_output(0))["y"]
    return y, xs


@pytest.mark.parametrize("equation, shapes", [
    ("ij,jk->ik", [(2, 3), (3, 4)]),          # matrix-matrix multiplication
    ("ij->ji", [(2, 3)]),                      # transpose
    ("ij->", [(2, 3)]),                        # sum
    ("i,i->", [(5,), (5,)]),                   # dot product
    ("ik,k->i", [(2, 3), (3,)]),               # matrix-vector
    ("ijk,ikl->ijl", [(2, 3, 4), (2, 4, 5)]),  # batch matrix multiplication
    ("ij->i", [(4, 3)]),                       # reduction of one axis
    ("i,j->ij", [(2,), (3,)]),                 # outer product
    ("ij,ij->ij", [(2, 3), (2, 3)]),           # elementwise product
    ("ijk,jil->kl", [(2, 3, 4), (3, 2, 5)]),
    ("bij,bkj->bik", [(2, 3, 4), (2, 5, 4)]),
    ("i,j,k->ijk", [(2,), (3,), (4,)]),        # three inputs
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]),
    ("i,->i", [(3,), ()]),                     # a scalar operand
    ("->", [()]),
])
def test_einsum_explicit(refnet, equation, shapes):
    y, xs = einsum_case(refnet, equation, *shapes)
    close(y, torch.einsum(equation, *[x.double() for x in xs]), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("equation, shapes, expected_shape", [
    ("ij,jk", [(2, 3), (3, 4)], (2, 4)),
    ("ba", [(2, 3)], (3, 2)),                  # implicit output: alphabetical, so a transpose
    ("ij", [(2, 3)], (2, 3)),
    ("ab,ba", [(2, 3), (3, 2)], ()),
    ("ii", [(3, 3)], ()),                      # trace
    ("", [()], ()),
    ("...ij,jk", [(5, 2, 3), (3, 4)], (5, 2, 4)),  # the ellipsis dimensions lead
    ("ij...", [(2, 3, 4, 5)], (4, 5, 2, 3)),
])
def test_einsum_implicit_output(refnet, equation, shapes, expected_shape):
    y, xs = einsum_case(refnet, equation, *shapes)
    assert tuple(y.shape) == expected_shape
    close(y, torch.einsum(equation, *[x.double() for x in xs]), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("equation, shapes", [
    ("ii->i", [(3, 3)]),
    ("iij->j", [(2, 2, 3)]),
    ("ijj->ij", [(2, 3, 3)]),
    ("iji->ij", [(2, 3, 2)]),
    ("ii,i->i", [(3, 3), (3,)]),
    ("...ii->...i", [(2, 3, 3)]),              # the docstring's batch diagonal
])
def test_einsum_diagonal(refnet, equation, shapes):
    y, xs = einsum_case(refnet, equation, *shapes)
    close(y, torch.einsum(equation, *[x.double() for x in xs]), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("equation, shapes", [
    ("...ij,...jk->...ik", [(2, 2, 3), (2, 3, 4)]),
    ("...ij,...jk->...ik", [(5, 2, 3), (1, 3, 4)]),  # ellipsis dimensions broadcast
    ("i...j->...", [(2, 3, 4, 5)]),
    ("...->...", [(2, 3)]),
    ("i...->i", [(2,)]),                             # an ellipsis of no dimensions
    ("i...i->i...", [(2, 3, 2)]),
])
def test_einsum_ellipsis(refnet, equation, shapes):
    y, xs = einsum_case(refnet, equation, *shapes)
    close(y, torch.einsum(equation, *[x.double() for x in xs]), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("equation, shapes", [("ij,jk->ik", [(2, 1), (3, 4)]), ("ij,jk->ik", [(2, 3), (1, 4)]),
                                              ("i,i->i", [(3,), (1,)]), ("ij,ij->i", [(2, 1), (2, 3)])])
def test_einsum_broadcasts_unit_dimensions(refnet, equation, shapes):
    y, xs = einsum_case(refnet, equation, *shapes)
    expanded = torch.broadcast_tensors(*[x.double() for x in xs]) if equation.startswith(("i,i", "ij,ij")) else None
    if expanded is None:  # j broadcast: the unit side repeated to the other's size
        a, b = xs
        j = max(a.shape[1], b.shape[0])
        expanded = (a.double().expand(a.shape[0], j), b.double().expand(j, b.shape[1]))
    close(y, torch.einsum(equation, *expanded), atol=1e-5, rtol=1e-5)


def test_einsum_spaces_are_allowed(refnet):
    y, xs = einsum_case(refnet, " i j , j k -> i k ", (2, 3), (3, 4))
    close(y, xs[0].double() @ xs[1].double(), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("dt, torch_dt", [(trt.float16, torch.float16), (trt.bfloat16, torch.bfloat16)])
def test_einsum_half_types(refnet, dt, torch_dt):
    a, b = torch.randn((3, 4), generator=gen).to(torch_dt), torch.randn((4, 2), generator=gen).to(torch_dt)
    layer = refnet.network.add_einsum([refnet.input("a", (3, 4), dt), refnet.input("b", (4, 2), dt)], "ij,jk->ik")
    y = refnet.run({"a": a, "b": b}, y=layer.get_output(0))["y"]
    assert y.dtype == torch_dt
    close(y, a.double() @ b.double(), atol=3e-2, rtol=3e-2)


def test_einsum_equation_can_change(refnet):
    x = torch.randn((2, 3), generator=gen)
    layer = refnet.network.add_einsum([refnet.input("x", (2, 3))], "ij->ji")
    layer.equation = "ij->j"
    assert layer.equation == "ij->j"
    y = refnet.run({"x": x}, y=layer.get_output(0))["y"]
    close(y, x.double().sum(0))


@pytest.mark.parametrize("equation, words", [
    ("Ij->jI", "lower-case"), ("i1->i", "lower-case"), ("\tij->ji", "lower-case"), ("ij-ji", "lower-case"),
    ("ij->ji->ij", "more than one '->'"), ("ij->jj", "subscript j is repeated"), ("ij->k", "appears in no input"),
    ("ij,jk->ik", "2 input terms but the layer has 1 inputs"), ("...i...->i", "more than one ellipsis"),
    ("..i->i", "lower-case"),
])
def test_einsum_refuses_bad_equations_when_added(refnet, equation, words):
    with pytest.raises(trt.NetworkError, match=words):
        refnet.network.add_einsum([refnet.input("x", (2, 3))], equation)


def test_einsum_setter_refuses_a_bad_equation(refnet):
    layer = refnet.network.add_einsum([refnet.input("x", (2, 3))], "ij->ji")
    with pytest.raises(trt.NetworkError, match="lower-case"):
        layer.equation = "Ij->jI"
    with pytest.raises(trt.NetworkError, match="2 input terms"):
        layer.equation = "ij,jk->ik"
    assert layer.equation == "ij->ji"


@pytest.mark.parametrize("equation, shapes, words", [
    ("ijk->", [(2, 3)], "names 3 dimensions"),
    ("ij,jk->ik", [(2, 3), (4, 5)], "must match or be 1"),
    ("ii->i", [(2, 3)], "a diagonal needs equal sizes"),
    ("ii->i", [(3, 1)], "a diagonal needs equal sizes"),
    ("...ij,...jk", [(5, 2, 3), (3, 4)], "every ellipsis must cover the same number"),
    ("...ij,...jk->...ik", [(6, 5, 2, 3), (5, 3, 4)], "covers 1 dimensions but an earlier one covers 2"),
    ("...ij,...jk->...ik", [(5, 2, 3), (2, 3, 4)], "do not broadcast"),
    ("ij->...ij", [(2, 3)], "no input term has one"),
])
def test_einsum_refuses_shapes(refnet, equation, shapes, words):
    with pytest.raises(trt.NetworkError, match=words):
        refnet.network.add_einsum([refnet.input(f"x{k}", s) for k, s in enumerate(shapes)], equation)


@pytest.mark.parametrize("dt", [trt.int32, trt.int64, trt.int8, trt.bool])
def test_einsum_refuses_types(refnet, dt):
    with pytest.raises(trt.NetworkError, match="FLOAT, HALF or BF16"):
        refnet.network.add_einsum([refnet.input("x", (2, 3), dt)], "ij->ji")


def test_einsum_refuses_mixed_types_and_no_inputs(refnet):
    with pytest.raises(trt.NetworkError, match="different types"):
        refnet.network.add_einsum([refnet.input("a", (2, 3)), refnet.input("b", (3, 4), trt.float16)], "ij,jk->ik")
    with pytest.raises(trt.NetworkError, match="at least one input"):
        refnet.network.add_einsum([], "->")


@pytest.mark.parametrize("equation, shapes", [
    ("i,i,i->i", [(3,), (1,), (1,)]), ("i,i,i->i", [(1,), (3,), (3,)]), ("ij,jk,kl->il", [(2, 1), (3, 4), (4, 5)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (1, 5)]), ("a,a,b->ab", [(1,), (3,), (2,)]),
])
def test_einsum_three_inputs_broadcast_where_the_first_pair_has_the_size(refnet, equation, shapes):
    y, xs = einsum_case(refnet, equation, *shapes)
    sizes = {}
    for term, x in zip(equation.split("->")[0].split(","), xs):
        for s, d in zip(term, x.shape):
            sizes[s] = max(sizes.get(s, 1), d)
    expanded = [x.double().expand([sizes[s] for s in term])
                for term, x in zip(equation.split("->")[0].split(","), xs)]
    close(y, torch.einsum(equation, *expanded), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("equation, shapes, words", [
    ("i,i,i->i", [(1,), (1,), (3,)], "subscript i has size 1 in inputs 0..1 and is broadcast to 3"),
    ("ij,jk,kl->il", [(2, 3), (3, 1), (4, 5)], "subscript k has size 1 in inputs 0..1"),
    ("a,b,a->ab", [(1,), (2,), (3,)], "subscript a has size 1"),
    ("...a,...b,...a->...ab", [(1, 2), (1, 2), (4, 2)], "ellipsis dimension 0 has size 1"),
])
def test_einsum_refuses_what_tensorrt_rtx_cannot_contract_pairwise(refnet, equation, shapes, words):
    with pytest.raises(trt.NetworkError, match=words):
        refnet.network.add_einsum([refnet.input(f"x{k}", s) for k, s in enumerate(shapes)], equation)


def test_einsum_diagonal_of_a_dynamic_and_a_static_dimension_is_refused(refnet):
    """TensorRT-RTX refuses it where the profile cannot reach the static size (here 4, beyond the profile's 1..3,
    as the build fails); where it can, the reference is stricter (REFERENCE_STRICTER)."""
    from helpers.refnet import add_profile

    add_profile(refnet, {"x": ((1, 4), (2, 4), (3, 4))})
    with pytest.raises(trt.NetworkError, match="over a dynamic and a static dimension"):
        refnet.network.add_einsum([refnet.input("x", (-1, 4))], "ii->i")


def test_einsum_dynamic_diagonal_entry_is_still_stricter(rtxnet):
    """The sweep's EINSUM_DYNAMIC_DIAGONAL entry: the reference refuses its example, TensorRT-RTX builds it with a
    profile that reaches the static size."""
    from helpers.refnet import RefNet
    from helpers.rtx_sweep_topk import EINSUM_DYNAMIC_DIAGONAL

    with pytest.raises(trt.NetworkError, match=EINSUM_DYNAMIC_DIAGONAL.pattern):
        EINSUM_DYNAMIC_DIAGONAL.example(RefNet().network, trt)
    net, rtx = rtxnet.network, rtxnet.trt
    y = EINSUM_DYNAMIC_DIAGONAL.example(net, rtx).get_output(0)
    net.mark_output(y)
    profile = rtxnet.builder.create_optimization_profile()
    profile.set_shape("x", (1, 2), (2, 2), (3, 2))
    rtxnet.config.add_optimization_profile(profile)
    assert tuple(y.shape) == (2,)
    assert rtxnet.build() is not None, rtxnet.errors


@pytest.mark.parametrize("equation, shapes", [("a,aa->a", [(2,), (1, 1)]), ("a,aa->a", [(1,), (2, 2)]),
                                              ("aa,aa->a", [(1, 1), (2, 2)]), ("a,a,aa->a", [(1,), (2,), (2, 2)])])
def test_einsum_refuses_a_diagonal_broadcast_against_the_first_size(refnet, equation, shapes):
    with pytest.raises(trt.NetworkError, match="TensorRT-RTX does not broadcast a diagonal's subscript"):
        refnet.network.add_einsum([refnet.input(f"x{k}", s) for k, s in enumerate(shapes)], equation)


@pytest.mark.parametrize("shapes", [[(1, 1), (3,)], [(3, 3), (1,)]])
def test_einsum_diagonal_in_the_first_input_broadcasts(refnet, shapes):
    y, (a, b) = einsum_case(refnet, "aa,a->a", *shapes)
    n = max(a.shape[0], b.shape[0])
    close(y, torch.einsum("aa,a->a", a.double().expand(n, n), b.double().expand(n)), atol=1e-5, rtol=1e-5)


def test_einsum_output_ellipsis_without_input_ellipsis_is_refused_for_two_inputs(refnet):
    with pytest.raises(trt.NetworkError, match="no input term has one"):
        refnet.network.add_einsum([refnet.input("a", (3,)), refnet.input("b", (3,))], "i,i->i...")


def test_einsum_output_ellipsis_without_input_ellipsis_is_dropped_for_three_inputs(refnet):
    """TensorRT-RTX takes it with three inputs (and refuses it with one or two), and drops it from the equation."""
    xs = [torch.randn((3,), generator=gen) for _ in range(3)]
    layer = refnet.network.add_einsum([refnet.input(f"x{k}", (3,)) for k in range(3)], "i,i,i->i...")
    assert layer.equation == "i,i,i->i"
    y = refnet.run({f"x{k}": x for k, x in enumerate(xs)}, y=layer.get_output(0))["y"]
    close(y, xs[0].double() * xs[1].double() * xs[2].double(), atol=1e-5, rtol=1e-5)
