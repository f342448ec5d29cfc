"""Repeatability and cost of the trusted measurement path (issue 11's figures), on one device.

    python benchmarks/trusted_bench.py [--device cuda] [--size full] [--repeats 5] [--problems ...] [--out F.json]
                                       [--baselines default|fresh|kept] [--beside-lane] [--timing-budget S]

For each problem (default: kernelbench 23, 88, 40 and dlrm 2) its known-good kernel is evaluated ``--repeats``
times with a clean executor ready (the first evaluation, which builds the reference and the baseline processes,
is reported apart). Printed per evaluation: verdict, paired speedup and its relative 95% CI, the candidate's
median per-call time, rounds, wall time, phases and the GPU's busy time (NVML samples) during it; per problem:
the speedups' mean and coefficient of variation. The fixed cost of one call through the path (send, a tiny
kernel, fenced) is measured as the per-call time of problem 19's known-good ReLU at the small size.

``--size largest`` takes each problem's largest size that fits (with ``--beside-lane``, half the device).
``--beside-lane`` measures the same under load (issue 13: the repeatability must hold back to back): the bench's
supervisor is one of two lanes on the device (``kbenv.sandbox.lanes``), and a second process, the other lane,
evaluates known-good kernels back to back (``--load-problems``, at the largest size its share fits) until the bench
ends. Each row then says whether its result was judged alone, and how long its timing phase waited for the other.
``--calibrate-every N`` estimates the block intercept every N rounds (4: the rule before stop 53), for an A/B on
one host. ``--timing-budget S`` times each evaluation for at most S seconds (``kbenv rollout --timing-budget``): the CV and
wall time at a shorter budget than the default 3 s, the throughput/noise trade an RL user makes.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--size", default="full")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--problems", default="kernelbench/level1/23,kernelbench/level1/88,kernelbench/level1/40,dlrm/2")
    ap.add_argument("--out", default="trusted_bench.json")
    ap.add_argument("--no-calibration", action="store_true", help="skip the per-call cost measurement")
    ap.add_argument("--baselines", choices=["default", "fresh", "kept"], default="default",
                    help="baseline processes: new for every evaluation (fresh), kept while the problem stays "
                         "current (kept), or the supervisor's default for the device")
    ap.add_argument("--beside-lane", action="store_true",
                    help="one of two lanes on the device, the other evaluating --load-problems back to back")
    ap.add_argument("--load-problems", default="kernelbench/level1/88,kernelbench/level1/40,dlrm/1,kernelbench/level1/19",
                    help="what the other lane evaluates, in a loop (its known-good kernels)")
    ap.add_argument("--timing-budget", type=float, default=0.0,
                    help="seconds of paired timing per evaluation (default: the device's own, 3 s on cuda)")
    ap.add_argument("--calibrate-every", type=int, default=0,
                    help="rounds between the block intercept's estimates where they reuse the round's blocks "
                         "(TimingPlan.calibrate_every: 1 since stop 53, 4 before; 0: the default)")
    ap.add_argument("--lend-share", type=int, default=0,
                    help="lend each executor 1/N of the device budget (KBENV_LEND_SHARE; default the plan's 8, 32 until stop 41): "
                         "more slots, so more calls per timed block")
    ap.add_argument("--lane-key", default=None, help=argparse.SUPPRESS)  # the other lane's: the bench's device
    ap.add_argument("--load-until", default=None, help=argparse.SUPPRESS)  # the other lane runs until this file exists
    args = ap.parse_args()
    if args.device == "cpu":
        os.environ.setdefault("TRITON_INTERPRET", "1")
    if args.lend_share:  # before any plan is made (the other lane's process inherits it)
        os.environ["KBENV_LEND_SHARE"] = str(args.lend_share)
    if args.load_until:
        return load_lane(args)
    from kbenv.agents.scripted import KnownGoodPolicy
    from kbenv.config import timing_overrides
    from kbenv.prompts import extract_code
    from kbenv.sandbox.result import EvalRequest
    from kbenv.sandbox.supervisor import Supervisor
    timing = timing_overrides(args.timing_budget) or None
    if args.calibrate_every:
        timing = {**(timing or {}), "calibrate_every": args.calibrate_every}
    try:
        from gpubusy import GpuBusy
        busy = GpuBusy.open(0) if args.device == "cuda" else None
    except Exception:  # noqa: BLE001 - NVML is optional for this benchmark
        busy = None
    good = KnownGoodPolicy()
    fresh = {"default": None, "fresh": True, "kept": False}[args.baselines]
    load = None
    if args.beside_lane:
        sup = Supervisor(device=args.device, fresh_baselines=fresh, lanes=2, lane_key=args.lane_key,
                         timing=timing)
        stop = Path(sup.root) / "load-until"
        load = subprocess.Popen([sys.executable, __file__, "--device", args.device, "--size", args.size,
                                 "--load-problems", args.load_problems, "--lane-key", sup.lanes.key,
                                 "--load-until", str(stop)])
    else:
        sup = Supervisor(device=args.device, fresh_baselines=fresh, timing=timing)
    sup.gpu_state_facts = True  # what shared the GPU while timed, in each row (kbenv.sandbox.gpustate)
    report = {"device": args.device, "size": args.size, "baselines": args.baselines, "timing": timing,
              "lend_share": args.lend_share or None, "problems": {}}

    def code(pid):
        return extract_code(good.act({"problem_id": pid, "prompt": "", "system": "", "turn": 0, "feedback": ""}))

    def one(pid, size):
        if size == "largest":  # the largest size this supervisor's share of the device fits (lanes: half of it)
            from kbenv.step import largest_size
            size = largest_size(pid, None, args.device) or "small"
        sup.wait_spare()
        t0_us = busy.now_us() if busy else 0
        t = time.perf_counter()
        r = sup.evaluate(EvalRequest(problem=pid, candidate=code(pid), size=size))
        wall = time.perf_counter() - t
        row = {"size": size, "verdict": r.verdict, "category": r.category, "reason": r.reason[:200],
               "speedup": r.speedup,
               "rel_ci95": r.timings.get("speedup_rel_ci95"), "median_ms": r.timings.get("median_ms"),
               "rounds": r.timings.get("rounds"), "stopped_by": r.timings.get("stopped_by"),
               "slots": r.facts.get("slots"), "baseline": r.baseline,
               "fence_overhead_ms": r.timings.get("fence_overhead_ms"),
               # the candidate's (BlockCalibration.candidate_s)
               "block_overhead_ms": r.timings.get("block_overhead_ms"),
               "block_overhead_rule": r.timings.get("block_overhead_rule"),
               "block_overhead_by_side_ms": r.timings.get("block_overhead_by_side_ms"),
               "block_overhead_estimates_ms": r.timings.get("block_overhead_estimates_ms"),
               "intercept_rel_ci95": r.timings.get("intercept_rel_ci95"),
               "intercept_gap_rel": r.timings.get("intercept_gap_rel"),
               "calls_per_block": r.timings.get("calls_per_block"),
               "calibration_calls": r.timings.get("calibration_calls"),
               "own_intercept_estimates_ms": r.timings.get("own_intercept_estimates_ms"),
               "speedup_least_intercept": r.timings.get("speedup_least_intercept"),
               "baseline_per_call_ms": r.timings.get("baseline_per_call_ms"),
               "wall_s": round(wall, 3), "phases": r.phase_seconds, "fence": r.facts.get("fence"),
               "baseline_setup": r.facts.get("baseline_setup"), "timing_setup_s": r.facts.get("timing_setup_s"),
               "cpus": r.facts.get("cpus"), "gpu_state": r.facts.get("gpu_state"),
               "per_call_ms": r.timings.get("per_call_ms"), "round_split_s": r.facts.get("round_split_s"),
               "settling": r.facts.get("settling"),
               "sm_mhz_after_block": r.facts.get("sm_mhz_after_block"), "decoy": r.facts.get("decoy"),
               "baselines_pruned": r.facts.get("baselines_pruned"),
               "baselines_restored": r.facts.get("baselines_restored"), "sandbox": r.facts.get("sandbox"),
               "lanes": r.facts.get("lanes"), "correctness_split_s": r.facts.get("correctness_split_s"),
               "error": (r.error or "")[-800:] if r.verdict != "pass" else None}
        if busy:
            busy.poll()
            b, _ = busy.busy_seconds(t0_us, busy.now_us())
            row["gpu_busy_s"] = round(b, 3)
            row["gpu_busy_fraction"] = round(b / wall, 3) if wall else None
        print(json.dumps({"problem": pid, **row}), flush=True)
        return row

    if not args.no_calibration:
        cal = one("kernelbench/level1/19", "small")
        report["call_cost_ms"] = cal["median_ms"]
        print(f"per-call cost through the path (tiny ReLU, fenced block): {cal['median_ms']} ms", flush=True)
    for pid in [p for p in args.problems.split(",") if p]:
        first = one(pid, args.size)
        rows = [one(pid, args.size) for _ in range(args.repeats)]
        sp = [r["speedup"] for r in rows if r["speedup"]]
        summary = {"first": first, "rows": rows}
        if len(sp) > 1:
            m = statistics.mean(sp)
            summary.update(mean_speedup=m, cv=statistics.stdev(sp) / m, min=min(sp), max=max(sp),
                           median_wall_s=statistics.median(r["wall_s"] for r in rows))
            print(f"== {pid}: speedup mean {m:.4f} CV {100 * summary['cv']:.2f}% range {min(sp):.4f}-{max(sp):.4f}; "
                  f"wall median {summary['median_wall_s']:.2f} s", flush=True)
            sides = {"candidate": [r["median_ms"] for r in rows]}  # per call, the block's fixed cost removed
            for key in ("eager_ms", "compile_ms"):
                sides[key[:-3]] = [r["baseline"].get(key) for r in rows if r["baseline"] and r["baseline"].get(key)]
            summary["side_median_ms"] = {k: statistics.median(v) for k, v in sides.items() if v}
            summary["slots"] = rows[0]["slots"]
            print(f"   slots {summary['slots']}; per call (median of medians): " + ", ".join(
                f"{k} {v:.4f} ms" for k, v in summary["side_median_ms"].items()) + "; block overhead removed "
                  + ", ".join(str(r["block_overhead_ms"]) for r in rows) + " ms", flush=True)
            # each evaluation's rounds, why they ended, and how its first blocks compared with the rest (stop 47: the
            # outliers were phases ended after 12 unsettled rounds)
            print("   rows: " + "; ".join(
                f"{r['speedup']:.4f}x {r['rounds']} rounds ({r['stopped_by']}) settling "
                + ",".join(f"{k[:4]} {v:.3f}" for k, v in (r.get("settling") or {}).items())
                + " intercepts " + ",".join(f"{k[:4]} {v}" for k, v in (r.get("block_overhead_by_side_ms") or {}).items())
                for r in rows if r["speedup"]), flush=True)
        report["problems"][pid] = summary
        Path(args.out).write_text(json.dumps(report, indent=1))
    if load is not None:
        stop.touch()
        report["load_lane_exit"] = load.wait(timeout=600)
        Path(args.out).write_text(json.dumps(report, indent=1))
    sup.close()


def load_lane(args) -> None:
    """The other lane: known-good kernels evaluated back to back, each at the largest size the lane's share of the
    device fits, until ``--load-until`` exists. One line per evaluation."""
    from kbenv.agents.scripted import KnownGoodPolicy
    from kbenv.prompts import extract_code
    from kbenv.sandbox.result import EvalRequest
    from kbenv.sandbox.supervisor import Supervisor
    from kbenv.step import largest_size
    good = KnownGoodPolicy()
    sup = Supervisor(device=args.device, lanes=2, lane_key=args.lane_key)
    until = Path(args.load_until)
    pids = [p for p in args.load_problems.split(",") if p]
    n = 0
    try:
        while not until.exists():
            pid = pids[n % len(pids)]
            size = (largest_size(pid, None, args.device) or "small") if args.size == "largest" else args.size
            src = extract_code(good.act({"problem_id": pid, "prompt": "", "system": "", "turn": 0, "feedback": ""}))
            r = sup.evaluate(EvalRequest(problem=pid, candidate=src, size=size))
            print(json.dumps({"load_lane": pid, "size": size, "verdict": r.verdict, "category": r.category,
                              "speedup": r.speedup, "lanes": r.facts.get("lanes"),
                              "total_s": r.phase_seconds.get("total")}), flush=True)
            n += 1
    finally:
        sup.close()


if __name__ == "__main__":
    main()
