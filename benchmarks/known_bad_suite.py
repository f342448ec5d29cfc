"""Replay the known-bad suite and the known-good kernels through the full path (Ray actor, sandboxed worker,
verifier) and print each candidate's category and reward.

    python benchmarks/known_bad_suite.py [--device cpu|cuda] [--size small|full] [--json OUT] [--limits ...]

Exit status 1 if any known-bad candidate earns a reward above 0 or lands outside its expected categories, or
any known-good candidate is rejected.
"""

import argparse
import json
import os
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="auto")
    ap.add_argument("--size", default="auto")
    ap.add_argument("--json", default="")
    ap.add_argument("--only", default="", help="comma-separated substrings of candidate ids to run (default: all)")
    ap.add_argument("--limits", default="compile_s=30,trial_s=20,timing_s=60",
                    help="phase limits in seconds: the suite holds hangs and sleeps that run into them on purpose")
    args = ap.parse_args()
    limits = {k: float(v) for k, v in (kv.split("=") for kv in args.limits.split(",") if kv)}
    import torch
    device = ("cuda" if torch.cuda.is_available() else "cpu") if args.device == "auto" else args.device
    if device == "cpu":
        os.environ.setdefault("TRITON_INTERPRET", "1")
    size = ("full" if device == "cuda" else "small") if args.size == "auto" else args.size
    from kbenv.sandbox.actor import EvaluatorPool
    from kbenv.suite import format_row, format_suite, run_suite
    pool = EvaluatorPool(device=device, config={"limits": limits})
    partial = []

    def on_row(row, done, total):
        # Streamed as results arrive: a run cut short by a time limit keeps every finished row.
        print(f"[{done}/{total}] {format_row(row)}", flush=True)
        partial.append(row)
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"device": device, "size": size, "partial": True, "rows": partial}, f, indent=1)

    report = run_suite(pool, size, on_row=on_row, only=[s for s in args.only.split(",") if s] or None)
    print(format_suite(report))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
    pool.close()
    return 1 if report["mismatches"] else 0


if __name__ == "__main__":
    sys.exit(main())
