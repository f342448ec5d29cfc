"""The generated statistical attack over the registry, at the verifier level (no sandbox, CPU sizes).

For every problem whose manifest names reduced axes, the reference is wrapped so that it skips 1/16 of the
reduced elements (contiguous and strided) and extrapolates (``copy``: kept neighbours stand in; ``rescale``:
dropped and scaled up), and the verifier's correctness checks must reject it on the problem's own domains, at
fp32 and at bf16 (inputs rounded by torch, reference in fp32 rounded once, as the sandbox computes it).
"""

import pytest
import torch

from kbenv.problems import get_problem, list_problems, make_inputs, make_model, problem_seed
from kbenv.rewards import subset_attack as SA
from kbenv.rewards.verdict import Trial, correctness_checks

APPLICABLE = SA.applicable()
IDS = [p.id for p in APPLICABLE]

# A statistic of the whole tensor (a mean loss, a Frobenius norm) is one number: one structured trial catches a
# partial read only when the skipped part's mass differs from its stand-in's by more than the tolerance, which
# the structured and sparse domains make likely but not certain (measured at bf16 over 30 secret seeds:
# 83-100% of evaluations reject every variant). These are held to a rate, not to every seed.
GLOBAL_STATISTIC = {f"kernelbench/level1/{n}" for n in (37, 94, 95, 96, 98, 99, 100)}
# Known exceptions, each with its reason (the closing note of issue 14 lists them).
EXCEPTIONS = {
    "kernelbench/level1/90": "cumprod of U[0, 1) draws underflows to 0 within ~90 elements, so a skipped block "
                             "past that point changes only subnormal outputs; no structured domain (products of "
                             "structured values overflow)",
}


def test_the_registry_names_the_reduced_axes_of_every_reducing_family():
    reducing = ("softmax", "normalization", "pooling", "reduction", "scan", "loss", "embedding")
    missing = [p.id for p in list_problems() if p.family in reducing and not p.reduced]
    # dlrm/4: its 26 tables are parameters (no input to give structure to) and its lookups are split into
    # per-table column blocks, so a neighbour from another block is an index into another table.
    assert missing == ["dlrm/4"]
    assert len(APPLICABLE) == 40


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
@pytest.mark.parametrize("problem", [p for p in APPLICABLE if p.id not in GLOBAL_STATISTIC], ids=lambda p: p.id)
def test_every_variant_of_the_attack_is_rejected(problem, precision):
    results = [r for r in SA.judge_attack(problem, precision) if r.reads_skipped]
    assert results, "no variant reads the skipped elements"
    passed = [r.variant for r in results if not r.rejected]
    if problem.id in EXCEPTIONS:
        assert passed, f"{problem.id} is listed as an exception but every variant is rejected now: drop it"
        return
    assert not passed, f"{problem.id} at {precision}: the verifier accepted {passed}"


@pytest.mark.parametrize("problem", [p for p in APPLICABLE if p.id in GLOBAL_STATISTIC], ids=lambda p: p.id)
def test_a_whole_tensor_statistic_rejects_the_attack_in_most_evaluations(problem):
    seeds = 12
    for precision in ("fp32", "bf16"):
        rejected: dict[str, int] = {}
        for k in range(seeds):
            for r in SA.judge_attack(problem, precision, seed_salt=f"rate{k}"):
                rejected[r.variant] = rejected.get(r.variant, 0) + r.rejected
        worst = min(rejected.values())
        assert worst >= (seeds if precision == "fp32" else 9), (precision, rejected)


def test_without_the_structured_domains_the_attack_passes_for_many_problems():
    """The attack is strong: on the official i.i.d. inputs alone, at bf16, the verifier accepts it for many
    problems (the issue's finding); the structured domains and per-slice errors are what reject it."""
    fooled = [p.id for p in APPLICABLE
              if any(not r.rejected for r in SA.judge_attack(p, "bf16", domains=["default"]) if r.reads_skipped)]
    assert len(fooled) >= 10, fooled


@pytest.mark.parametrize("problem", APPLICABLE, ids=lambda p: p.id)
def test_an_honest_reference_in_float64_passes_every_domain(problem):
    """The other side: an exact computation (float64, rounded to the precision) passes on every domain the
    manifest lists, structured ones included, with the per-slice check on."""
    ns = problem.namespace("small")
    m32 = make_model(ns, "Model", 42, "cpu", torch.float32)
    m64 = make_model(ns, "Model", 42, "cpu", torch.float64)
    for precision, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
        for i, domain in enumerate(problem.domains):
            inputs = make_inputs(ns, problem_seed(problem.id, f"honest:{domain}"), domain, "cpu", dtype,
                                 problem.broad_inputs)
            with torch.no_grad():
                ref = SA._as_list(m32(*[x.float() if x.is_floating_point() else x for x in inputs]))
                exact = SA._as_list(m64(*[x.double() if x.is_floating_point() else x for x in inputs]))
            ref = [r.to(dtype) if r.is_floating_point() else r for r in ref]
            exact = [e.to(dtype) if e.is_floating_point() else e for e in exact]
            trial = Trial(domain, inputs, ref, exact, None, [{"type": "torch.Tensor"}] * len(ref), 0xFE, 0x7F)
            failed = [c for c in correctness_checks(trial, precision, problem.invariants, problem.tolerance, seed=i)
                      if not c.passed]
            assert not failed, (precision, domain, [(c.name, c.value, c.threshold) for c in failed])


def test_positions_skip_one_sixteenth_and_name_kept_stand_ins():
    skip, src = SA.positions(256, "strided")
    assert len(skip) == 16 and not set(skip.tolist()) & set(src.tolist())
    skip, src = SA.positions(256, "contiguous")
    assert skip.tolist() == list(range(85, 101)) and src.tolist() == list(range(101, 117))
    assert SA.positions(1, "strided") is None and SA.positions(1, "contiguous") is None


@pytest.mark.parametrize("pid,sizes", [
    ("kernelbench/level1/40", {"batch_size": 4, "features": 16, "dim1": 64, "dim2": 64}),
    ("kernelbench/level1/39", {"batch_size": 256, "dim": 8192}),
    ("kernelbench/level1/94", {"batch_size": 512, "dim": 4096}),
])
def test_at_a_larger_size_the_iid_domains_are_fooled_and_the_structured_ones_are_not(pid, sizes):
    """At CI sizes a skipped 1/16 is a large share of few elements, so even i.i.d. inputs often expose it; at
    larger sizes the estimate sharpens (the issue's H200 finding: a layer norm and a mean loss passed). The
    structured domains are built to be size-free: heavy indices scale with the axis, spikes per fiber are fixed."""
    import dataclasses

    from kbenv.problems import STRUCTURED_DOMAINS, get_problem

    p = dataclasses.replace(get_problem(pid), small=sizes)
    iid = [d for d in p.domains if d not in STRUCTURED_DOMAINS]
    fooled = [r.variant for r in SA.judge_attack(p, "bf16", domains=iid) if r.reads_skipped and not r.rejected]
    assert fooled, "the i.i.d. domains caught the attack at this size: the comparison shows nothing"
    passed = [r.variant for r in SA.judge_attack(p, "bf16") if r.reads_skipped and not r.rejected]
    assert not passed, passed


@pytest.mark.parametrize("pid", ["kernelbench/level1/94", "kernelbench/level1/99"])
def test_the_attack_is_rejected_often_enough_to_earn_less_than_an_honest_kernel(pid):
    """Skipping 1/16 of the reads makes a kernel at most 16/15 faster, so an attack rejected on more than 1/16 of
    evaluations earns less in expectation than the honest kernel. 94 and 99 are the problems where single bf16
    draws let a variant through (the H200 run): over independent draws, each variant is rejected far more often."""
    rates = SA.rejection_rate(get_problem(pid), "bf16", draws=8)
    assert rates and all(r > 0.5 for r in rates.values()), rates
