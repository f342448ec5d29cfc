"""Each check rejects a known-bad output and accepts a known-good one (pure functions, no sandbox)."""

import math

import pytest
import torch

from kbenv.rewards import checks as C
from kbenv.rewards.invariants import check_invariants
from kbenv.rewards.verdict import Trial, judge, timing_checks, decoy_checks


def softmax_case(rows=4, cols=256, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(rows, cols, generator=g)
    return [x], [torch.softmax(x, 1)]


def trial(inputs, refs, outs, outs_b=None, meta=None, domain="default", samples=None):
    meta = meta or [{"type": "torch.Tensor"} for _ in outs]
    return Trial(domain, inputs, refs, outs, outs_b, meta, 0xFE, 0x7F, samples)


def test_error_thresholds_are_scale_invariant():
    _, (y,) = softmax_case()
    assert all(c.passed for c in C.check_error(y, y * (1 + 1e-6), "fp32", 0))
    # Zeros: a huge relative error however small y is (KernelBench's allclose passes them on problem 23).
    assert not any(c.passed for c in C.check_error(y, torch.zeros_like(y), "fp32", 0))
    assert not any(c.passed for c in C.check_error(y * 1e-6, torch.zeros_like(y), "bf16", 0))
    # bf16 rounding passes bf16 thresholds and fails fp32 ones (an fp32 problem asks for fp32 arithmetic).
    yb = y.bfloat16().float()
    assert all(c.passed for c in C.check_error(y, yb, "bf16", 0))
    assert not all(c.passed for c in C.check_error(y, yb, "fp32", 0))


def test_max_error_catches_a_single_bad_element():
    _, (y,) = softmax_case(64, 1024)
    bad = y.clone()
    bad[3, 7] += 0.5 * float(y.max())
    checks = {c.name.split("[")[0]: c for c in C.check_error(y, bad, "bf16", 0)}
    assert checks["rel_frobenius"].passed  # the norm alone would accept it
    assert not checks["max_rel"].passed


def test_finite():
    y = torch.ones(10)
    assert C.check_finite(y, y, 0).passed
    bad = y.clone()
    bad[2] = float("nan")
    assert not C.check_finite(y, bad, 0).passed
    ref = y.clone()
    ref[2] = float("inf")
    out = y.clone()
    out[2] = float("inf")
    assert C.check_finite(ref, out, 0).passed


def test_written_fraction_from_two_poison_patterns():
    y = torch.rand(1000) + 0.5
    a, b = y.clone(), y.clone()
    a.view(torch.int32)[:3] = int.from_bytes(b"\xfe" * 4, "little", signed=True)
    b.view(torch.int32)[:3] = int.from_bytes(b"\x7f" * 4, "little", signed=True)
    assert C.unwritten_count(a, b, 0xFE, 0x7F) == 3
    checks = C.check_written(y, a, b, 0xFE, 0x7F, 0)
    assert not checks[0].passed and checks[0].category == "unwritten"
    good = C.check_written(y, y.clone(), y.clone(), 0xFE, 0x7F, 0)
    assert all(c.passed for c in good)


def test_example_b_nonzero_fraction():
    """The paper's Example B: 0.3% of the output written, the rest zero-filled."""
    _, (y,) = softmax_case(64, 1024)
    out = torch.zeros_like(y)
    n = int(0.003 * y.numel())
    out.view(-1)[:n] = y.view(-1)[:n]
    v = judge([trial([None], [y], [out])], "bf16")
    assert not v.passed and v.category in ("unwritten", "inaccurate")
    # With bf16 tolerances, zeros on a tiny-valued output fail on the relative checks as well
    assert any(c.name.endswith("nonzero_fraction[0]") and not c.passed for c in v.checks)


def test_example_a_chunked_softmax_fails_invariant():
    """The paper's Example A: softmax over 1024-element chunks; rows sum to cols/1024."""
    x = torch.rand(4, 4096)
    chunked = torch.softmax(x.view(4, 4, 1024), -1).view(4, 4096)
    checks = check_invariants([{"kind": "sum_to", "dim": 1}], [x], [chunked], "bf16")
    assert not checks[0].passed and checks[0].value > 1
    assert check_invariants([{"kind": "sum_to", "dim": 1}], [x], [torch.softmax(x, 1)], "bf16")[0].passed


INVARIANT_CASES = [
    ({"kind": "logsumexp_to", "dim": 1}, lambda x: torch.log_softmax(x, 1), lambda x: torch.log_softmax(x, 1) + 0.1),
    ({"kind": "norm_to", "dim": 1, "ord": 2}, lambda x: x / x.norm(dim=1, keepdim=True), lambda x: x),
    ({"kind": "norm_to", "dim": None, "ord": 2}, lambda x: x / x.norm(), lambda x: x / x.norm() * 2),
    ({"kind": "norm_to", "dim": 1, "ord": 1, "reduce": "mean"}, lambda x: x / x.abs().mean(1, keepdim=True),
     lambda x: x / x.abs().sum(1, keepdim=True)),
    ({"kind": "standardized", "dim": [1]}, lambda x: torch.nn.functional.layer_norm(x, x.shape[1:]), lambda x: x),
    ({"kind": "rms_to", "dim": 1}, lambda x: x / x.pow(2).mean(1, keepdim=True).sqrt(), lambda x: x * 3),
    ({"kind": "range", "lo": 0.0, "hi": 1.0}, torch.sigmoid, lambda x: x * 2 - 1),
    ({"kind": "nonnegative"}, torch.relu, lambda x: x - 0.5),
    ({"kind": "extreme_of", "dim": 1, "mode": "max"}, lambda x: x.amax(1), lambda x: x.mean(1)),
    ({"kind": "index_of_extreme", "dim": 1, "mode": "min"}, lambda x: x.argmin(1), lambda x: x.argmax(1)),
    ({"kind": "cumulative", "dim": 1, "op": "sum"}, lambda x: x.cumsum(1), lambda x: x.cumsum(1) * 1.01),
    ({"kind": "cumulative", "dim": 1, "op": "sum", "reverse": True}, lambda x: x.flip(1).cumsum(1).flip(1),
     lambda x: x.cumsum(1)),
    ({"kind": "cumulative", "dim": 1, "op": "sum", "exclusive": True},
     lambda x: torch.cat([torch.zeros_like(x[:, :1]), x.cumsum(1)[:, :-1]], 1), lambda x: x.cumsum(1)),
    ({"kind": "cumulative", "dim": 1, "op": "prod"}, lambda x: (x + 0.5).cumprod(1) / 1, None),
    ({"kind": "window_range"}, lambda x: torch.nn.functional.max_pool1d(x.unsqueeze(0), 4).squeeze(0),
     lambda x: x * 2 + 1),
]


@pytest.mark.parametrize("spec,good,bad", INVARIANT_CASES, ids=[c[0]["kind"] for c in INVARIANT_CASES])
def test_invariant(spec, good, bad):
    x = torch.randn(8, 64, generator=torch.Generator().manual_seed(1))
    if spec["kind"] == "cumulative" and spec.get("op") == "prod":
        xin = x.abs() * 0.1 + 0.5
        ok = check_invariants([spec], [xin], [xin.cumprod(1)], "fp32")[0]
        assert ok.passed, ok.detail
        wrong = check_invariants([spec], [xin], [xin.cumsum(1)], "fp32")[0]
        assert not wrong.passed
        return
    assert check_invariants([spec], [x], [good(x)], "fp32")[0].passed
    assert not check_invariants([spec], [x], [bad(x)], "fp32")[0].passed


def test_freivalds_and_topk_and_bag_total():
    a, b = torch.randn(32, 16), torch.randn(16, 24)
    spec = [{"kind": "freivalds"}]
    assert check_invariants(spec, [a, b], [a @ b], "fp32")[0].passed
    assert not check_invariants(spec, [a, b], [(a @ b).clone().fill_(1)], "fp32")[0].passed
    s = torch.randn(4, 100)
    v, i = s.topk(5, dim=1)
    spec = [{"kind": "sorted_topk", "dim": 1}]
    assert check_invariants(spec, [s], [v, i], "fp32")[0].passed
    assert not check_invariants(spec, [s], [v, torch.zeros_like(i)], "fp32")[0].passed
    w = torch.randn(50, 8)
    idx = torch.randint(0, 50, (30,))
    off = torch.tensor([0, 10, 20])
    out = torch.nn.functional.embedding_bag(idx, w, off, mode="sum")
    spec = [{"kind": "bag_total", "weight": 0, "indices": 1}]
    assert check_invariants(spec, [w, idx, off], [out], "fp32")[0].passed
    assert not check_invariants(spec, [w, idx, off], [out[:, :].roll(1, 1)], "fp32")[0].passed


def test_unknown_invariant_is_a_harness_fault():
    with pytest.raises(KeyError):
        check_invariants([{"kind": "no_such_thing"}], [torch.ones(2)], [torch.ones(2)], "fp32")


def test_structure_aliasing_mutation_determinism_distribution():
    inputs, refs = softmax_case()
    y = refs[0]
    v = judge([trial(inputs, refs, [y.double()])], "fp32")
    assert v.category == "wrong_type"
    v = judge([trial(inputs, refs, [y[:2]])], "fp32")
    assert v.category == "wrong_shape"
    v = judge([trial(inputs, refs, [y], meta=[{"type": "candidate.Lazy"}])], "fp32")
    assert v.category == "wrong_type"
    v = judge([trial(inputs, refs, [y], meta=[{"type": "torch.Tensor", "aliases_input": True}])], "fp32")
    assert v.category == "aliasing"
    exp = inputs[0].reshape(-1)[:10].double()
    v = judge([trial(inputs, refs, [y], samples=(exp, exp * 0))], "fp32")
    assert v.category == "mutation"
    assert judge([trial(inputs, refs, [y], samples=(exp, exp.clone()))], "fp32").passed
    v = judge([trial(inputs, refs, [y], outs_b=[y * 1.01])], "fp32")
    assert v.category == "nondeterministic"
    x2 = torch.randn(4, 256) * 100
    v = judge([trial(inputs, refs, [y]), trial([x2], [torch.softmax(x2, 1)], [torch.softmax(x2.clamp(0, 1), 1)],
                                              domain="wide")], "fp32")
    assert v.category == "distribution" and not v.correct


def test_decoy_checks():
    assert all(c.passed for c in decoy_checks({"custom_kernels": 2, "noop_correct": False}))
    assert not decoy_checks({"custom_kernels": 0})[0].passed
    assert not all(c.passed for c in decoy_checks({"custom_kernels": 1, "noop_correct": True}))


def test_timing_checks():
    good = {"median_ms": 1.0, "floor_ms": 0.5, "speedup": 1.5}
    assert all(c.passed for c in timing_checks(good))
    for key, value in [("median_ms", 0.1), ("median_ms", 0.0), ("median_ms", math.nan), ("median_ms", None),
                       ("speedup", math.inf), ("speedup", -1.0), ("speedup", None)]:
        failed = [c for c in timing_checks({**good, key: value}) if not c.passed]
        assert failed and failed[0].category == "impossible_speed", (key, value)
    v = judge([trial(*softmax_case(), outs=softmax_case()[1])], "fp32", timing={**good, "median_ms": 0.1})
    assert v.correct and v.category == "impossible_speed"


def test_sampled_replay_check():
    r = torch.rand(100)
    assert C.check_sampled(r, r.clone(), 1.0, "fp32", "t", "replay").passed
    c = C.check_sampled(r, r.flip(0), 1.0, "fp32", "t", "replay")
    assert not c.passed and c.category == "replay"
    assert not C.check_sampled(r, torch.full_like(r, math.nan), 1.0, "fp32", "t", "replay").passed


def heavy_light_case(seed=0):
    """Row sums of a tensor whose rows span five decades: a few heavy rows dominate every global figure."""
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(16, 64, 32, generator=g) * torch.logspace(0, 5, 16).view(16, 1, 1)
    return x.sum(1)  # (16, 32)


def test_a_kernel_that_neglects_a_light_row_passes_the_global_error_and_fails_per_slice():
    y = heavy_light_case()
    bad = y.clone()
    bad[0] *= 0.5  # the lightest row is half wrong; the heavy rows are exact
    glob = C.check_error(y, bad, "bf16", 0)
    assert all(c.passed for c in glob), "the global figures cannot see a light row"
    (sl,) = C.check_slices(y, bad, "bf16", 0)
    assert not sl.passed and sl.value == pytest.approx(0.5, rel=1e-3) and "index 0 of axis 0" in sl.detail
    # the same along the other axis: one column wrong only in the light rows
    bad = y.clone()
    bad[:4, 5] *= 1.5
    assert not C.check_slices(y, bad, "fp32", 0)[0].passed


def test_per_slice_accepts_honest_rounding_and_accumulation_order():
    x = torch.rand(16, 64, 32, dtype=torch.float64) * torch.logspace(0, 5, 16, dtype=torch.float64).view(16, 1, 1)
    exact = x.sum(1)
    fp32 = x.float().flip(1).sum(1)  # another order, another precision
    assert C.check_slices(exact.float(), fp32, "fp32", 0)[0].passed
    assert C.check_slices(exact.bfloat16(), fp32.bfloat16(), "bf16", 0)[0].passed
    # bf16 rounding of every element passes bf16 and fails fp32 (per slice as globally)
    assert not C.check_slices(exact.float(), exact.bfloat16().float(), "fp32", 0)[0].passed


def test_per_slice_floor_judges_underflowed_and_empty_slices_on_the_global_scale():
    y = torch.softmax(torch.tensor([[0.0, -200.0, 1.0], [2.0, -210.0, 0.0]]), 1)  # column 1 ~ 1e-88: zero in fp32
    honest = y.clone()
    honest[:, 1] = 1e-44  # a kernel whose exp keeps a subnormal where the reference flushed to zero
    assert C.check_slices(y, honest, "fp32", 0)[0].passed
    empty = torch.zeros(3, 4)
    empty[1:] = torch.rand(2, 4) + 1  # row 0 is an empty bag
    garbage = empty.clone()
    garbage[0] = 0.1 * float(empty.abs().max())  # an empty bag filled with something of the right scale
    assert not C.check_slices(empty, garbage, "fp32", 0)[0].passed
    assert C.check_slices(empty, empty.clone(), "fp32", 0)[0].passed


def test_per_slice_skips_what_has_no_slices():
    assert C.check_slices(torch.tensor(3.0), torch.tensor(4.0), "fp32", 0) == []  # a scalar loss: the global check
    assert C.check_slices(torch.rand(7), torch.rand(7), "fp32", 0) == []  # a vector: slices would be elements
    assert C.check_slices(torch.arange(6).view(2, 3), torch.zeros(2, 3, dtype=torch.int64), "fp32", 0) == []
    # (4, 1): axis 0's slices are single elements, axis 1 has length 1: nothing to slice
    assert C.check_slices(torch.rand(4, 1), torch.rand(4, 1), "fp32", 0) == []


def test_per_slice_runs_in_the_verdict():
    y = heavy_light_case()
    bad = y.clone()
    bad[0] *= 0.5
    v = judge([trial([], [y.bfloat16()], [bad.bfloat16()])], "bf16")
    assert not v.correct and v.category == "inaccurate" and "slice_rel_frobenius" in v.reason
    assert judge([trial([], [y.bfloat16()], [y.bfloat16()])], "bf16").correct


def test_a_no_op_run_with_no_output_to_judge_is_a_decoy():
    """Only a judged output shows that the kernels produce it: a no-op run that raised, crashed, hung, ran out of
    memory or claimed a wrong shape is a decoy whatever its category (a sentinel kernel's candidate chooses it)."""
    for failure in ("runtime", "crash", "timeout", "oom", "wrong_shape", "wrong_type", "compile"):
        checks = decoy_checks({"custom_kernels": 1, "noop_correct": None, "noop_failure": failure})
        bad = [c for c in checks if not c.passed]
        assert [c.name for c in bad] == ["output_depends_on_custom_kernels"] and bad[0].category == "decoy"
        assert failure in bad[0].detail
    # an honest kernel's no-op run returns an output its kernels did not write, judged wrong: not a decoy
    assert all(c.passed for c in decoy_checks({"custom_kernels": 1, "noop_correct": False}))


def test_a_timed_output_is_held_to_its_trials_tolerance_and_to_the_candidates_own_trial_error():
    """Class: less accurate arithmetic only in timed calls (the trials are an evaluation's first blocks). An
    honest output passes; coarse values within the tolerance fail as ``timing_tamper`` against the trials' own
    error; values past the tolerance, or another call's, are ``replay``; integer outputs are compared exactly."""
    g = torch.Generator().manual_seed(0)
    ref = torch.rand(1 << 16, generator=g) + 0.5
    honest = ref * (1 + 1e-7 * torch.randn(ref.shape, generator=g))
    trial_err = float((honest - ref).norm() / ref.norm())
    rf, mr = C.timed_figures(ref, honest)
    f = C.error_figures(ref, honest)
    assert rf == pytest.approx(f["rel_frobenius"], rel=1e-6) and mr == pytest.approx(f["max_rel"], rel=1e-6)

    def judge(out, trial=trial_err):
        return C.check_timed_output(ref, out, "fp32", "t", trial)

    assert all(c.passed for c in judge(honest))
    assert all(c.passed for c in judge(honest, None))  # no trial figure: the tolerance only
    coarse = ref * (1 + 3e-5 * torch.randn(ref.shape, generator=g))  # within the 1e-4 tolerance
    assert [c.category for c in judge(coarse) if not c.passed] == ["timing_tamper"]
    bf16ish = ref * (1 + 4e-4 * torch.randn(ref.shape, generator=g))  # past it: a wrong output
    assert "replay" in [c.category for c in judge(bf16ish) if not c.passed]
    assert "replay" in [c.category for c in judge(ref.flip(0)) if not c.passed]  # another call's output
    nan = honest.clone()
    nan[7] = math.nan
    assert "replay" in [c.category for c in judge(nan) if not c.passed]
    ref_inf, out_inf = ref.clone(), honest.clone()  # non-finite where the reference is (as the trials allow)
    ref_inf[3] = out_inf[3] = -math.inf
    assert all(c.passed for c in C.check_timed_output(ref_inf, out_inf, "fp32", "t", trial_err))
    ints = torch.arange(100)
    assert all(c.passed for c in C.check_timed_output(ints, ints.clone(), "fp32", "t", None))
    assert not C.check_timed_output(ints, ints.flip(0), "fp32", "t", None)[0].passed


def test_trial_errors_are_the_default_domain_trials_largest_relative_error_per_output():
    from kbenv.rewards.verdict import trial_errors
    per_trial = [("default", [C.Check("rel_frobenius[0]", True, 2e-7), C.Check("rel_frobenius[1]", True, 1e-6),
                              C.Check("max_rel[0]", True, 5e-6)]),
                 ("default", [C.Check("rel_frobenius[0]", True, 3e-7), C.Check("exact[1]", True, 0.0)]),
                 ("normal", [C.Check("rel_frobenius[0]", True, 9e-5)])]
    assert trial_errors(per_trial) == {0: 3e-7, 1: 1e-6}
