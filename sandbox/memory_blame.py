"""Who is blamed when the trusted side runs out of device memory while a candidate's executor is alive.

Nothing binds an executor's device memory from outside: a candidate can take every free byte, and its process
holds it until it is reaped (1-2 s after the kill on the H200). So an out-of-memory of the trusted side (its
references, its baselines, a clean process's start) is judged by what the driver reports once each candidate is
gone: an earlier evaluation's dying executor first (then this evaluation runs again: it is never judged for another
candidate's memory), then this one's own processes (its ``oom``), and only memory that stays taken with no
candidate alive is a fault of the harness (raised). On the CPU the candidate's executor is the only suspect.
"""

from __future__ import annotations

import logging

from kbenv.sandbox.executors import CandidateFault
from kbenv.sandbox.references import HarnessError


class EarlierExecutorHeldMemory(Exception):
    """The trusted side ran out of device memory that an earlier evaluation's dying executor held (internal:
    :meth:`Supervisor.evaluate` runs the evaluation again; never a verdict, never a HarnessError)."""


OOM_SLACK = 1 << 30  # beside the plan's figures: a context's size varies with the libraries a process loads


def oom_verdict(sup, proc, err: Exception, earlier: list = (), retried: bool = False,
                others: list = ()) -> CandidateFault:
    """The trusted side ran out of device memory while a candidate's executor was alive: kill it, and judge by
    what that gave back: if the memory is then free, the candidate's ``oom``; still not free with no candidate
    alive, the machine is too small (raised). The reason says whether its processes gave back more than the
    plan lends them (its executor's and its decoy's, ``OOM_SLACK`` beside) or no more (logged as a warning too):
    no more means a transient peak of the candidate's, which no reading after the fact can see, or an undercount
    of the trusted side by the plan (stop 42, an H100: an honest kernel for problem 47 at full size was paid 0
    as ``oom``, the supervisor holding 32 GiB against 14 planned; its causes are fixed). It is not raised as the
    harness's: a candidate whose thread allocates and frees memory while the supervisor draws inputs could then
    raise a harness fault at will.

    Every process that ran this candidate's code counts, not only ``proc``: the decoy's executor runs the
    candidate's own module code (its no-op rewrite) beside correctness, and can hold memory too. A decoy run
    that ended is held until the timing phase ends (``Evaluation.park``): such executors come as ``others``,
    (executor, lease) pairs, and are killed with ``proc``, after the free memory is first read, so that what
    they held counts as the candidate's. A failed decoy run was disposed at once: the wait for every disposed
    executor to be reaped frees what it held before the free memory is read again.

    ``earlier``: the reapers of executors that were still dying when this evaluation began (an earlier
    candidate's, which may have held more than its plan: nothing binds an executor's device memory from
    outside). They are waited for first, with this candidate's executor still alive; if that frees the
    memory, the earlier candidate took it and this evaluation is run again (:class:`EarlierExecutorHeldMemory`),
    never judged for it. That happens once (``retried``)."""
    def kill_candidate() -> None:
        proc.kill()
        for p, lease in others:
            sup.pool.dispose(p, lease, start_spares=False)

    if sup.device.type != "cuda":
        kill_candidate()
        return CandidateFault("oom", "out of memory while the candidate's executor was alive", str(err)[-2000:])
    need = 2 << 30
    for t in earlier:
        t.join()
    baselines = getattr(sup, "baselines", None)
    if baselines is not None:
        baselines.wait_reaped()  # an earlier evaluation's baseline set: its memory back before anything is read
    before = sup.free_device_bytes()
    if earlier and not retried and before >= need:
        kill_candidate()
        raise EarlierExecutorHeldMemory(str(err)[-500:])
    kill_candidate()
    sup.pool.join()  # disposed executors (this evaluation's decoy among them) gone, their memory back
    free = sup.free_device_bytes()
    if free < need:
        raise HarnessError(f"the supervisor ran out of GPU memory with no candidate process alive: {err}") from err
    held, allowed = free - before, candidate_allowance(getattr(sup, "plan", None))
    g = lambda n: f"{n / 2**30:.1f} GiB"  # noqa: E731
    if allowed is None or held > allowed:
        share = f", more than the {g(allowed)} its plan allows" if allowed is not None else ""
    else:
        share = (f", no more than the {g(allowed)} its plan allows (a transient peak of its own, or the plan "
                 f"undercounting the trusted side)")
        logging.getLogger(__name__).warning("out of memory with the candidate within its plan: %s; %s",
                                            sup.plan.explain(), str(err)[-500:])
    return CandidateFault("oom", f"the candidate held {g(held)} of GPU memory{share}, and the trusted checks "
                          f"could not run ({g(free)} was free once its processes were gone)", str(err)[-2000:])


def candidate_allowance(plan) -> int | None:
    """What the memory plan lets a candidate's processes hold on the device: its executor (allocator cap and
    context) and its decoy's (a worker and the decoy's lent slot), with ``OOM_SLACK``; None without a plan."""
    if plan is None:
        return None
    return plan.worker_bytes + plan.decoy_bytes + OOM_SLACK
