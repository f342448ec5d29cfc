"""The timing phase's CPU plan (kbenv.sandbox.cpus): which cores are reserved, and that the timed sides are moved
onto them and back. The figures it exists for are GPU figures (benchmarks/trusted_bench.py on the H200)."""

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import torch

from kbenv.sandbox import process
from kbenv.sandbox.cpus import CpuPlan

CUDA = torch.device("cuda", 0)
linux_only = pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="Linux CPU affinity")


def test_no_plan_on_the_cpu_or_with_too_few_cores():
    assert CpuPlan.for_device(torch.device("cpu"), sides=4, allowed=set(range(64)), slot=0, gpus=1) is None
    assert CpuPlan.for_device(CUDA, sides=4, allowed=set(range(5)), slot=0, gpus=1) is None  # 1 core beside
    assert CpuPlan.for_device(CUDA, sides=4, allowed=set(range(6)), slot=0, gpus=1) is not None


def test_one_block_per_gpu_at_the_top_and_no_background_on_any_gpus_block():
    cores = set(range(32))
    plans = [CpuPlan.for_device(CUDA, sides=4, allowed=cores, slot=g, gpus=2) for g in (0, 1)]
    assert plans[0].timed == (24, 25, 26, 27) and plans[1].timed == (28, 29, 30, 31)
    for p in plans:
        assert p.background == tuple(range(24))
        assert not set(p.timed) & set(p.background)
    # a GPU index beyond the device nodes counted still gets a block of its own
    p = CpuPlan.for_device(CUDA, sides=4, allowed=cores, slot=2, gpus=1)
    assert p.timed == (28, 29, 30, 31) and max(p.background) < 20


def test_the_slot_is_the_hosts_gpu_index(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")  # a Ray actor's cuda:0 is the host's second GPU
    p = CpuPlan.for_device(CUDA, sides=4, allowed=set(range(32)), gpus=2)
    assert p.timed == (28, 29, 30, 31)


def _smt(n: int) -> dict[int, frozenset[int]]:
    """A host of n logical CPUs in SMT pairs numbered as Linux numbers them: CPU c and c + n/2 share a core."""
    half = n // 2
    return {c: frozenset({c % half, c % half + half}) for c in range(n)}


def test_smt_siblings_of_timed_cores_are_never_background():
    """A timed side's hyperthread sibling must not run a spare's torch import: whole physical cores are reserved."""
    cpus = set(range(16))  # 8 physical cores, 2 threads each (the H200 machine's 16 CPUs, if SMT)
    p = CpuPlan.for_device(CUDA, sides=4, allowed=cpus, slot=0, gpus=1, siblings=_smt(16))
    assert p is not None
    timed, background = set(p.timed), set(p.background)
    assert len(timed) == 8 and len(background) == 8 and not timed & background
    for c in timed:  # every sibling of a timed CPU is timed too
        assert _smt(16)[c] <= timed
    # a bad plan (the old one) would have put CPU 12's sibling 4 in the background
    assert 4 not in background and 4 in timed


def test_smt_blocks_of_two_gpus_share_no_physical_core():
    cpus = set(range(32))
    sib = _smt(32)
    plans = [CpuPlan.for_device(CUDA, sides=4, allowed=cpus, slot=g, gpus=2, siblings=sib) for g in (0, 1)]
    cores = [{min(sib[c]) for c in p.timed} for p in plans]
    assert len(cores[0]) == len(cores[1]) == 4 and not cores[0] & cores[1]
    for p in plans:
        assert not {min(sib[c]) for c in p.background} & (cores[0] | cores[1])


def test_without_smt_the_plan_is_per_cpu_as_before():
    own = {c: frozenset({c}) for c in range(32)}
    p = CpuPlan.for_device(CUDA, sides=4, allowed=set(range(32)), slot=0, gpus=2, siblings=own)
    assert p.timed == (24, 25, 26, 27) and p.background == tuple(range(24))


def test_smt_with_too_few_physical_cores_gives_no_plan():
    # 5 physical cores (10 CPUs): 4 timed leave 1 core (2 CPUs) beside: enough; 4 physical: none
    assert CpuPlan.for_device(CUDA, sides=4, allowed=set(range(10)), slot=0, gpus=1, siblings=_smt(10)) is not None
    assert CpuPlan.for_device(CUDA, sides=4, allowed=set(range(8)), slot=0, gpus=1, siblings=_smt(8)) is None


def test_sibling_lists_are_parsed_as_the_kernel_writes_them():
    from kbenv.sandbox.cpus import _cpu_list, _sysfs_siblings
    assert _cpu_list("0-3,8,10-11\n") == {0, 1, 2, 3, 8, 10, 11}
    assert _cpu_list("5") == {5}
    mine = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else [0]
    sib = _sysfs_siblings(mine)
    assert all(c in sib[c] for c in mine)  # this machine's own topology, whatever it is, lists each CPU


def _affinity(pid: int) -> set[int]:
    return os.sched_getaffinity(pid)


@linux_only
def test_timing_moves_every_thread_of_each_side_onto_the_block_and_back():
    mine = sorted(os.sched_getaffinity(0))
    if len(mine) < 2:
        pytest.skip("needs two CPUs")
    a, b = mine[0], mine[1]
    plan = CpuPlan(timed=(b,), background=(a,))
    # a child with a second thread: affinity is per thread on Linux, and both must move
    child = subprocess.Popen([sys.executable, "-c", "import threading, time\n"
                              "threading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n"
                              "print('up', flush=True); time.sleep(60)"], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "up"
        tids = [int(t) for t in os.listdir(f"/proc/{child.pid}/task")]
        assert len(tids) >= 2
        before = os.sched_getaffinity(0)
        with plan.timing([[child.pid]], ["candidate"]) as fact:
            assert os.sched_getaffinity(0) == {b}  # the calling (timing) thread
            assert all(_affinity(t) == {b} for t in tids)
            assert fact["threads_moved"] == len(tids) and fact["refused"] == 0
            assert fact["by_side"] == {"candidate": {"processes": 1, "threads": len(tids)}}
        assert os.sched_getaffinity(0) == before
        assert all(_affinity(t) == {a} for t in tids)  # back to the background cores
    finally:
        child.kill()
        child.wait()


@linux_only
def test_timing_restores_the_thread_when_the_timed_code_raises():
    mine = sorted(os.sched_getaffinity(0))
    plan = CpuPlan(timed=(mine[-1],), background=(mine[0],))
    before = os.sched_getaffinity(0)
    with pytest.raises(RuntimeError):
        with plan.timing([[999999999]]):  # a side already gone is neither moved nor refused
            raise RuntimeError("a candidate's fault while timed")
    assert os.sched_getaffinity(0) == before


@linux_only
def test_spawned_executors_start_on_the_background_cores():
    mine = sorted(os.sched_getaffinity(0))
    root = Path(tempfile.mkdtemp())
    p = process.spawn(root, "cpu", "none", None, False, cpus=(mine[0],))
    try:
        assert _affinity(p.proc.pid) == {mine[0]}
    finally:
        p.kill()


def test_gpu_processes_are_named_by_role(monkeypatch):
    """The timing phase's fact of what held a context on the GPU: each pid by its role, the rest 'other'."""
    from kbenv.sandbox import gpustate
    procs = [(os.getpid(), 3 << 30), (101, 1 << 30), (102, 1 << 30), (103, 2 << 30), (999, 5 << 20)]
    monkeypatch.setattr(gpustate, "compute_processes", lambda index: procs)
    got = gpustate.by_role(0, {"candidate": [101], "eager": [102], "compile": [103], "spare": []})
    assert got == {"supervisor": [3072], "candidate": [1024], "eager": [1024], "compile": [2048], "other": [5]}
    monkeypatch.setattr(gpustate, "compute_processes", lambda index: None)  # no NVML: no fact, no failure
    assert gpustate.by_role(0, {}) is None


def test_gpu_state_has_clocks_and_the_reasons_they_are_held_down(monkeypatch):
    from kbenv.sandbox import gpustate

    class FakeNvml:  # the driver's answers, written through the ctypes references as NVML would
        def nvmlDeviceGetClockInfo(self, handle, kind, ref):
            ref._obj.value = {0: 1980, 2: 3201}[kind.value]
            return 0

        def nvmlDeviceGetTemperature(self, handle, sensor, ref):
            ref._obj.value = 71
            return 0

        def nvmlDeviceGetPowerUsage(self, handle, ref):
            ref._obj.value = 612_500
            return 0

        def nvmlDeviceGetCurrentClocksThrottleReasons(self, handle, ref):
            ref._obj.value = 0x4 | 0x20  # the software power cap and thermal slowdown
            return 0

    monkeypatch.setattr(gpustate, "compute_processes", lambda index: [(os.getpid(), 1 << 30)])
    monkeypatch.setattr(gpustate, "_handle", lambda index: (FakeNvml(), None))
    got = gpustate.snapshot(0, {})
    assert got == {"processes": {"supervisor": [1024]}, "sm_mhz": 1980, "mem_mhz": 3201, "temp_c": 71,
                   "power_w": 612.5, "clock_reasons": ["sw_power_cap", "sw_thermal"]}
    assert gpustate.sm_clock(0) == 1980  # the per-block reading, through the same NVML call
    monkeypatch.setattr(gpustate, "compute_processes", lambda index: None)
    assert gpustate.snapshot(0, {}) is None
