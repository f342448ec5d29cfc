"""The paper's projection (Table 3 "Realistic", Table 4): what a run's kernels would buy a real workload.

With addressable fraction ``a`` of the workload's wall clock, a verified win rate ``w`` over the problem set
and a median verified speedup ``sigma`` among the wins, the share of time the kernels take over is
``s = a * w`` and Eq. 1 gives the end-to-end gain ``G = 1 / ((1 - s) + s / sigma)``. The paper's "Realistic"
column is the wall-clock time saved, ``1 - 1/G = a * w * (1 - 1/sigma)``: with DLRM-Bench's measured
w = 41.7% and sigma = 1.552 on DLRM inference (a = 58.2%) that is 8.63%.
"""

from __future__ import annotations

import statistics

from kbenv.records import read_records
from kbenv.report import final_results
from kbenv.rewards.profiler import load_profile


def project(addressable: float, win_rate: float, median_speedup: float) -> dict:
    s = addressable * win_rate
    gain = 1.0 / ((1.0 - s) + s / median_speedup) if median_speedup > 0 else float("nan")
    return {"addressable_fraction": addressable, "win_rate": win_rate, "median_speedup": median_speedup,
            "share_taken": s, "end_to_end_gain": gain, "time_saved": 1.0 - 1.0 / gain}


def project_run(run_dir, profile: str) -> dict:
    prof = load_profile(profile)
    finals = final_results(read_records(run_dir))
    by_problem: dict[str, list] = {}
    for (pid, _ep, _s), r in finals.items():
        by_problem.setdefault(pid, []).append(r)
    wins = []
    for pid, rs in by_problem.items():
        best = max((r.get("speedup") or 0.0) for r in rs if r.get("verdict") == "pass") if any(
            r.get("verdict") == "pass" for r in rs) else 0.0
        if best > 1.0:
            wins.append(best)
    n = len(by_problem)
    w = len(wins) / n if n else 0.0
    med = statistics.median(wins) if wins else 1.0
    meaningful = all(r.get("speedup_meaningful") for r in finals.values()) if finals else False
    out = project(prof["addressable_fraction"], w, med)
    out.update({"profile": prof["name"], "problems": n, "wins": len(wins), "gpu_figures": meaningful})
    return out
