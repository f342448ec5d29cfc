"""CPU cores for the timing phase: the processes a block is timed over run on cores no other work of kbenv uses.

On cuda a block's time includes CPU work: the executor's Python launching each call, the supervisor's thread
sending the block and making the fence's driver call, and the driver thread that call wakes in the fenced
process. Everything else kbenv runs beside an evaluation is CPU work too: spares importing torch, the next
baseline set spawned ahead (torch.compile's imports), the decoy's executor, extension builds, reaping. A timed
process that shares a core with them waits for it, and its block is longer by that wait.

Measured on the H200 (16 cores; docs/results/h200-trusted-bench-cpus.txt, 4-5 evaluations each): with every
process on every core, problem 88's speedup spread with CV 8.2% and 23's 12.8%; with this plan (the timed
sides sharing cores 12-15), 88 at CV 3.8% and 40 at 2.2%, 40's eager baseline within 2%. A core per side
was worse (88 at CV 16%): see :meth:`CpuPlan.timing`. Problem 23's baselines still drift slower within an
evaluation while its candidate does not (CV 6.5%), which no CPU placement changed: that cause is elsewhere,
and :mod:`kbenv.sandbox.gpustate` records what shares the GPU while timing runs, to find it.

The plan: of the CPUs this process may use, a block of as many physical cores as there are timed sides (the
supervisor's timing thread, the candidate's executor, each baseline process) is reserved for each GPU of the host,
at the top of the set, so that the evaluators of one machine do not share theirs. A physical core is reserved
with all its SMT siblings: a hyperthread whose sibling runs a spare's torch import is a slower core. Every
process kbenv spawns starts on the cores below them (:func:`kbenv.sandbox.process.spawn` sets its affinity);
during the timing phase each timed side is moved to the reserved block (every thread of every process of it), and
back afterwards. Where the CPUs are too
few for the blocks and two cores beside them, there is no plan, and the result's facts say the cores were shared.

A candidate may widen its own affinity (a process may set its own); it gains nothing by it: while a baseline is
timed it is stopped by the fence, and its own block is its own business.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from pathlib import Path

import torch

MIN_BACKGROUND = 2  # cores left for everything else, at least


def _host_gpus() -> int:
    """The host's GPUs, from their device nodes (a Ray actor's CUDA_VISIBLE_DEVICES hides the others from CUDA)."""
    return sum(1 for name in os.listdir("/dev") if name.startswith("nvidia") and name[6:].isdigit())


def _gpu_slot(device: torch.device) -> int:
    """This device's index among the host's GPUs (CUDA_VISIBLE_DEVICES maps a Ray actor's cuda:0 to it)."""
    index = device.index or 0
    visible = [v.strip() for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
    if index < len(visible) and visible[index].isdigit():
        return int(visible[index])
    return index


@dataclasses.dataclass(frozen=True)
class CpuPlan:
    timed: tuple[int, ...]  # the timing phase's block (a core per timed side), shared by the timed sides
    background: tuple[int, ...]  # every other core this process may use: where spawned processes run

    @classmethod
    def for_device(cls, device: torch.device, sides: int, allowed: set[int] | None = None,
                   slot: int | None = None, gpus: int | None = None,
                   siblings: dict[int, frozenset[int]] | None = None) -> "CpuPlan | None":
        """The plan for ``sides`` timed sides (the supervisor's thread counts as one) on ``device``, or None where
        the CPUs are too few (or the device is the CPU, whose times earn no credit). The top ``gpus * sides``
        physical cores are the host's timed cores, a block per GPU (``slot``: this GPU's index on the host); the
        background is every core below them, so no evaluator's background work lands on another's timed cores.

        A physical core is counted whole (``siblings``: each CPU's SMT siblings, read from sysfs by default): a
        timed side whose hyperthread sibling imports torch for a spare runs at part of its speed, and the
        launch-bound blocks of small kernels (88, dlrm/2: 0.2-0.3 ms a call) are where that would show (not
        measured: the lent H200 machine has no SMT). Without SMT each core is its own unit and the plan is the same
        as before."""
        if device.type != "cuda" or not hasattr(os, "sched_getaffinity"):
            return None
        cpus = sorted(allowed if allowed is not None else os.sched_getaffinity(0))
        units = _physical_cores(cpus, siblings if siblings is not None else _sysfs_siblings(cpus))
        slot = _gpu_slot(device) if slot is None else slot
        # the host's GPUs by their device nodes; where a container shows more nodes than its CPUs can give blocks
        # to, the GPUs this process can use (each evaluator of this machine makes the same choice)
        counts = [gpus] if gpus is not None else [_host_gpus(), torch.cuda.device_count()]
        for n in counts:
            n = max(n, slot + 1)
            reserved = len(units) - n * sides
            background = tuple(c for u in units[:max(reserved, 0)] for c in u)
            if reserved > 0 and len(background) >= MIN_BACKGROUND:
                lo = reserved + slot * sides
                return cls(timed=tuple(c for u in units[lo:lo + sides] for c in u), background=background)
        return None

    @contextlib.contextmanager
    def timing(self, sides: list[list[int]], names: list[str] | None = None):
        """Within: the calling thread and every thread of the processes ``sides`` (pids) on the block of timed
        cores, which they share; afterwards the thread gets its own mask back and every process still alive
        goes to the background cores. Yields a fact: how many threads were moved, and how many refused it (a
        process gone meanwhile is neither).

        The block is shared, not a core per side: only one side runs at a time (the others are held by the
        fence, or wait for their next block), and a side confined to one core stalled on the H200: about 4 ms
        (a scheduler tick) added to a third of its blocks. That is what a thread queued behind another of its
        own process on the one core would show (the driver thread the fence's lock wakes, behind a main thread
        that waits for the GPU); the cause is inferred, not traced.

        ``names`` (one per side): the fact also counts each side's processes and threads as timing began
        (``by_side``). H100, stop 48: the one evaluation of 88 whose block intercept came out 0.77 ms (0.42-0.50 in
        five others) moved 43 threads to the block, the others 14; which side had them was not recorded."""
        block, pids = set(self.timed), [p for side in sides for p in side]
        fact = {"cores": list(self.timed), "threads_moved": 0, "refused": 0}
        if names is not None:
            fact["by_side"] = {name: {"processes": len(side), "threads": len(_threads(side))}
                               for name, side in zip(names, sides)}
        before = os.sched_getaffinity(0)
        _set(0, block, fact)  # the calling thread (0: itself)
        try:
            fact["threads_moved"] = sum(_set(tid, block, fact) for tid in _threads(pids))
            yield fact
        finally:
            _set(0, before, None)
            for tid in _threads(pids):  # threads started meanwhile inherited the block: they go back too
                _set(tid, set(self.background), None)


def _sysfs_siblings(cpus: list[int]) -> dict[int, frozenset[int]]:
    """Each CPU's SMT siblings (itself included) as the kernel lists them; a CPU whose topology cannot be read is
    its own core."""
    out = {}
    for c in cpus:
        try:
            text = Path(f"/sys/devices/system/cpu/cpu{c}/topology/thread_siblings_list").read_text()
            out[c] = frozenset(_cpu_list(text)) | {c}
        except (OSError, ValueError):
            out[c] = frozenset({c})
    return out


def _cpu_list(text: str) -> set[int]:
    """``0-3,8,10-11`` as a set."""
    got: set[int] = set()
    for part in text.strip().split(","):
        if part:
            lo, _, hi = part.partition("-")
            got |= set(range(int(lo), int(hi or lo) + 1))
    return got


def _physical_cores(cpus: list[int], siblings: dict[int, frozenset[int]]) -> list[tuple[int, ...]]:
    """The usable CPUs grouped by physical core (only CPUs this process may use), ordered by their lowest CPU."""
    allowed = set(cpus)
    units = {tuple(sorted((siblings.get(c) or frozenset({c})) & allowed | {c})) for c in cpus}
    # a CPU listed with two different sibling sets (an odd topology) stays in the first unit that claims it
    seen: set[int] = set()
    out = []
    for u in sorted(units):
        u = tuple(c for c in u if c not in seen)
        if u:
            seen |= set(u)
            out.append(u)
    return out


def _threads(pids: list[int]) -> list[int]:
    """Every thread of these processes (a process's affinity is per thread on Linux)."""
    out = []
    for pid in pids:
        try:
            out += [int(t) for t in os.listdir(f"/proc/{pid}/task")]
        except OSError:
            continue
    return out


def pin_self(cores) -> None:
    """In a process being spawned (a ``preexec_fn``): run on ``cores``; where the kernel refuses them (cores no
    longer the supervisor's to give) it keeps the supervisor's own."""
    if cores:
        try:
            os.sched_setaffinity(0, cores)
        except OSError:
            pass


def _set(tid: int, cores: set[int], fact: dict | None) -> bool:
    try:
        os.sched_setaffinity(tid, cores)
        return True
    except ProcessLookupError:
        return False
    except OSError:  # PermissionError (another uid, without CAP_SYS_NICE), or EINVAL
        if fact is not None:
            fact["refused"] += 1
        return False
