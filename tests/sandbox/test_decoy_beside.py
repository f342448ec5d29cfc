"""The decoy phase beside correctness (``DecoyRun``): started at once where the fence waits for one process's work,
deferred to after correctness under the idle-probe fence (which waits for the whole GPU), and always on the
supervisor's side thread."""

import concurrent.futures
import threading
from types import SimpleNamespace as NS

from kbenv.sandbox.evaluation import DecoyRun


def _ev(kind: str):
    started = threading.Event()
    threads = []

    def decoy(run):
        threads.append(threading.current_thread().name)
        started.set()
        return {"noop_correct": False}
    side = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="kbenv-side")
    return NS(sup=NS(fence=NS(kind=kind), side=side), decoy=decoy), started, threads


def test_the_decoy_starts_beside_correctness_under_a_per_process_fence():
    for kind in ("cuda_process_lock", "sigstop"):
        ev, started, threads = _ev(kind)
        run = DecoyRun(ev)
        assert started.wait(5)  # before anyone asked for its result
        assert run.result() == {"noop_correct": False} and threads[0].startswith("kbenv-side")


def test_the_decoy_waits_for_correctness_under_the_idle_probe_fence():
    ev, started, threads = _ev("idle_probe")
    run = DecoyRun(ev)
    assert not started.wait(0.3)  # nothing runs beside correctness
    assert run.result() == {"noop_correct": False} and threads[0].startswith("kbenv-side")
    abandoned = DecoyRun(ev)
    abandoned.abandon()
    abandoned.join()  # never started: nothing to wait for
    assert len(threads) == 1
