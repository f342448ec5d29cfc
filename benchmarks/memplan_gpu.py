"""The memory plan against the GPU: each known-good kernel evaluated at the largest size that fits, with the
device's peak memory measured, under an optional cap that makes an H200 act as a smaller card.

    python benchmarks/memplan_gpu.py [--cap 24G|40G|80G] [--size largest|full|medium|small] [--only ID,...]
                                     [--out memplan_gpu.json]

For each problem with a known-good solution: the preflight at ``full`` (a refusal prints its one line), then
an evaluation at the largest size whose plan fits (``--size largest``, the default) or at ``--size``. A thread
samples the device's used memory from NVML every 10 ms (all processes: the supervisor, the candidate's
worker, spares, the baseline worker), so the peak is the driver's figure, not kbenv's own account (less the
driver's own reservation, which the CUDA total that the budget is planned from already leaves out). Each row
prints the plan's ``required_bytes`` beside the measured peak; the run exits non-zero if a measured peak
exceeds the cap (or the device), or a problem that the plan admits crashes with an out-of-memory error.

The issue-16 table is three runs on the H200, one per cap, plus one without:

    for cap in 24G 40G 80G; do python benchmarks/memplan_gpu.py --cap $cap --out memplan_gpu_$cap.json; done
    python benchmarks/memplan_gpu.py --size medium --max-peak 22G --out memplan_gpu_medium.json  # issue 15
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GiB = 1 << 30


class _MemInfo(ctypes.Structure):
    _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]


class DeviceMemorySampler:
    """The device's used memory (NVML, every process) sampled by a thread; :meth:`window` gives the peak."""

    def __init__(self, torch_index: int, interval_s: float = 0.01):
        sys.path.insert(0, str(ROOT / "benchmarks"))
        from gpubusy import _pci_bus_id

        self.lib = ctypes.CDLL("libnvidia-ml.so.1")
        if self.lib.nvmlInit_v2() != 0:
            raise RuntimeError("nvmlInit failed")
        self.handle = ctypes.c_void_p()
        bus = _pci_bus_id(torch_index)
        rc = (self.lib.nvmlDeviceGetHandleByPciBusId_v2(bus.encode(), ctypes.byref(self.handle)) if bus else
              self.lib.nvmlDeviceGetHandleByIndex_v2(ctypes.c_uint(torch_index), ctypes.byref(self.handle)))
        if rc != 0:
            raise RuntimeError(f"NVML has no handle for device {torch_index} (rc {rc})")
        self.peak = 0
        self.lock = threading.Lock()
        threading.Thread(target=self._run, args=(interval_s,), daemon=True).start()

    def _info(self) -> _MemInfo:
        info = _MemInfo()  # all zero if NVML fails
        self.lib.nvmlDeviceGetMemoryInfo(self.handle, ctypes.byref(info))
        return info

    def used(self) -> int:
        return int(self._info().used)

    def total(self) -> int:
        return int(self._info().total)

    def _run(self, interval_s: float) -> None:
        while True:
            u = self.used()
            with self.lock:
                self.peak = max(self.peak, u)
            time.sleep(interval_s)

    def reset(self) -> int:
        with self.lock:
            self.peak = self.used()
            return self.peak

    def window_peak(self) -> int:
        time.sleep(0.05)
        with self.lock:
            return self.peak


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cap", default=None, help="KBENV_GPU_MEMORY_CAP for this run (e.g. 24G, 40G, 80G)")
    ap.add_argument("--size", default="largest", choices=["largest", "full", "medium", "small"])
    ap.add_argument("--precision", default=None)
    ap.add_argument("--only", default="", help="comma-separated problem ids")
    ap.add_argument("--max-peak", default=None,
                    help="fail a row whose measured peak exceeds this (e.g. 22G for the medium tier); default: the budget")
    ap.add_argument("--out", default="memplan_gpu.json")
    ap.add_argument("--refusals", action="store_true",
                    help="also preflight every registered problem at full (refusals counted, one line each) and run "
                         "`kbenv eval` on the first refused one: it must exit 2 with the one-line message")
    args = ap.parse_args(argv)
    if args.cap:
        os.environ["KBENV_GPU_MEMORY_CAP"] = args.cap  # before anything of kbenv starts: every process inherits it
    import torch

    from kbenv.agents.scripted import KnownGoodPolicy
    from kbenv.problems import get_problem
    from kbenv.prompts import extract_code
    from kbenv.sandbox import memplan, peaks
    from kbenv.sandbox.result import EvalRequest
    from kbenv.sandbox.supervisor import Supervisor

    dev = torch.device("cuda", torch.cuda.current_device())
    props = torch.cuda.get_device_properties(dev)
    budget = memplan.device_budget_bytes(dev)
    limit = memplan.parse_bytes(args.max_peak) if args.max_peak else budget
    p = peaks.peaks_for_device(dev)
    print(f"{props.name}: {props.total_memory / GiB:.1f} GiB, planning with {budget / GiB:.1f} GiB "
          f"(cap {args.cap or 'none'}); floor figures: {p.name} ({p.source[:60]}...)", flush=True)
    sampler = DeviceMemorySampler(dev.index)
    # NVML's used memory counts the driver's own reservation, which the CUDA runtime's total (the figure a real
    # card's budget is planned from, and the basis of the cap) already leaves out: 0.6 GiB on the H200 (NVML
    # 140.4 GiB, CUDA 139.8 GiB). It is taken off every figure so that a peak compares with the budget on the
    # budget's own basis; the raw NVML figure stays in the rows.
    reserved = max(0, sampler.total() - props.total_memory)
    print(f"driver reservation (NVML total - CUDA total): {reserved / GiB:.2f} GiB, taken off the measured figures",
          flush=True)
    good = KnownGoodPolicy()
    chosen = [pid for pid in good.problems() if not args.only or pid in args.only.split(",")]
    sup = Supervisor(device=str(dev))
    rows, bad = [], 0
    for pid in chosen:
        prob = get_problem(pid)
        prec = args.precision or prob.precision_default
        row = {"problem": pid, "precision": prec, "cap": args.cap, "budget_bytes": budget}
        try:
            memplan.preflight(prob, "full", prec, dev)
            row["full"] = "fits"
        except memplan.MemoryPlanError as e:
            row["full"] = "refused"
            row["refusal"] = str(e)
            print(f"{pid:24s} refused at full: {e}", flush=True)
        size = args.size
        if size == "largest":
            size = next((s for s in reversed(memplan.SIZES)
                         if _fits(memplan, prob, s, prec, dev)), None)
            if size is None:
                row["verdict"] = "refused at every size"
                rows.append(row)
                continue
        try:
            plan = memplan.preflight(prob, size, prec, dev)
        except memplan.MemoryPlanError as e:
            row.update(size=size, verdict="refused", refusal=str(e))
            rows.append(row)
            print(f"{pid:24s} refused at {size}: {e}", flush=True)
            continue
        code = extract_code(good.act({"problem_id": pid, "prompt": "", "system": "", "turn": 0, "feedback": ""}))
        idle = sampler.reset()
        t = time.perf_counter()
        r = sup.evaluate(EvalRequest(problem=pid, candidate=code, size=size, precision=prec))
        wall = time.perf_counter() - t
        raw_peak = sampler.window_peak()
        peak, idle = raw_peak - reserved, idle - reserved
        over = peak > limit
        oom = (r.category == "oom")
        bad += over or oom or r.verdict != "pass"
        row.update(size=size, verdict=r.verdict, category=r.category, reason=r.reason[:200], wall_s=wall,
                   planned_bytes=plan.required_bytes, planned_total_bytes=plan.total_bytes,
                   peak_used_bytes=peak, nvml_peak_used_bytes=raw_peak, idle_used_bytes=idle,
                   within_budget=not over, plan=plan.to_dict(), speedup=r.speedup)
        rows.append(row)
        print(f"{pid:24s} {size:6s} {r.verdict:4s} {r.category or '':12s} planned {plan.required_bytes / GiB:6.1f} GiB"
              f" (+ cache {plan.reference_cache_bytes / GiB:.1f})"
              f"  measured peak {peak / GiB:6.1f} GiB (idle {idle / GiB:.1f})  limit {limit / GiB:.1f}"
              f"{'  OVER THE LIMIT' if over else ''}  {wall:.1f} s", flush=True)
    sup.close()
    refusals = _refusals(memplan, dev) if args.refusals else None
    bad += bool(refusals and refusals["cli_exit"] not in (None, 2))
    Path(args.out).write_text(json.dumps({"device": props.name, "cap": args.cap, "budget_bytes": budget,
                                          "driver_reserved_bytes": reserved,
                                          "limit_bytes": limit,
                                          "peaks": p.to_dict(), "rows": rows, "refusals": refusals},
                                         indent=1, default=str))
    print(f"wrote {args.out}; {bad} row(s) over the limit, out of memory or not passing", flush=True)
    return 1 if bad else 0


def _refusals(memplan, dev) -> dict:
    """Every registered problem preflighted at full; the CLI run on the first refused one (exit 2 expected)."""
    import subprocess
    import tempfile

    from kbenv.problems import list_problems
    refused, fits = [], 0
    for prob in list_problems():
        try:
            memplan.preflight(prob, "full", prob.precision_default, dev)
            fits += 1
        except memplan.MemoryPlanError as e:
            refused.append({"problem": prob.id, "line": str(e)})
            print(f"refused at full: {e}", flush=True)
    out = {"fits_at_full": fits, "refused_at_full": len(refused), "refused": refused, "cli_exit": None}
    if refused:
        with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
            f.write("import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, *a):\n        return a[0]\n")
        r = subprocess.run([sys.executable, "-m", "kbenv.cli", "eval", "--problem", refused[0]["problem"],
                            "--kernel", f.name, "--size", "full", "--device", "cuda"], capture_output=True, text=True,
                           timeout=300)
        out.update(cli_exit=r.returncode, cli_stderr=r.stderr.strip()[-600:], cli_stdout=r.stdout.strip()[-300:])
        print(f"kbenv eval --problem {refused[0]['problem']} --size full: exit {r.returncode}; "
              f"{(r.stderr.strip() or r.stdout.strip())[-300:]}", flush=True)
    print(f"{fits} problems fit at full, {len(refused)} refused", flush=True)
    return out


def _fits(memplan, prob, size, prec, dev) -> bool:
    try:
        memplan.preflight(prob, size, prec, dev)
        return True
    except memplan.MemoryPlanError:
        return False


if __name__ == "__main__":
    sys.exit(main())
