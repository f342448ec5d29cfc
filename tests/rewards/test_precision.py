"""The precision contract (rewards/precision.py): at fp32 a TF32 shortcut fails the measured bound and IEEE fp32
passes it; at bf16 a GEMM that reads only part of K fails it and fp32 accumulation passes it.

The candidates themselves (known-bad ``1:tf32_dot`` and ``1:skip_k_when_positive``, known-good ``1:correct``)
run through the whole sandbox in tests/sandbox/test_known_bad_suite.py; here the parts, on plain tensors and the
problems' own references.
"""

import torch

from kbenv.problems import get_problem, make_inputs
from kbenv.rewards import checks as C
from kbenv.rewards import precision as P
from kbenv.sandbox.references import References


def test_round_tf32_keeps_ten_mantissa_bits_to_nearest():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(10000, generator=g) * 1e3
    r = P.round_tf32(x)
    assert int((r.view(torch.int32) & 0x1FFF).abs().sum()) == 0  # the 13 low mantissa bits are gone
    rel = ((r - x).abs() / x.abs()).max().item()
    assert 2 ** -13 < rel <= 2 ** -11  # to nearest: at most half a TF32 unit (and it does round)
    assert torch.equal(P.round_tf32(r), r)  # TF32 values are fixed points
    # ties go away from zero, as cvt.rna does: 1 + 2^-11 is halfway between 1 and 1 + 2^-10
    assert P.round_tf32(torch.tensor([1 + 2 ** -11, -(1 + 2 ** -11)])).tolist() == [1 + 2 ** -10, -(1 + 2 ** -10)]


def test_a_matmul_is_eligible_and_its_shortcut_error_is_measured():
    g = torch.Generator().manual_seed(1)
    a, b = torch.rand(64, 256, generator=g), torch.rand(256, 32, generator=g)

    class MM(torch.nn.Module):
        def forward(self, x, y):
            return x @ y

    eligible, (err,) = P.shortcut_errors(MM(), [a, b], [a @ b])
    assert eligible
    tf32 = P.round_tf32(a) @ P.round_tf32(b)
    assert abs(err - ((tf32 - a @ b).norm() / (a @ b).norm()).item()) < 1e-9
    assert 1e-6 < err < 1e-4  # inside the fixed fp32 bound: why a fixed bound alone pays the shortcut


def test_elementwise_and_weighted_models():
    x = torch.rand(8, 16)
    assert P.tensor_core_eligible(torch.nn.ReLU(), [x]) is False  # found on meta tensors
    assert P.shortcut_errors(torch.nn.ReLU(), [x], [torch.relu(x)]) == (False, [])  # no shortcut speeds it up: not run
    lin = torch.nn.Linear(16, 4)
    with torch.no_grad():
        ref = lin(x)
        eligible, (err,) = P.shortcut_errors(lin, [x], [ref])
        assert eligible and err > 0  # weights are rounded too
        assert torch.equal(lin(x), ref)  # the reference model itself is untouched


def test_where_meta_tensors_cannot_say_the_rounded_run_decides_and_its_error_figures_do_not_count(monkeypatch):
    monkeypatch.setattr(P, "tensor_core_eligible", lambda model, inputs: None)
    x = torch.rand(8, 16)
    assert P.shortcut_errors(torch.nn.ReLU(), [x], [torch.relu(x)]) == (False, [])  # torch.dot of its figures aside
    lin = torch.nn.Linear(16, 4)
    with torch.no_grad():
        eligible, (err,) = P.shortcut_errors(lin, [x], [lin(x)])
    assert eligible and err > 0


def test_downgrade_bound_clamps():
    assert P.downgrade_bound([4e-5], True, 1e-4) == 1e-5
    assert P.downgrade_bound([4e-5, 8e-5], True, 1e-4) == 1e-5  # the smallest output's
    assert P.downgrade_bound([1e-8], True, 1e-4) == P.FLOOR
    assert P.downgrade_bound([1.0], True, 1e-4) == 1e-4  # never looser than the tolerance
    assert P.downgrade_bound([4e-5], False, 1e-4) == 1e-4  # no tensor-core op: the fixed bound
    assert P.downgrade_bound([None], True, 1e-4) == 1e-4  # nothing measured: the fixed bound


def test_ieee_fp32_turns_tf32_off():
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    try:
        P.ieee_fp32()
        assert not torch.backends.cuda.matmul.allow_tf32 and not torch.backends.cudnn.allow_tf32
    finally:
        P.ieee_fp32()


def _contract(pid, precision="fp32"):
    refs = References(torch.device("cpu"), 1 << 28)
    st = refs.state(get_problem(pid), "small", precision)
    refs.pair(st, 7, "default")
    return refs.contract(st, 7), st


def test_problem_1_default_domain_rejects_tf32_and_accepts_ieee():
    contract, st = _contract("kernelbench/level1/1")
    assert contract.eligible and contract.rel_frobenius < 2e-5
    assert contract.tolerance["fp32"]["rel_frobenius"] == contract.rel_frobenius
    a, b = make_inputs(st.ns, 7, "default", "cpu", torch.float32)
    ref = a @ b
    tf32 = P.round_tf32(a) @ P.round_tf32(b)
    reordered = (a.double() @ b.double()).float()  # an honest fp32 kernel's error is of this order or less
    assert not all(c.passed for c in C.check_error(ref, tf32, "fp32", 0, contract.tolerance))
    assert all(c.passed for c in C.check_error(ref, reordered, "fp32", 0, contract.tolerance))
    # the fixed bound alone paid the shortcut
    assert all(c.passed for c in C.check_error(ref, tf32, "fp32", 0, get_problem("kernelbench/level1/1").tolerance))


def test_a_problem_s_own_override_is_kept_with_its_notes():
    contract, _ = _contract("kernelbench/level1/40")  # LayerNorm: its override carries a 'why' beside the figures
    assert contract.tolerance == get_problem("kernelbench/level1/40").tolerance
    assert contract.rel_frobenius == get_problem("kernelbench/level1/40").tolerance["fp32"]["rel_frobenius"]


def test_problems_without_a_tensor_core_op_keep_their_bounds():
    for precision, fixed in (("fp32", 1e-4), ("bf16", C.tolerances("bf16")["rel_frobenius"])):
        contract, _ = _contract("kernelbench/level1/19", precision)  # ReLU
        assert not contract.eligible and contract.rel_frobenius == fixed and contract.shortcut_error is None
        assert contract.tolerance == (get_problem("kernelbench/level1/19").tolerance or {})


def _skip_k(a: torch.Tensor, b: torch.Tensor, skip: int) -> torch.Tensor:
    """A GEMM that reads every K index but one in ``skip`` and rescales: the statistical shortcut."""
    keep = torch.arange(a.shape[1]) % skip != 0
    return a[:, keep].float() @ b[keep].float() * (skip / (skip - 1))


def test_bf16_contract_holds_a_matmul_to_twice_its_own_rounding():
    contract, st = _contract("kernelbench/level1/1", "bf16")
    a, b = make_inputs(st.ns, 7, "default", "cpu", torch.bfloat16)
    exact = a.float() @ b.float()
    rounding = (torch.linalg.vector_norm(exact.bfloat16().float() - exact) / torch.linalg.vector_norm(exact)).item()
    assert contract.eligible and 1e-3 < contract.shortcut_error < 3e-3  # bf16 rounds to 8 mantissa bits
    assert contract.shortcut_error >= rounding * (1 - 1e-6)
    assert contract.rel_frobenius == P.ROUNDINGS * contract.shortcut_error
    assert contract.tolerance["bf16"]["rel_frobenius"] == contract.rel_frobenius


def test_bf16_default_domain_rejects_a_partial_k_read_and_accepts_fp32_accumulation():
    contract, st = _contract("kernelbench/level1/1", "bf16")
    fixed = get_problem("kernelbench/level1/1").tolerance
    a, b = make_inputs(st.ns, 7, "default", "cpu", torch.bfloat16)
    ref = (a.float() @ b.float()).bfloat16()
    half = a.shape[1] // 2  # an honest kernel's other accumulation order, and one with bf16 split-K partials
    reordered = (a[:, :half].float() @ b[:half].float() + a[:, half:].float() @ b[half:].float()).bfloat16()
    partials = ((a[:, :half].float() @ b[:half].float()).bfloat16().float()
                + (a[:, half:].float() @ b[half:].float()).bfloat16().float()).bfloat16()
    skipped = _skip_k(a, b, 64).bfloat16()  # one K index in 64: what passes the fixed bound at this size
    passes = lambda out, tol: all(c.passed for c in C.check_error(ref, out, "bf16", 0, tol))  # noqa: E731
    assert passes(skipped, fixed) and not passes(skipped, contract.tolerance)
    assert passes(reordered, contract.tolerance) and passes(partials, contract.tolerance)
    exact = a.float() @ b.float()  # truncated to bf16 instead of rounded (a bit shift): honest, and inside
    truncated = (exact.view(torch.int32) & ~0xFFFF).view(torch.float32).bfloat16()
    assert passes(truncated, contract.tolerance)


def test_rounding_bound_clamps():
    assert P.rounding_bound([1e-3], True, 2e-2) == P.ROUNDINGS * 1e-3
    assert P.rounding_bound([0.5], True, 2e-2) == 2e-2  # never wider than the fixed bound
    assert P.rounding_bound([1e-3], False, 2e-2) == 2e-2
    assert P.rounding_bound([None, 0.0], True, 2e-2) == 2e-2  # nothing measured: the fixed bound



def test_timed_calls_of_a_tensor_core_problem_draw_a_zero_mean_domain():
    """Where the contract applies, timed inputs come from the problem's first zero-mean domain, so that a path
    only the positive official inputs take never runs while timed; elsewhere, and where the problem has no such
    domain, from the official one."""
    assert P.timed_domain(("default", "normal", "signed_uniform", "wide"), True) == "signed_uniform"
    assert P.timed_domain(("default", "normal"), True) == "normal"
    assert P.timed_domain(("default", "signs"), True) == "signs"  # 13-15: symmetric and triangular matrices
    assert P.timed_domain(("default",), True) == "default"
    assert P.timed_domain(("default", "normal", "signed_uniform"), False) == "default"  # no tensor-core op
    for pid, timed in (("kernelbench/level1/1", "normal"), ("kernelbench/level1/13", "signs")):
        assert P.timed_domain(get_problem(pid).domains, True) == timed


def test_the_timed_domain_has_a_contract_of_its_own():
    """Problem 1 timed on N(0, 1): its contract is measured there (at bf16 the rounding of outputs that change
    sign), and an FP8-like shortcut that the positive official inputs let through is rejected on it."""
    refs = References(torch.device("cpu"), 1 << 28)
    st = refs.state(get_problem("kernelbench/level1/1"), "small", "bf16")
    refs.pair(st, 7, "default")
    official, timed = refs.contract(st, 7), refs.contract(st, 8, "normal")
    assert timed is not official and set(st.contracts) == {"default", "normal"}
    assert timed.eligible and 1e-3 < timed.shortcut_error < 3e-3
    assert refs.contract(st, 9, "normal") is timed  # measured once per problem state
    a, b = make_inputs(st.ns, 8, "normal", "cpu", torch.bfloat16)
    ref = (a.float() @ b.float()).bfloat16()
    coarse = (a.float() @ b.float() * (1 + 2 ** -6)).bfloat16()  # a 1.6% scale error, inside bf16's fixed bound
    passes = lambda out, tol: all(c.passed for c in C.check_error(ref, out, "bf16", 0, tol))  # noqa: E731
    assert passes(coarse, get_problem("kernelbench/level1/1").tolerance)
    assert not passes(coarse, timed.tolerance)
    assert passes((a.float() @ b.float()).bfloat16(), timed.tolerance)
