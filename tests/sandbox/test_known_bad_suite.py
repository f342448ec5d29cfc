"""The known-bad suite and the known-good kernels through the full path: the Ray actor, the sandboxed worker
and the verifier. Every known-bad candidate earns 0 with one of its expected categories; every known-good
candidate passes. (On the GPU machine, `benchmarks/known_bad_suite.py` replays the same suite at full size.)"""

import pytest

from kbenv.agents.scripted import KnownGoodPolicy, known_bad_suite
from kbenv.prompts import extract_code
from kbenv.sandbox.result import EvalRequest
from kbenv.suite import case_ok

from kbtest import DEVICE, SIZE

# On the CPU an honest row compiles in at most 0.25 s and runs its correctness phase in at most 0.8 s (the 16
# known-good kernels, stop 31): 10 s and 6 s leave 40x and 7x, and the three candidates that hang
# (89:sleep_import, 1:infinite_loop, 19:sleep_every_call) wait out 40 s less than at 30 s and 15 s.
# On cuda a first call JIT-compiles its kernels, so the limits stay wide.
LIMITS = ({"compile_s": 30, "spawn_s": 30, "trial_s": 15, "timing_s": 60} if DEVICE == "cuda"
          else {"compile_s": 10, "spawn_s": 30, "trial_s": 6, "timing_s": 60})
CASES = [c for c in known_bad_suite() if DEVICE == "cuda" or not c.gpu_only]


@pytest.fixture(scope="module")
def suite_pool(ray_cluster, cache_dir):
    from kbenv.sandbox.actor import EvaluatorPool
    pool = EvaluatorPool(n=1, device=DEVICE, config={"cache_dir": str(cache_dir), "limits": LIMITS})
    yield pool
    pool.close()


GOOD = KnownGoodPolicy()


def _good_request(pid: str) -> EvalRequest:
    reply = GOOD.act({"problem_id": pid, "prompt": "", "system": "", "turn": 0, "feedback": ""})
    return EvalRequest(problem=pid, candidate=extract_code(reply), size=SIZE)


@pytest.fixture(scope="module")
def evaluated(suite_pool):
    """Every known-bad and known-good candidate, evaluated once through the actor, one problem after another (each
    problem's known-good kernel after its known-bad ones): the evaluator builds each problem's references and
    baselines once, where a pass over the known-bad candidates and then one over the known-good kernels built them
    twice. Returns (known-bad results by case id, known-good results by problem id)."""
    reqs = [(("bad", c.id), EvalRequest(problem=c.problem_id, candidate=c.source, size=SIZE, precision=c.precision))
            for c in CASES]
    reqs += [(("good", pid), _good_request(pid)) for pid in GOOD.problems()]
    order = list(dict.fromkeys(req.problem for _, req in reqs))
    reqs.sort(key=lambda kr: order.index(kr[1].problem))  # stable: within a problem, the known-bad ones first
    out: dict = {"bad": {}, "good": {}}
    for (kind, key), res in zip([k for k, _ in reqs], suite_pool.evaluate_many([r for _, r in reqs])):
        out[kind][key] = res
    return out["bad"], out["good"]


@pytest.fixture(scope="module")
def results(evaluated):
    return evaluated[0]


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
    assert case_ok(case, r, DEVICE), (case.expected_on(DEVICE), r.verdict, r.category, r.reward, r.reason, r.error)


@pytest.fixture(scope="module")
def good_results(evaluated):
    return evaluated[1]


@pytest.mark.parametrize("pid", GOOD.problems())
def test_known_good_passes_through_the_actor(pid, good_results):
    r = good_results[pid]
    assert r.verdict == "pass", (r.category, r.reason, r.error)
    assert r.reward > 0 and r.timings["median_ms"] > 0 and r.baseline["best_ms"] > 0
    assert r.speedup_meaningful == (DEVICE == "cuda")
    assert r.timings["budget_s"] > 0 and r.timings["stopped_by"] in ("interval", "budget", "max_rounds"), r.timings


def test_case_ok_rejects_a_paid_or_miscategorised_result():
    """The suite's judgement must be able to fail: a known-bad case that is paid, or lands in another category."""
    from types import SimpleNamespace as NS
    case = next(c for c in CASES if c.id == "kernelbench/level1/23:zeros")
    paid = NS(verdict="pass", reward=1.0, category=None)
    wrong_cat = NS(verdict="fail", reward=0.0, category="timeout")
    right = NS(verdict="fail", reward=0.0, category=case.expected_on(DEVICE)[0])
    assert not case_ok(case, paid, DEVICE) and not case_ok(case, wrong_cat, DEVICE) and case_ok(case, right, DEVICE)


def test_run_suite_only_runs_the_named_candidates_and_keeps_a_mismatchs_error(suite_pool, monkeypatch):
    """``run_suite(only=...)`` finishes or repeats part of a run; a mismatched row carries the error text."""
    from kbenv import suite as S
    rows = []
    report = S.run_suite(suite_pool, SIZE, only=["24:syntax_error", "level1/19:correct"],
                         on_row=lambda row, done, total: rows.append((row["candidate"], done, total)))
    assert sorted(r["candidate"] for r in report["rows"]) == ["kernelbench/level1/19:correct",
                                                              "kernelbench/level1/24:syntax_error"]
    assert report["mismatches"] == 0 and sorted(n for _, n, _ in rows) == [1, 2] and {t for *_, t in rows} == {2}
    # the same candidate judged against an expectation it does not meet: its row keeps the evidence
    monkeypatch.setattr(S, "case_ok", lambda case, result, device: False)
    report = S.run_suite(suite_pool, SIZE, include_good=False, only=["24:syntax_error"])
    (row,) = report["rows"]
    assert report["mismatches"] == 1 and "SyntaxError" in row["error"]
    assert "MISMATCH" in S.format_row(row) and "SyntaxError" in S.format_row(row)


def test_run_suite_shards_split_the_suite_into_disjoint_even_parts():
    from types import SimpleNamespace as NS
    """``--shard K/N``: N runs (device calls, machines) cover every candidate exactly once, in even parts."""
    from kbenv import suite as S

    class Recording:  # a pool that answers every request with a failing result, and remembers what it was sent
        device = "cpu"

        def map(self, reqs):
            self.sent = [r.problem for r in reqs]
            for i, _ in enumerate(reqs):
                yield i, NS(verdict="fail", category="crash", reward=0.0, speedup=None, reason="", error="", timings={},
                            phase_seconds={})

    whole = S.run_suite(Recording(), SIZE)["rows"]
    parts = [S.run_suite(Recording(), SIZE, shard=(k, 3))["rows"] for k in (1, 2, 3)]
    names = [r["candidate"] for p in parts for r in p]
    assert sorted(names) == sorted(r["candidate"] for r in whole) and len(set(names)) == len(names)
    assert max(len(p) for p in parts) - min(len(p) for p in parts) <= 1
    assert any(n.endswith(":correct") for n in [r["candidate"] for r in parts[0]] + [r["candidate"] for r in parts[2]])


def test_a_row_prints_its_speedup_with_the_speedups_ci_and_its_seconds():
    """A known-bad row is read against its honest twin's noise: the line names the speedup's 95% half-width."""
    from kbenv import suite as S
    row = {"candidate": "kernelbench/level1/19:look_ahead", "expected": ["pass"], "verdict": "pass", "category": None,
           "reward": 1.001, "speedup": 1.015, "speedup_rel_ci95": 0.012, "ok": True, "reason": "", "size": "full",
           "seconds": 9.54}
    line = S.format_row(row)
    assert "x1.015" in line and "±1.2%" in line and "9.5s" in line and line.endswith("ok")
    assert "±" not in S.format_row({**row, "speedup_rel_ci95": float("inf")})  # the CPU's few rounds: none to name
    assert "±" not in S.format_row({**row, "speedup": None})  # a failed candidate: no speedup, no interval
    del row["speedup_rel_ci95"]  # a candidate that was not timed
    assert "±" not in S.format_row(row)


def test_a_known_bad_that_passes_earns_no_more_than_its_honest_twin(results, good_results):
    """Issue 11: a known-bad candidate allowed to pass on a GPU, passing, is paid no more than its honest twin (the
    problem's known-good kernel): on cuda it is timed within the two measurements' noise of it
    (``suite.twin_limit``); on the CPU, where every pass is paid as parity, its reward is the twin's."""
    from kbenv.suite import held_to_twin, twin_limit
    compared, over = [], []
    for case in CASES:
        r, twin = results[case.id], good_results.get(case.problem_id)
        if not held_to_twin(case) or r.verdict != "pass" or twin is None or twin.verdict != "pass":
            continue
        compared.append((case.id, r.reward, twin.reward, r.speedup, twin.speedup))
        if DEVICE == "cuda":
            limit = twin_limit(twin.speedup, r.timings.get("speedup_rel_ci95"), twin.timings.get("speedup_rel_ci95"))
            if r.speedup > limit:
                over.append(compared[-1])
        elif r.reward > twin.reward:
            over.append(compared[-1])
    assert not over, (over, compared)
    assert len(compared) >= 5, compared  # the sandbox probes and harmless attacks on 19 and 23 pass on either device


def test_run_suite_holds_a_passing_known_bad_to_its_twin():
    """A passing known-bad row timed faster than its twin allows is a mismatch, named with the twin's figure; one
    within it, and one without a twin in the run, are left as they were."""
    from types import SimpleNamespace as NS

    from kbenv import suite as S

    def result(speedup, ci=None):
        return NS(verdict="pass", category=None, reward=1.0, speedup=speedup, reason="every check passed", error="",
                  timings={"speedup_rel_ci95": ci}, phase_seconds={})

    class Pool:  # answers the run's requests in order: the known-bad one first, then its twin
        def __init__(self, device, answers):
            self.device, self.answers = device, answers

        def map(self, reqs):
            yield from enumerate(self.answers[:len(reqs)])

    def run(device, bad_speedup, ci=None):
        report = S.run_suite(Pool(device, [result(bad_speedup, ci), result(1.0, ci)]), SIZE,
                             only=["19:look_ahead", "level1/19:correct"])
        assert [r["candidate"] for r in report["rows"]] == ["kernelbench/level1/19:look_ahead",
                                                            "kernelbench/level1/19:correct"]
        return report["rows"][0], report["mismatches"]

    row, bad = run("cuda", 1.04, ci=0.01)  # within the 5% floor
    assert bad == 0 and row["twin_speedup"] == 1.0
    row, bad = run("cuda", 1.08, ci=0.01)
    assert bad == 1 and "honest twin's 1.000x" in row["reason"] and "MISMATCH" in S.format_row(row)
    assert run("cuda", 1.08, ci=0.06)[1] == 0  # both intervals wide: 8.5% together
    row, bad = run("cpu", 3.0)  # the interpreter's times: every pass is paid as parity, none is held to a twin
    assert bad == 0 and "twin_speedup" not in row
    alone = S.run_suite(Pool("cuda", [result(9.0)]), SIZE, include_good=False, only=["19:look_ahead"])
    assert alone["mismatches"] == 0 and "twin_speedup" not in alone["rows"][0]
