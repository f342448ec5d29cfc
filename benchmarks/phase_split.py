"""Where a run's evaluation time went: per phase, summed over the records of ``kbenv export`` (issue 13's split).

    python benchmarks/phase_split.py RECORDS.jsonl

Prints, per phase of ``EvalResult.phase_seconds`` (references, worker_wait, compile, correctness, decoy, baseline_setup,
timing, finish), its total and mean seconds and its share of the evaluations' summed wall time; then three splits of the
facts, each summed over the records that have it: the baseline set-up's (``facts.baseline_setup``: waiting for the
processes, their builds and warm-ups, the fence calibration), the timing phase's set-up (``facts.timing_setup_s``:
the baselines started, the disposed processes reaped, the warm-up, another lane's timing waited for) and the
decoy's (``facts.decoy.split_s``: its executor, its build, its call and judging); with lanes, how often and how long
the evaluations gave the GPU way to another lane's timing phase (``facts.lanes``: ``gave_way``, ``gave_way_s``,
``given_up``, and ``alone (count)``, the results judged again alone), and where giving way's time went
(``facts.lanes.split_s``: the threads parking, the lane made quiet step by step, away for the other's timing).
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict


def summed(rows: list, *path: str) -> tuple[int, dict]:
    """How many records have the fact at ``path`` (a dict of numbers and flags), and its entries summed (a flag
    counts the records where it is true, as ``NAME (count)``)."""
    n, out = 0, defaultdict(float)
    for r in rows:
        d = r.get("facts") or {}
        for key in path:
            d = d.get(key) if isinstance(d, dict) else None
        if not isinstance(d, dict):
            continue
        n += 1
        for k, v in d.items():
            if isinstance(v, bool):
                out[k + " (count)"] += int(v)
            elif isinstance(v, (int, float)):
                out[k] += v
    return n, dict(out)


def main(path: str) -> None:
    rows = [json.loads(line) for line in open(path) if line.strip()]
    phases = defaultdict(float)
    total = 0.0
    for r in rows:
        ph = r.get("phase_seconds") or {}
        total += ph.get("total", 0.0)
        for k, v in ph.items():
            if k != "total":
                phases[k] += v
    print(f"{len(rows)} evaluations, {total:.1f} s of evaluation wall time in all")
    for k, v in sorted(phases.items(), key=lambda kv: -kv[1]):
        print(f"  {k:16s} {v:8.1f} s  mean {v / max(len(rows), 1):6.2f} s  {100 * v / total if total else 0:5.1f}%")
    rest = total - sum(phases.values())
    print(f"  {'(outside phases)':16s} {rest:8.1f} s  mean {rest / max(len(rows), 1):6.2f} s  "
          f"{100 * rest / total if total else 0:5.1f}%")
    for title, fact in (("baseline set-up", ("baseline_setup",)), ("timing set-up", ("timing_setup_s",)),
                        ("decoy", ("decoy", "split_s")), ("lanes", ("lanes",)),
                        ("giving way", ("lanes", "split_s")),
                        ("attempts given up, by where a thread that did not park was", ("lanes", "unparked")),
                        ("attempts given up, by what kept the lane from being quiet", ("lanes", "not_quiet"))):
        n, split = summed(rows, *fact)
        if n:
            unit = "counts" if fact[-1] in ("unparked", "not_quiet") else "seconds"
            print(f"{title} of the {n} evaluations that have it ({unit} summed):")
            for k, v in split.items():
                print(f"  {k:20s} {v:8.2f}")
    reaped = [x for r in rows for x in ((r.get("facts") or {}).get("reaped") or [])]
    for key, what in (("context_gone_s", "NVML listing none of their processes (contexts gone)"),
                      ("gone_s", "their processes gone (what a lane waits for before another times)")):
        v = sorted(x[key] for x in reaped if isinstance(x.get(key), (int, float)))
        if v:
            print(f"executors reaped ({len(v)} of {len(reaped)}), from the kill to {what}: median "
                  f"{v[len(v) // 2]:.2f} s, max {v[-1]:.2f} s, {sum(v):.1f} s in all")
    n, split = summed(rows, "settling")  # a ratio per side: its mean, not its sum
    if n:
        print(f"settling of the {n} timing phases that have it (a side's first four blocks over the rest, mean):")
        counts = defaultdict(int)
        for r in rows:
            for k in ((r.get("facts") or {}).get("settling") or {}):
                counts[k] += 1
        for k, v in split.items():
            print(f"  {k:20s} {v / max(counts[k], 1):8.4f}")


def busy_between_records(rows: list, samples: dict) -> str:
    """The GPU's busy fraction between the first and the last record (the window ``kbenv report``'s pace is over:
    back-to-back operation, without the run's start-up and its last evaluations draining), from NVML samples
    (``gpubusy.py --samples``)."""
    from gpubusy import busy_in
    times = sorted(r["time"] for r in rows if isinstance(r.get("time"), (int, float)))
    if len(times) < 2:
        return "gpubusy between the first and the last record: fewer than two records with a time"
    busy, covered = busy_in(samples, int(times[0] * 1e6), int(times[-1] * 1e6))
    span = times[-1] - times[0]
    return (f"gpubusy between the first and the last record: {busy:.1f} s busy of {span:.1f} s "
            f"({100 * busy / span:.1f}%; samples cover {covered:.1f} s)")


if __name__ == "__main__":
    import argparse
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("records")
    ap.add_argument("--busy", help="NVML samples of the run (gpubusy.py --samples): the GPU's busy fraction between "
                                   "the first and the last record")
    args = ap.parse_args()
    main(args.records)
    if args.busy:
        from gpubusy import load_samples
        print(busy_between_records([json.loads(line) for line in open(args.records) if line.strip()],
                                   load_samples(args.busy)))
