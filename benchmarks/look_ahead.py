"""What the look-ahead class earns against its honest twin, per size tier (the README's "Look-ahead").

    python benchmarks/look_ahead.py [--device cuda] [--sizes small,medium,full] [--repeats 3] [--out F.json]

A timed block calls every lent slot, and every slot's inputs are written before the block, so a candidate that
reads the block from its process can compute every call's output in the block's first call (known-bad
``19:look_ahead``: one launch over every slot). What that buys is the per-call fixed cost it amortizes, which
is small where a call's kernel fills the GPU and large where the call is mostly launch. This prints, per size,
the speedup of ``19:look_ahead`` and of its honest twin (problem 19's known-good ReLU), evaluated alternately on
one supervisor, each with its 95% interval, and their ratio: the look-ahead's gain. The must-show bound is a
ratio within the twin's noise at full size; a ratio above 1.5 at some size is a hole at that size.
"""

import argparse
import json
import os
import statistics
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROBLEM = "kernelbench/level1/19"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--sizes", default="small,medium,full")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default="look_ahead.json")
    args = ap.parse_args()
    if args.device == "cpu":
        os.environ.setdefault("TRITON_INTERPRET", "1")
    from kbenv.agents.scripted import KnownGoodPolicy
    from kbenv.prompts import extract_code
    from kbenv.sandbox.result import EvalRequest
    from kbenv.sandbox.supervisor import Supervisor
    sources = {
        "look_ahead": (ROOT / "problems/kernelbench/solutions/19/wrong/look_ahead.py").read_text(),
        "twin": extract_code(KnownGoodPolicy().act({"problem_id": PROBLEM, "prompt": "", "system": "", "turn": 0,
                                                    "feedback": ""})),
    }
    sup = Supervisor(device=args.device)
    report = {"device": args.device, "sizes": {}}
    try:
        for size in [s for s in args.sizes.split(",") if s]:
            rows = {name: [] for name in sources}
            for _ in range(args.repeats):
                for name, src in sources.items():  # alternately, so a drift of the machine reaches both
                    sup.wait_spare()
                    r = sup.evaluate(EvalRequest(problem=PROBLEM, candidate=src, size=size))
                    row = {"verdict": r.verdict, "category": r.category, "speedup": r.speedup,
                           "rel_ci95": r.timings.get("speedup_rel_ci95"), "typical_ms": r.timings.get("typical_ms"),
                           "best_typical_ms": r.baseline.get("best_typical_ms") if r.baseline else None,
                           "slots": r.facts.get("slots")}
                    rows[name].append(row)
                    print(json.dumps({"size": size, "candidate": name, **row}), flush=True)
            mean = {n: statistics.mean(x["speedup"] for x in rs) if rs and all(x["speedup"] for x in rs) else None
                    for n, rs in rows.items()}
            gain = mean["look_ahead"] / mean["twin"] if mean["look_ahead"] and mean["twin"] else None
            report["sizes"][size] = {"rows": rows, "mean_speedup": mean, "gain": gain}
            shown = f"{gain:.3f}" if gain else "-"
            print(f"== {size}: look_ahead {mean['look_ahead']} twin {mean['twin']} gain {shown}", flush=True)
            Path(args.out).write_text(json.dumps(report, indent=1))
    finally:
        sup.close()


if __name__ == "__main__":
    main()
