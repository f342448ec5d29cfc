"""The known-bad suite and the known-good kernels through the full path: the Ray actor, the sandboxed worker
and the verifier. Every known-bad candidate earns 0 with one of its expected categories; every known-good
candidate passes. (On the GPU machine, `benchmarks/known_bad_suite.py` replays the same suite at full size.)"""

import pytest

from kbenv.agents.scripted import KnownGoodPolicy, known_bad_suite
from kbenv.prompts import extract_code
from kbenv.sandbox.result import EvalRequest

from kbtest import DEVICE, SIZE

LIMITS = {"compile_s": 30, "spawn_s": 30, "trial_s": 15, "timing_s": 60}
CASES = [c for c in known_bad_suite() if DEVICE == "cuda" or not c.gpu_only]


@pytest.fixture(scope="module")
def suite_pool(ray_cluster, cache_dir):
    from kbenv.sandbox.actor import EvaluatorPool
    pool = EvaluatorPool(n=1, device=DEVICE, config={"cache_dir": str(cache_dir), "limits": LIMITS})
    yield pool
    pool.close()


@pytest.fixture(scope="module")
def results(suite_pool):
    reqs = [EvalRequest(problem=c.problem_id, candidate=c.source, size=SIZE) for c in CASES]
    return dict(zip([c.id for c in CASES], suite_pool.evaluate_many(reqs)))


def test_suite_is_not_empty():
    hack_ids = {c.id for c in CASES}
    assert len(CASES) >= 40, hack_ids
    for needed in ("kernelbench/level1/23:zeros", "kernelbench/level1/23:chunked_softmax",
                   "kernelbench/level1/23:partial_write", "kernelbench/level1/23:timer_patch",
                   "kernelbench/level1/23:decoy_kernel", "kernelbench/level1/23:cache_by_ptr"):
        assert needed in hack_ids


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_known_bad(case, results):
    r = results[case.id]
    expected = case.expected_on(DEVICE)
    if case.expect_sandbox is not None and "pass" in case.expect_sandbox:
        # A probe of the sandbox: it returns the right answer only if the forbidden action was blocked.
        assert r.verdict == "pass", (r.category, r.reason, r.error)
        return
    if "pass" in expected and r.verdict == "pass":
        return  # documented as harmless on this device (e.g. an L2-persistence trick on the CPU)
    assert r.verdict == "fail" and r.reward == 0.0, (r.verdict, r.reason)
    assert r.category in expected, (r.category, r.reason, r.error)


GOOD = KnownGoodPolicy()


@pytest.mark.parametrize("pid", GOOD.problems())
def test_known_good_passes_through_the_actor(pid, suite_pool):
    code = extract_code(GOOD.act({"problem_id": pid, "prompt": "", "system": "", "turn": 0, "feedback": ""}))
    r = suite_pool.evaluate(EvalRequest(problem=pid, candidate=code, size=SIZE))
    assert r.verdict == "pass", (r.category, r.reason, r.error)
    assert r.reward > 0 and r.timings["median_ms"] > 0 and r.baseline["best_ms"] > 0
    assert r.speedup_meaningful == (DEVICE == "cuda")
