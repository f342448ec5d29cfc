"""Where a run's evaluation time went: per phase, summed over the records of ``kbenv export`` (issue 13's split).

    python benchmarks/phase_split.py RECORDS.jsonl

Prints, per phase of ``EvalResult.phase_seconds`` (worker_wait, compile, correctness, decoy, baseline_setup,
timing), its total and mean seconds and its share of the evaluations' summed wall time, then the baseline set-up's
own split (``facts.baseline_setup``: waiting for the processes, their builds and warm-ups, the fence calibration).
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict


def main(path: str) -> None:
    rows = [json.loads(line) for line in open(path) if line.strip()]
    phases, setup = defaultdict(float), defaultdict(float)
    total, n_setup = 0.0, 0
    for r in rows:
        ph = r.get("phase_seconds") or {}
        total += ph.get("total", 0.0)
        for k, v in ph.items():
            if k != "total":
                phases[k] += v
        bs = (r.get("facts") or {}).get("baseline_setup")
        if bs:
            n_setup += 1
            for k, v in bs.items():
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    setup[k] += v
                elif isinstance(v, bool):
                    setup[k + " (count)"] += int(v)
    print(f"{len(rows)} evaluations, {total:.1f} s of evaluation wall time in all")
    for k, v in sorted(phases.items(), key=lambda kv: -kv[1]):
        print(f"  {k:16s} {v:8.1f} s  mean {v / max(len(rows), 1):6.2f} s  {100 * v / total if total else 0:5.1f}%")
    rest = total - sum(phases.values())
    print(f"  {'(outside phases)':16s} {rest:8.1f} s  mean {rest / max(len(rows), 1):6.2f} s  "
          f"{100 * rest / total if total else 0:5.1f}%")
    if n_setup:
        print(f"baseline set-up of the {n_setup} timed evaluations (seconds summed):")
        for k, v in setup.items():
            print(f"  {k:20s} {v:8.2f}")


if __name__ == "__main__":
    main(sys.argv[1])
