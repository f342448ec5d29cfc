"""Does a dying CUDA context disturb a kernel timed beside it? (issue 13: the lanes' hand-over)

Every timing phase waits until no context of any lane is dying (``kbenv.sandbox.lanes``: a reaper keeps its lane's
shared hold of the GPU until its process is gone), and a killed executor's context takes 1.5-1.8 s to go on an
H100 (stop 44). With three lanes that is two deaths per evaluation on the path of some lane's timing phase. The rule
stands until this says a death is harmless. Here: a memory-bound kernel (a copy of ``--mb`` MiB) is timed in chunks
of ``--chunk`` calls by CUDA events, the host clock stamping each chunk, while ``--children`` processes that each
created a context and allocated ``--gb`` GiB are killed (SIGKILL, as executors are, each already idle: no queued
work, as the fence leaves them). Prints each death's time to reap, and the chunk times before, during and after the
deaths (median, p90, max, in µs per call); ``--out`` writes them as JSON.

    python benchmarks/dying_context_spike.py --children 2 --gb 8 --out spike.json
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import threading
import time

CHILD = """
import sys, torch
x = torch.empty(int(float(sys.argv[1]) * (1 << 30)), dtype=torch.uint8, device='cuda')
x.fill_(1); torch.cuda.synchronize()
print('ready', flush=True)
sys.stdin.read()
"""


def stats(xs: list[float]) -> dict:
    if not xs:
        return {"n": 0}
    s = sorted(xs)
    return {"n": len(s), "median_us": round(statistics.median(s), 2), "p90_us": round(s[int(0.9 * (len(s) - 1))], 2),
            "max_us": round(s[-1], 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--children", type=int, default=2)
    ap.add_argument("--gb", type=float, default=8.0)
    ap.add_argument("--mb", type=int, default=1024, help="the copied tensor (MiB)")
    ap.add_argument("--chunk", type=int, default=10, help="calls per timed chunk")
    ap.add_argument("--rounds", type=int, default=3, help="deaths observed (each round: new children, then killed)")
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    import torch
    x = torch.randn(args.mb << 18, device="cuda")
    y = torch.empty_like(x)
    for _ in range(20):
        y.copy_(x)
    torch.cuda.synchronize()
    ev = [torch.cuda.Event(enable_timing=True) for _ in range(2)]

    def chunk() -> tuple[float, float]:
        t = time.monotonic()
        ev[0].record()
        for _ in range(args.chunk):
            y.copy_(x)
        ev[1].record()
        ev[1].synchronize()
        return t, ev[0].elapsed_time(ev[1]) * 1000 / args.chunk

    rounds = []
    for r in range(args.rounds):
        kids = [subprocess.Popen([sys.executable, "-c", CHILD, str(args.gb)], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, text=True) for _ in range(args.children)]
        for k in kids:
            assert k.stdout.readline().strip() == "ready"
        before = [chunk()[1] for _ in range(200)]
        deaths: dict = {}

        def kill() -> None:
            time.sleep(0.2)
            deaths["kill_at"] = time.monotonic()
            for k in kids:
                os.kill(k.pid, signal.SIGKILL)
            for k in kids:
                k.wait()
                deaths.setdefault("reaped_s", []).append(round(time.monotonic() - deaths["kill_at"], 4))
            deaths["gone_at"] = time.monotonic()
        th = threading.Thread(target=kill)
        th.start()
        timed = []
        t_end = time.monotonic() + 0.2 + 8.0
        while th.is_alive() or time.monotonic() < deaths.get("gone_at", 0) + 0.5:
            timed.append(chunk())
            if time.monotonic() > t_end:
                break
        th.join()
        during = [us for t, us in timed if deaths["kill_at"] <= t <= deaths["gone_at"]]
        after = [us for t, us in timed if t > deaths["gone_at"]]
        pre = [us for t, us in timed if t < deaths["kill_at"]]
        row = {"round": r, "reaped_s": deaths["reaped_s"], "before": stats(before + pre), "during": stats(during),
               "after": stats(after)}
        rounds.append(row)
        print(json.dumps(row), flush=True)
    out = {"children": args.children, "gb": args.gb, "mb": args.mb, "chunk": args.chunk,
           "gpu": torch.cuda.get_device_name(), "rounds": rounds}
    if args.out:
        with open(args.out, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
