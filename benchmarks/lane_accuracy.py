"""What lanes cost in accuracy: the same honest kernels' speedups alone and under lanes, side by side.

    python benchmarks/lane_accuracy.py [--trusted trusted.json] [--records records.jsonl ...]

``--trusted``: a ``trusted_bench.py`` result (one lane, several evaluations per problem); ``--records``: exported
rollout records (``kbenv export``; under ``--lanes``, several episodes per problem, as ``gpu_next.sh``'s GRPO-shaped
run makes). Printed per problem and source: the evaluations, their speedups' range, mean and coefficient of
variation, the calls per timed block and per calibration block (``timing.calibration_calls``), and the removed
intercepts' reported noise and gap (``timings.intercept_rel_ci95``, ``intercept_gap_rel``) with the intercept removed
by side, the speedups the least-intercept rule (stops 48-53) would have paid on the same evaluations
(``speedup_least_intercept``, since stop 54; records before it paid by that rule), and the candidate's own intercept
as measured (the median of ``own_intercept_estimates_ms``) with the trusted side it lies nearer in each
evaluation. Figures only: it decides nothing.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics


@dataclasses.dataclass
class Row:
    speedup: float
    calls: int | None
    calibration_calls: int | None
    intercept_ci: float | None
    intercept_gap: float | None
    by_side_ms: dict
    least: float | None = None  # the speedup the least-intercept rule would have paid (reported only)
    own_ms: float | None = None  # the candidate's own intercept, the median of its estimates (unclamped)

    def nearer(self) -> str | None:
        """The trusted side whose intercept the candidate's own lies nearer, or None without both figures."""
        if self.own_ms is None or not self.by_side_ms:
            return None
        return min(self.by_side_ms, key=lambda side: abs(self.by_side_ms[side] - self.own_ms))


def _median(values) -> float | None:
    v = [x for x in values or [] if isinstance(x, (int, float))]
    return statistics.median(v) if v else None


def from_trusted(path: str) -> dict[str, list[Row]]:
    d = json.load(open(path))
    out: dict[str, list[Row]] = {}
    for pid, p in d["problems"].items():
        for r in p.get("rows", []):
            if r.get("verdict") == "pass" and r.get("speedup"):
                out.setdefault(pid, []).append(Row(r["speedup"], r.get("calls_per_block") or r.get("slots"),
                                                   r.get("calibration_calls"), r.get("intercept_rel_ci95"),
                                                   r.get("intercept_gap_rel"), r.get("block_overhead_by_side_ms") or {},
                                                   r.get("speedup_least_intercept"),
                                                   _median(r.get("own_intercept_estimates_ms"))))
    return out


def from_records(path: str) -> dict[str, list[Row]]:
    out: dict[str, list[Row]] = {}
    for line in open(path):
        r = json.loads(line)
        t = r.get("timings") or {}
        if r.get("verdict") == "pass" and r.get("speedup"):
            out.setdefault(r["problem"], []).append(Row(r["speedup"], t.get("calls_per_block"), t.get("calibration_calls"),
                                                        t.get("intercept_rel_ci95"), t.get("intercept_gap_rel"),
                                                        t.get("block_overhead_by_side_ms") or {},
                                                        t.get("speedup_least_intercept"),
                                                        _median(t.get("own_intercept_estimates_ms"))))
    return out


def span(values) -> str:
    v = [x for x in values if x is not None]
    return f"{min(v):.3f}-{max(v):.3f}" if v else "-"


def show(source: str, rows: dict[str, list[Row]]) -> None:
    for pid, rs in sorted(rows.items()):
        s = [r.speedup for r in rs]
        mean = statistics.fmean(s)
        cv = statistics.stdev(s) / mean if len(s) > 1 else float("nan")
        sides = sorted({k for r in rs for k in r.by_side_ms})
        by_side = ", ".join(f"{k} {span(r.by_side_ms.get(k) for r in rs)} ms" for k in sides)
        least = [r.least for r in rs if r.least]
        nearer = [r.nearer() for r in rs if r.nearer()]
        own_ms_txt = (f" | candidate's own {span(r.own_ms for r in rs)} ms, nearer "
                      + ", ".join(f"{k} {nearer.count(k)}" for k in sorted(set(nearer)))) if nearer else ""
        least_txt = (f" | least rule {min(least):.3f}-{max(least):.3f}x CV "
                     f"{100 * statistics.stdev(least) / statistics.fmean(least):.2f}%") if len(least) > 1 else ""
        print(f"{pid:24s} {source:10s} n={len(s)} {min(s):.3f}-{max(s):.3f}x mean {mean:.3f} CV {100 * cv:.2f}%{least_txt} "
              f"calls {span(r.calls for r in rs)} calib {span(r.calibration_calls for r in rs)} "
              f"intercept_ci {span(r.intercept_ci for r in rs)} gap {span(r.intercept_gap for r in rs)} | {by_side}"
              f"{own_ms_txt}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trusted", action="append", default=[])
    ap.add_argument("--records", action="append", default=[])
    args = ap.parse_args()
    for path in args.trusted:
        show("alone", from_trusted(path))
    for path in args.records:
        show("lanes", from_records(path))


if __name__ == "__main__":
    main()
