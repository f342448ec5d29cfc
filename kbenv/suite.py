"""Replay the known-bad suite and the known-good kernels through the full path and tabulate the outcome.

The candidates live beside the problems (``problems/<set>/solutions/<n>/{correct,wrong}/*.py``; each wrong one
names its expected categories in a ``# expect:`` line). They are read through the scripted policies of
``kbenv.agents``, resolved by name at run time (kbenv does not import ``agents``).
"""

from __future__ import annotations

import importlib
import math
import time

from kbenv import step
from kbenv.prompts import extract_code
from kbenv.sandbox.result import EvalRequest


# A known-bad candidate allowed to pass on a GPU (an attack that gains nothing, or a sandbox probe that was blocked)
# is held there to its honest twin, the known-good kernel of its problem in the same run (issue 11): passing, it must
# be timed no faster than the twin beyond the noise of the two measurements, their 95% intervals combined and at
# least TWIN_NOISE_FLOOR (the H200's spread between evaluations of one kernel was 2.1-6.8% at stop 51, wider than
# one evaluation's interval). Not on the CPU: there every pass is paid as parity, and the interpreter's speedup of
# one kernel spread 0.112-0.159 over three evaluations (19's known-good, stop 52), so no twin's figure bounds another.
TWIN_NOISE_FLOOR = 0.05


def held_to_twin(case) -> bool:
    """Whether a known-bad case is held to its twin when it passes on a GPU: one allowed to pass there."""
    return "pass" in case.expected_on("cuda")


def twin_limit(twin_speedup: float, ci: float | None = None, twin_ci: float | None = None) -> float:
    """The most speedup a passing known-bad candidate may be timed at on a GPU, given its honest twin's (above)."""
    cis = [c for c in (ci, twin_ci) if c is not None and math.isfinite(c)]
    return twin_speedup * (1 + max(math.hypot(*cis) if len(cis) == 2 else 0.0, TWIN_NOISE_FLOOR))


def _hold_to_twins(rows: list, cases: list) -> None:
    """Mark a passing known-bad row (``rows[i]`` is ``cases[i]``'s) of a GPU run a mismatch where it is
    :func:`held_to_twin` and was timed faster than :func:`twin_limit` allows; every compared row names its twin's
    speedup."""
    twins = {r["candidate"].removesuffix(":correct"): r for r in rows
             if r["candidate"].endswith(":correct") and r["verdict"] == "pass" and r.get("speedup")}
    for row, case in zip(rows, cases):
        twin = twins.get(case.problem_id)
        if not held_to_twin(case) or twin is None or row["verdict"] != "pass" or not row.get("speedup"):
            continue
        row["twin_speedup"] = twin["speedup"]
        limit = twin_limit(twin["speedup"], row.get("speedup_rel_ci95"), twin.get("speedup_rel_ci95"))
        if row["speedup"] > limit:
            row["ok"] = False
            row["reason"] = (f"timed at {row['speedup']:.3f}x against its honest twin's {twin['speedup']:.3f}x "
                             f"(at most {limit:.3f}x): " + row["reason"])[:160]


def _agents(name: str):
    return getattr(importlib.import_module("kbenv.agents.scripted"), name)


def case_ok(case, result, device: str) -> bool:
    """Whether a known-bad case's result is a correct rejection on ``device``.

    A sandbox probe (``# expect-sandbox: pass``) answers correctly only if the forbidden action was blocked, so
    it must pass; a case whose expectations list ``pass`` for this device is documented as harmless there;
    every other case must fail with reward 0 in one of its expected categories.
    """
    if case.expect_sandbox is not None and "pass" in case.expect_sandbox:
        return result.verdict == "pass"
    expected = case.expected_on(device)
    if "pass" in expected and result.verdict == "pass":
        return True
    return result.verdict == "fail" and result.reward == 0.0 and result.category in expected


def suite_problem_ids(device: str, include_good: bool = True, problems: list[str] | None = None) -> list[str]:
    """The problems the suite evaluates on ``device`` (to check their memory plans before it starts)."""
    ids = {c.problem_id for c in _agents("known_bad_suite")() if device == "cuda" or not c.gpu_only}
    if include_good:
        ids |= set(_agents("KnownGoodPolicy")().problems())
    return sorted(ids & set(problems) if problems else ids)


def run_suite(pool, size: str, include_good: bool = True, on_row=None, only: list[str] | None = None,
              problems: list[str] | None = None, on_result=None, shard: tuple[int, int] | None = None) -> dict:
    """Evaluate every known-bad case (and the known-good kernels) on ``pool``; rows in suite order.

    ``on_row(row, done, total)``, if given, is called as each result arrives (so a run cut short by a time
    limit still leaves every finished row behind); ``on_result(index, row, result, source)`` too, with the whole
    :class:`EvalResult` and the candidate's source (to record it). ``only``: keep the candidates whose id
    (``problem:name``, ``problem:correct`` for the known-good ones) contains one of these strings (to finish or
    repeat part of a run). ``problems``: keep the candidates of these problem ids (exact ids). ``shard=(k, n)``:
    keep every n-th candidate from the k-th (1-based), so n runs (calls, machines) split the suite evenly.
    """
    device = step.device_type(pool)
    cases = [c for c in _agents("known_bad_suite")() if device == "cuda" or not c.gpu_only]
    good = _agents("KnownGoodPolicy")()
    goods = [(pid, extract_code(good.act({"problem_id": pid}))) for pid in good.problems()] if include_good else []
    if problems:
        wanted = set(problems)
        cases = [c for c in cases if c.problem_id in wanted]
        goods = [(pid, src) for pid, src in goods if pid in wanted]
    if only:
        cases = [c for c in cases if any(s in c.id for s in only)]
        goods = [(pid, src) for pid, src in goods if any(s in f"{pid}:correct" for s in only)]
    if shard is not None:
        k, n = shard
        goods = [g for j, g in enumerate(goods) if (len(cases) + j) % n == k - 1]
        cases = [c for j, c in enumerate(cases) if j % n == k - 1]
    if size == "largest":  # each problem at the largest size its memory plan admits (a capped or small GPU)
        fits = {pid: step.largest_size(pid, None, device) for pid in {c.problem_id for c in cases} | {p for p, _ in goods}}
        cases = [c for c in cases if fits[c.problem_id]]
        goods = [(pid, src) for pid, src in goods if fits[pid]]
        size_of = fits.__getitem__
    else:
        size_of = lambda pid: size  # noqa: E731
    reqs = [EvalRequest(problem=c.problem_id, candidate=c.source, size=size_of(c.problem_id), precision=c.precision)
            for c in cases]
    reqs += [EvalRequest(problem=pid, candidate=src, size=size_of(pid)) for pid, src in goods]
    t = time.perf_counter()
    rows: list = [None] * len(reqs)
    for n, (i, r) in enumerate(pool.map(reqs), start=1):
        if i < len(cases):
            c = cases[i]
            row = {"candidate": c.id, "expected": list(c.expected_on(device)), "verdict": r.verdict,
                   "category": r.category, "reward": r.reward, "speedup": r.speedup, "ok": case_ok(c, r, device),
                   "reason": r.reason[:160]}
        else:
            pid = goods[i - len(cases)][0]
            row = {"candidate": f"{pid}:correct", "expected": ["pass"], "verdict": r.verdict,
                   "category": r.category, "reward": r.reward, "speedup": r.speedup,
                   "ok": r.verdict == "pass", "reason": r.reason[:160]}
        row["seconds"] = round(r.phase_seconds.get("total", 0.0), 2)
        row["size"] = reqs[i].size
        if r.timings.get("speedup_rel_ci95") is not None:  # a row is read against its honest twin's noise
            row["speedup_rel_ci95"] = r.timings["speedup_rel_ci95"]
        if not row["ok"]:
            row["error"] = (r.error or "")[-1500:]  # the evidence for a mismatch, kept with the row
        rows[i] = row
        if on_result is not None:
            on_result(i, row, r, reqs[i].candidate)
        if on_row is not None:
            on_row(row, n, len(reqs))
    seconds = time.perf_counter() - t
    if device == "cuda":  # once every row is in: a problem's twin comes after its known-bad ones
        _hold_to_twins(rows, cases)
    return {"device": device, "size": size, "seconds": seconds, "rows": rows,
            "mismatches": sum(not r["ok"] for r in rows)}


def format_row(row: dict) -> str:
    got = row["category"] or row["verdict"]
    exp = "|".join(row["expected"])
    sp = f"x{row['speedup']:.3f}" if row.get("speedup") else "-"
    ci = row.get("speedup_rel_ci95")
    ci = f"±{100 * ci:.1f}%" if row.get("speedup") and ci is not None and math.isfinite(ci) else ""
    line = (f"{row['candidate']:52s} {exp[:34]:34s} {got:16s} {row['reward']:8.4g} {sp:>7s} {ci:>6s} "
            f"{row.get('size', ''):6s} {row.get('seconds', 0):5.1f}s "
            f"{'ok' if row['ok'] else 'MISMATCH: ' + row['reason']}")
    if not row["ok"] and row.get("error"):
        line += "\n    " + row["error"][-400:].replace("\n", "\n    ")
    return line


def format_suite(report: dict) -> str:
    lines = [f"{'candidate':52s} {'expected':34s} {'got':16s} {'reward':>8s}  ok"]
    for row in report["rows"]:
        lines.append(format_row(row))
    n = len(report["rows"])
    lines.append(f"\n{n} candidates on {report['device']} ({report['size']}) in {report['seconds']:.1f} s = "
                 f"{60 * n / max(report['seconds'], 1e-9):.1f} evaluations/min; {report['mismatches']} mismatches")
    return "\n".join(lines)
