"""Where a timed block's fixed cost goes (issue 11: the block intercept, about 1 ms a block on the H200).

    python benchmarks/intercept_spike.py [--problem kernelbench/level1/88] [--size largest] [--reps 60]
                                         [--sides eager,candidate] [--out intercept_spike.json]

A timed block on cuda is: the executor released (SIGCONT, then the driver's unlock), the supervisor's clock
started, one frame sent, the executor's calls and its synchronize, its reply, the driver's lock of its processes
(which waits for their GPU work), the clock stopped, the executor held again (lock and SIGSTOP). The timing phase
removes a fixed cost per block, measured on the trusted sides as ``(n T_1 - T_n) / (n - 1)``
(``timing.BlockCalibration``); at stop 51 it was 1.0-2.1 ms a block on the H200 (0.5-0.8 on stop 50's H100s)
and differed between the eager and the torch.compile processes by up to 0.5 ms, which is what spreads and biases
short blocks' speedups (README, "What lanes cost in accuracy").

This takes the path apart on one or two executors of one problem: ``eager``, the trusted eager baseline's process
(it delivers no outputs), and ``candidate``, a candidate's executor running the problem's known-good kernel, whose
outputs stay in its memory and are named over IPC, as every candidate's are (since stop 53: the honest 23 at
``medium`` on an H100 estimated its own intercept at 1.8 ms against eager's 1.1, ``docs/results/h100-stop53.txt``;
whether that is the candidate's path or its kernel is what this tells). Each variant is timed ``--reps`` times,
interleaved round-robin so that drift lands on all of them alike:

- ``pipe_empty``: an empty block, nothing fenced (the frame's round trip and the executor's wake-up);
- ``pipe_one``: a one-call block, nothing fenced (plus the call and the executor's synchronize);
- ``lock_one``: unlock before the clock, lock after the reply, no SIGSTOP;
- ``stop_one``: SIGCONT before the clock, SIGSTOP after the reply, no lock;
- ``full_one`` / ``full_all``: the timing phase's own path (``timing.time_block``), one call or every slot;
- ``full_one_settled``: the full path with 5 ms between the release and the clock (diagnosis only: the timing
  phase cannot wait there, since a candidate released early could compute before its clock starts).

Printed per side: each variant's median, p10 and p90 in microseconds, and the intercept the timing phase would
estimate from ``full_one`` and ``full_all`` (paired by repetition). Also in ``--out`` (JSON).
"""

import argparse
import ctypes
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from slot_bias import known_good  # noqa: E402  (the problem's known-good kernel, as the other benches take it)


def measure(sup, lease, n: int, reps: int) -> dict:
    """The variants on one executor (running, unlocked, at the start and the end), ``reps`` times each."""
    from kbenv.sandbox import protocol
    from kbenv.sandbox.executors import Deadline
    from kbenv.sandbox.fence import ProcessLockFence, _UnlockArgs
    from kbenv.sandbox.timing import flush_l2, time_block
    fence = sup.fence
    locks = isinstance(fence, ProcessLockFence)
    pids = fence.prepare(lease.proc) if locks else []
    dl = Deadline("spike", 600)
    empty = protocol.Block(()).to_wire()

    def unlock():
        for pid in pids:
            fence.lib.cuCheckpointProcessUnlock(pid, ctypes.byref(_UnlockArgs()))

    def lock():
        for pid in pids:
            rc = fence._lock(lease.proc, pid, 10.0)
            assert rc == 0, f"lock: CUresult {rc}"

    def pipe_empty():  # (a frame of no calls: the protocol's parser wants one reply per call, so read it raw)
        t = time.perf_counter()
        lease.proc.send(empty)
        lease.proc.recv(time.monotonic() + 60)
        return time.perf_counter() - t

    def pipe_one():
        t = time.perf_counter()
        lease.call_block([0], dl)
        return time.perf_counter() - t

    def lock_one():
        lock()
        unlock()
        t = time.perf_counter()
        lease.call_block([0], dl)
        lock()
        dt = time.perf_counter() - t
        unlock()
        return dt

    def stop_one():
        held = lease.proc.pause(10.0)
        lease.proc.resume(held)
        t = time.perf_counter()
        lease.call_block([0], dl)
        return time.perf_counter() - t

    def full(slots, settle=0.0):
        def run():
            fence.hold(lease.proc, 10.0)
            fence.release(lease.proc)
            if settle:
                time.sleep(settle)
            t = time_block(lease, fence, dl, 10.0, slots=slots)
            fence.release(lease.proc)
            return t * len(slots)
        return run

    variants = {"pipe_empty": pipe_empty, "pipe_one": pipe_one, "lock_one": lock_one, "stop_one": stop_one,
                "full_one": full([0]), "full_all": full(list(range(n))), "full_one_settled": full([0], 0.005)}
    if not locks:  # the CPU (a dry run): no driver lock
        del variants["lock_one"]
    times: dict = {k: [] for k in variants}
    for r in range(reps + 3):
        for name, fn in variants.items():  # each starts and ends with the executor running
            flush_l2(sup.device)
            dt = fn()
            if r >= 3:  # the first rounds warm every path up
                times[name].append(dt)
    out: dict = {"cuda_pids": len(pids), "us": {k: _us(v) for k, v in times.items()}}
    if n > 1:
        est = [max(0.0, (n * a - b) / (n - 1)) for a, b in zip(times["full_one"], times["full_all"])]
        out["intercept_us"] = _us(est)
        out["per_call_us"] = 1e6 * statistics.median(times["full_all"]) / n
    return out


def _us(xs: list) -> dict:
    s = sorted(xs)
    return {"median": 1e6 * statistics.median(s), "p10": 1e6 * s[len(s) // 10], "p90": 1e6 * s[(9 * len(s)) // 10]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--problem", default="kernelbench/level1/88")
    ap.add_argument("--size", default="largest")
    ap.add_argument("--reps", type=int, default=60)
    ap.add_argument("--sides", default="eager,candidate", help="eager (the trusted baseline's process), candidate "
                                                               "(a candidate's executor running the known-good kernel)")
    ap.add_argument("--out", default="intercept_spike.json")
    ap.add_argument("--device", default="cuda:0", help="cpu: the paths without the driver lock (a dry run)")
    args = ap.parse_args()

    from kbenv import step
    from kbenv.problems import get_problem
    from kbenv.sandbox import protocol
    from kbenv.sandbox.executors import Deadline, Lease
    from kbenv.sandbox.references import MODEL_SEED
    from kbenv.sandbox.supervisor import Supervisor

    problem = get_problem(args.problem)
    cuda = args.device.startswith("cuda")
    if not cuda:
        import os
        os.environ.setdefault("TRITON_INTERPRET", "1")
    size = step.largest_size(problem.id, None, "cuda" if cuda else "cpu") if args.size == "largest" else args.size
    sides = [s for s in args.sides.split(",") if s]
    sup = Supervisor(device=args.device, keep_spare="candidate" in sides, baselines=("eager",))
    out: dict = {"problem": problem.id, "size": size, "reps": args.reps,
                 "device": torch.cuda.get_device_name(0) if cuda else "cpu", "sides": {}}
    try:
        sup.fit_memory_plan(problem.id, size, None)
        precision = problem.precision_default
        st = sup.refs.state(problem, size, precision)
        inputs, _ = sup.refs.pair(st, sup.secret.seed(problem.id, size, "official"), "default")
        layout = sup.layout_for(st, inputs)
        n = len(layout.slots)
        out["slots"] = n
        print(f"{problem.id} at {size}: {n} slots, {out['device']}")
        for side in sides:
            if side == "eager":
                lease = sup.baselines.leases(st, layout, inputs, reuse=True)["eager"]
            elif side == "candidate":  # as an evaluation takes and builds it (Evaluation.compile)
                lease = Lease(sup.pool.take(), sup.device, layout)
                lease.setup(protocol.Setup(problem.source, problem.overrides(size), known_good(problem.id),
                                           str(sup.device), precision, MODEL_SEED, deliver=lease.route),
                            Deadline("compile", 300))
            else:
                raise SystemExit(f"unknown side {side!r}")
            for k in range(n):
                lease.write_inputs(k, inputs)
            for _ in range(2):  # a first call's JIT compile, outside every measurement
                lease.call_block(list(range(n)), Deadline("warm-up", 300))
            res = out["sides"][side] = measure(sup, lease, n, args.reps)
            print(f" {side} ({res['cuda_pids']} CUDA process(es)):")
            for k, v in res["us"].items():
                print(f"  {k:18s} median {v['median']:9.1f} us   p10 {v['p10']:9.1f}   p90 {v['p90']:9.1f}")
            if "intercept_us" in res:
                v = res["intercept_us"]
                print(f"  intercept (n T1 - Tn)/(n-1): median {v['median']:.1f} us  p10 {v['p10']:.1f}  "
                      f"p90 {v['p90']:.1f}; a call {res['per_call_us']:.1f} us")
    finally:
        sup.close()
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
