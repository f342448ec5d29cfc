"""What an executor costs to start, spawned (a fresh interpreter importing torch) and forked (the fork server,
``sandbox/zygote.py``), in the sandbox an evaluation gives it.

    python benchmarks/spawn_bench.py [--device cpu|cuda] [--n 8] [--out spawn.json]

For each way, ``--n`` executors one after another: the wall time from ``process.spawn`` to the executor's ``ready``
frame (on cuda that includes its CUDA context), the CPU seconds the machine spent meanwhile (``/proc/stat``), and
the time to kill and reap it. The fork server's own start (one torch import, once per supervisor process) is
printed apart. Root with bubblewrap only (where the fork server serves). Figures only: it decides nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time

from kbenv.sandbox import process


def busy_ticks() -> int:
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    return sum(fields) - fields[3] - fields[4]  # all but idle and iowait


def one(root: str, device: str) -> dict:
    ticks, t0 = busy_ticks(), time.perf_counter()
    p = process.spawn(root, device, "bwrap", None, False)
    process.await_ready(p, 120)
    ready = time.perf_counter() - t0
    cpu = (busy_ticks() - ticks) / os.sysconf("SC_CLK_TCK")
    t1 = time.perf_counter()
    p.kill()
    return {"ready_s": ready, "cpu_s": cpu, "kill_s": time.perf_counter() - t1}


def summary(rows: list[dict], key: str) -> str:
    v = sorted(r[key] for r in rows)
    return f"median {statistics.median(v):.3f} s (min {v[0]:.3f}, max {v[-1]:.3f})"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--n", type=int, default=8)
    ap.add_argument("--out")
    args = ap.parse_args()
    if not (process.have_bwrap() and process.root_mode()):
        raise SystemExit("needs root and bubblewrap: the fork server serves only there")
    root = tempfile.mkdtemp(prefix="kbenv-spawn-bench-")
    out = {"device": args.device, "n": args.n}
    for way, flag in (("spawned", "0"), ("forked", "1")):
        os.environ["KBENV_FORK_SERVER"] = flag
        if flag == "1":  # the server's own start, once, apart
            t0 = time.perf_counter()
            one(root, args.device)
            out["first_forked_s"] = time.perf_counter() - t0
        rows = [one(root, args.device) for _ in range(args.n)]
        out[way] = rows
        print(f"{way:8s} ready {summary(rows, 'ready_s')}; CPU {summary(rows, 'cpu_s')}; "
              f"kill and reap {summary(rows, 'kill_s')}", flush=True)
    print(f"the fork server's first executor (its own start included): {out['first_forked_s']:.3f} s")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
