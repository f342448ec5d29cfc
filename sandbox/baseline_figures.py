"""The baselines' own figures, kept on disk for reports and ``kbenv baselines build``; never a reward's.

A reward always divides paired blocks timed in the same evaluation (``kbenv.sandbox.timing_phase``). What is kept
here is the medians of those pairs (every timed evaluation records its own), or of the baselines measured alone
(:func:`measure_alone`, ``kbenv baselines build``), per (problem, its source, device model, torch version,
precision, size): a prior and a report, and, for :func:`measure_alone`, torch.compile's on-disk cache filled ahead
of a run.
"""

from __future__ import annotations

import json
import platform
import time
from pathlib import Path

import torch

from kbenv.sandbox.executors import Deadline


def device_model(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device).replace(" ", "_")
    return f"cpu-{platform.machine()}"


def state_name(st, device: torch.device) -> str:
    """(problem, its source, device model, torch version, precision, size) as a file name."""
    return "__".join([st.problem.id.replace("/", "_"), st.problem.source_sha256[:12], device_model(device),
                      torch.__version__.replace("+", "_"), st.precision, st.size])


def record(cache_dir: Path, st, device: torch.device, medians: dict) -> None:
    """Keep one problem state's baseline medians (``cache_dir``: the baselines' directory of the cache)."""
    path = Path(cache_dir) / (state_name(st, device) + ".json")
    path.write_text(json.dumps({"problem": st.problem.id, "precision": st.precision, "size": st.size,
                                "torch": torch.__version__, "measured_at": time.time(), **medians}, indent=1))


def measure_alone(sup, problem, size: str, precision: str, rounds: int = 5) -> dict:
    """The baselines alone (no candidate): medians of ``rounds`` blocks per kind through the executor path, the
    block's fixed cost removed as the timing phase removes it (cuda: ``timing.BlockCalibration``), recorded on
    disk; for ``kbenv baselines build`` and reports (a reward always uses paired blocks). It also fills
    torch.compile's on-disk cache ahead of a run: the evaluation's memory plan is fitted first, so that the
    slots, and the marker that lets a later evaluation warm these baselines up beside correctness
    (``BaselineExecutors.prepare``), are that evaluation's. (Before stop 45 it built under whatever plan the
    supervisor last had, and ``--size`` had no ``largest``; a rollout at ``--size largest`` after it found the marker
    in 4 of 16 evaluations on an H100, whose warm-ups then waited 19.9 s in all on their paths. That build had also
    been cut by its time limit after 8 of the 16 problems.)"""
    from kbenv.sandbox.timing import BlockCalibration, Series, flush_l2, time_block
    sup.fit_memory_plan(problem.id, size, precision)
    st = sup.refs.state(problem, size, precision)
    inputs, _ = sup.refs.pair(st, sup.secret.seed(problem.id, size, "official"), "default")
    layout = sup.layout_for(st, inputs)
    leases = sup.baselines.leases(st, layout, inputs, reuse=True)
    n = len(layout.slots)
    series = {kind: Series(kind, calls=n) for kind in leases}
    calib = BlockCalibration(sup.baselines.overhead_s)  # the block's fixed cost, as the timing phase removes it
    for r in range(rounds + 1):
        for kind, lease in leases.items():
            for k in range(n):
                lease.write_inputs(k, inputs)
            flush_l2(sup.device)
            per_call = time_block(lease, sup.fence, Deadline("baseline", 600), 60.0)
            if sup.device.type == "cuda":
                calib.measure({kind: lease}, {kind: per_call}, sup.fence, sup.device, Deadline("baseline", 60), n)
            sup.fence.release(lease.proc)
            if r:
                series[kind].add(r - 1, per_call)
    for kind, s in series.items():
        s.overhead_s = calib.side_s(kind)
    out = {f"{k}_ms": s.median_ms for k, s in series.items()}
    best = min(series.values(), key=lambda s: s.median_ms)
    out.update(best=best.name, best_ms=best.median_ms)
    out.setdefault("compile_ms", None)
    record(sup.baselines.cache_dir, st, sup.device, out)
    return out
