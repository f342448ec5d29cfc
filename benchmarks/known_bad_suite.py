"""Replay the known-bad suite and the known-good kernels through the full path (Ray actor, sandboxed worker,
verifier) and print each candidate's category and reward.

    python benchmarks/known_bad_suite.py [--device cpu|cuda] [--size small|full] [--json OUT]

Exit status 1 if any known-bad candidate earns a reward above 0 or lands outside its expected categories, or
any known-good candidate is rejected.
"""

import argparse
import json
import os
import sys
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="auto")
    ap.add_argument("--size", default="auto")
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    import torch
    device = ("cuda" if torch.cuda.is_available() else "cpu") if args.device == "auto" else args.device
    if device == "cpu":
        os.environ.setdefault("TRITON_INTERPRET", "1")
    size = ("full" if device == "cuda" else "small") if args.size == "auto" else args.size
    from kbenv.agents.scripted import KnownGoodPolicy, known_bad_suite
    from kbenv.prompts import extract_code
    from kbenv.sandbox.actor import EvaluatorPool
    from kbenv.sandbox.result import EvalRequest

    cases = [c for c in known_bad_suite() if device == "cuda" or not c.gpu_only]
    good = KnownGoodPolicy()
    goods = [(pid, extract_code(good.act({"problem_id": pid, "prompt": "", "system": "", "turn": 0, "feedback": ""})))
             for pid in good.problems()]
    pool = EvaluatorPool(device=device)
    reqs = [EvalRequest(problem=c.problem_id, candidate=c.source, size=size) for c in cases]
    reqs += [EvalRequest(problem=pid, candidate=src, size=size) for pid, src in goods]
    t = time.perf_counter()
    results = pool.evaluate_many(reqs)
    dt = time.perf_counter() - t
    rows, bad = [], 0
    for c, r in zip(cases, results):
        expected = c.expected_on(device)
        ok = r.reward == 0.0 and r.verdict == "fail" and (r.category in expected or "pass" in expected and False)
        if "pass" in expected:  # sandbox probes: blocked means a correct answer
            ok = r.verdict == "pass"
        bad += not ok
        rows.append({"candidate": c.id, "expected": list(expected), "verdict": r.verdict, "category": r.category,
                     "reward": r.reward, "ok": ok, "reason": r.reason[:160]})
    for (pid, _), r in zip(goods, results[len(cases):]):
        ok = r.verdict == "pass"
        bad += not ok
        rows.append({"candidate": f"{pid}:correct", "expected": ["pass"], "verdict": r.verdict,
                     "category": r.category, "reward": r.reward, "speedup": r.speedup, "ok": ok,
                     "reason": r.reason[:160]})
    print(f"{'candidate':52s} {'expected':28s} {'got':16s} {'reward':>8s}  ok")
    for row in rows:
        got = row["category"] or row["verdict"]
        print(f"{row['candidate']:52s} {'|'.join(row['expected']):28s} {got:16s} {row['reward']:8.4g}  "
              f"{'ok' if row['ok'] else 'MISMATCH: ' + row['reason']}")
    print(f"\n{len(rows)} candidates on {device} ({size}) in {dt:.1f} s = {60 * len(rows) / dt:.1f} evaluations/min; "
          f"{bad} mismatches")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": device, "size": size, "seconds": dt, "rows": rows}, f, indent=1)
    pool.close()
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
