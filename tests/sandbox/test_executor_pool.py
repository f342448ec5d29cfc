"""The executor pool's wait for killed executors: on cuda, taking an executor waits for those still being reaped
only when the current memory plan has no room for what they may still hold (their memory and lent region)."""

import os
import threading
from types import SimpleNamespace as NS

import torch

from kbenv.sandbox import process
from kbenv.sandbox.pool import ExecutorPool


def _pool(monkeypatch, device: str):
    sup = NS(device=torch.device(device), limits={"spawn_s": 1.0},
             baselines=NS(dying_bytes=lambda: 0, wait_reaped=lambda: None))
    pool = ExecutorPool(sup, spares=0)
    monkeypatch.setattr(pool, "_spawn", lambda trusted=False: NS(name="fresh"))
    monkeypatch.setattr(process, "await_ready", lambda p, limit: None)
    return pool


def _dying(pool, gate: threading.Event, lent_bytes: int) -> None:
    """An executor being reaped (its reaper blocks on ``gate``) whose lease owns a lent region."""
    t = threading.Thread(target=gate.wait, daemon=True)
    t.start()
    lease = NS(layout=NS(total_bytes=lent_bytes), owns_region=True, close=lambda: None)
    pool._reapers.append((t, lease, pool.executor_bytes + lent_bytes))


def test_take_waits_for_dying_executors_only_when_the_plan_has_no_room(monkeypatch):
    pool = _pool(monkeypatch, "cuda")
    waits = []
    real_join = pool.join
    monkeypatch.setattr(pool, "join", lambda wait=True: (waits.append(wait), real_join(wait=False)))
    gate = threading.Event()
    pool.set_room(10 << 30, 2 << 30)
    _dying(pool, gate, 1 << 30)  # 3 GiB may still be held
    assert pool.dying_bytes() == 3 << 30
    pool.take()
    pool.set_room(2 << 30, 2 << 30)  # a bigger problem: no room for it
    pool.take()
    assert waits == [False, True]
    gate.set()
    pool._reapers[0][0].join()
    assert pool.dying_bytes() == 0
    pool.take()
    assert waits[-1] is False


def test_take_never_waits_on_the_cpu(monkeypatch):
    pool = _pool(monkeypatch, "cpu")
    waits = []
    monkeypatch.setattr(pool, "join", lambda wait=True: waits.append(wait))
    gate = threading.Event()
    _dying(pool, gate, 1 << 40)
    pool.take()
    gate.set()
    assert waits == [False]


def test_the_decoys_executor_beside_correctness_counts_itself_and_dying_baseline_sets(monkeypatch):
    """The decoy's executor taken beside correctness uses the plan's room itself: executors and baseline sets still
    being reaped are waited for unless they fit the room beside it (else an out-of-memory of the trusted side could
    be judged the candidate's)."""
    pool = _pool(monkeypatch, "cuda")
    waits, reaped = [], []
    real_join = pool.join
    monkeypatch.setattr(pool, "join", lambda wait=True: (waits.append(wait), real_join(wait=False)))
    dying_sets = [0]
    pool.sup.baselines = NS(dying_bytes=lambda: dying_sets[0], wait_reaped=lambda: reaped.append(True))
    gate = threading.Event()
    pool.set_room(30 << 30, 2 << 30)
    _dying(pool, gate, 1 << 30)  # 3 GiB may still be held
    pool.take()  # the candidate's: 3 GiB dying fits 30 GiB of room
    pool.take(beside_bytes=26 << 30)  # the decoy's beside: 3 + 26 fits
    assert waits == [False, False] and not reaped
    pool.take(beside_bytes=28 << 30)  # 3 + 28 does not: wait for the executor and for the baseline sets
    assert waits[-1] is True and reaped == [True]
    dying_sets[0] = 10 << 30  # an old baseline set still dying counts too
    pool.take(beside_bytes=26 << 30)
    assert waits[-1] is True and len(reaped) == 2
    gate.set()


def test_a_timing_phase_pauses_only_started_spares():
    """A spare not yet started has no CUDA context and waits for its start frame before it touches the GPU: it goes
    on importing through a timing phase, so that it is ready for the next evaluation's decoy."""
    sup = NS(device=torch.device("cuda"), limits={"spawn_s": 1.0})
    pool = ExecutorPool.__new__(ExecutorPool)
    pool.sup, pool.paused = sup, {}
    paused = []

    def spare(pid, started):
        return NS(started=started, pause=lambda: (paused.append(pid), [pid])[1])
    pool.spares = [spare(11, True), spare(12, False), spare(13, True)]
    assert pool.pause_spares() == [11, 13]
    assert paused == [11, 13]


def test_the_baselines_start_beside_dying_processes_and_warm_up_after_them():
    """The timing phase's set-up: the baselines' processes started and their models built while disposed executors
    are still dying (nothing timed or autotuned), then every dying process waited for, then the warm-up (where
    torch.compile autotunes) and the fence's calibration."""
    from kbenv.sandbox.timing_phase import TimingPhase
    from kbenv.sandbox.result import EvalResult
    calls = []

    class Stop(Exception):
        pass

    def leases(*a, **k):
        calls.append("baselines.leases")
        raise Stop
    pool = NS(pause_spares=lambda: [], resume_spares=lambda pids: None,
              join=lambda wait=True: calls.append(f"pool.join(wait={wait})"))
    baselines = NS(ready=lambda st, layout, owner=None: calls.append("baselines.ready"),
                   join=lambda: calls.append("baselines.join"), leases=leases)
    sup = NS(release_memory=lambda: None, pool=pool, baselines=baselines, lanes=None,
             fence=NS(hold=lambda proc, t: calls.append("hold_candidate")))
    ev = NS(sup=sup, st=None, lease=NS(proc=None), layout=None, official_inputs=lambda: [], official_spec=([], []),
            device=torch.device("cuda"),
            problem=None, req=None, precision="fp32", eval_id="e")
    try:
        TimingPhase(ev).run(EvalResult.__new__(EvalResult))
    except Stop:
        pass
    assert calls == ["hold_candidate", "baselines.ready", "pool.join(wait=True)", "baselines.join",
                     "baselines.leases"]


def test_waiting_ahead_for_spares_reads_nothing_and_keeps_its_deadline(monkeypatch):
    """``await_starts`` (a lane's wait ahead, beside the evaluation's thread, ``kbenv.sandbox.preempt``): it returns
    once a started spare's first frame has arrived, leaving the frame to be read (by ``settle`` or a take); it
    waits no longer than its deadline for a spare that sends nothing; and ``wait_reaped`` keeps a deadline too."""
    import socket
    import time
    pool = _pool(monkeypatch, "cuda")
    quick, quick_peer = socket.socketpair()
    silent, _silent_peer = socket.socketpair()
    pool.spares = [NS(started=True, ready=False, sock=quick), NS(started=True, ready=True, sock=silent)]
    threading.Timer(0.3, lambda: quick_peer.sendall(b"ready-frame")).start()
    t0 = time.monotonic()
    pool.await_starts(t0 + 5.0)
    assert 0.25 <= time.monotonic() - t0 < 2.0  # until the frame came (the ready spare was not waited for)
    assert quick.recv(64, socket.MSG_PEEK) == b"ready-frame"  # unread
    pool.spares = [NS(started=True, ready=False, sock=silent)]
    t0 = time.monotonic()
    pool.await_starts(t0 + 0.3)
    assert 0.25 <= time.monotonic() - t0 < 1.0  # nothing came: the deadline
    # a spare this pool paused (a timing phase's set-up) sends nothing until resumed: not waited for; once resumed,
    # waited for again (SIGCONT to this test's own process stands for the resume)
    stopped = NS(started=True, ready=False, sock=silent, pause=lambda: [os.getpid()])
    pool.spares = [stopped]
    assert pool.pause_spares() == [os.getpid()]
    t0 = time.monotonic()
    pool.await_starts(t0 + 2.0)
    assert time.monotonic() - t0 < 0.2
    pool.resume_spares([os.getpid()])
    t0 = time.monotonic()
    pool.await_starts(t0 + 0.3)
    assert 0.25 <= time.monotonic() - t0 < 1.0
    gate = threading.Event()
    _dying(pool, gate, 1 << 20)
    t0 = time.monotonic()
    pool.wait_reaped(t0 + 0.3)
    assert 0.25 <= time.monotonic() - t0 < 1.0
    gate.set()
    pool.wait_reaped()


def test_a_killed_executor_counts_what_the_driver_says_it_holds(monkeypatch):
    """What a dying executor may still hold is what NVML reports its processes holding just after the kill (plus
    slack), so an executor that held little no longer keeps the next one waiting for its whole planned figure;
    where NVML cannot say, or lists none of its processes, the plan's figure stands."""
    from kbenv.sandbox import gpustate
    from kbenv.sandbox.gpustate import DYING_SLACK
    pool = _pool(monkeypatch, "cuda")
    pool.sup.fence = NS(release=lambda p: None)
    pool.set_room(4 << 30, 6 << 30)  # the plan: 6 GiB for one executor, 4 GiB of room
    gate = threading.Event()
    waits = []
    real_join = pool.join
    monkeypatch.setattr(pool, "join", lambda wait=True: (waits.append(wait), real_join(wait=False)))

    def proc(pids):
        return NS(pids=lambda: pids, signal_kill=lambda: None, kill=gate.wait, workdir="/nonexistent/kbenv-test")
    readings = [[(11, 1 << 30), (12, 512 << 20), (99, 40 << 30)]]  # pid 99: another process, not this one's
    monkeypatch.setattr(gpustate, "compute_processes", lambda index: readings[0])
    pool.dispose(proc([11, 12]))
    assert pool.dying_bytes() == (1 << 30) + (512 << 20) + DYING_SLACK
    pool.take()  # 1.75 GiB dying fits the 4 GiB of room: no wait
    assert waits == [False]
    pool.dispose(proc([13]))  # listed nowhere: the plan's 6 GiB
    readings[0] = None  # no NVML
    pool.dispose(proc([14]))
    assert pool.dying_bytes() == (1 << 30) + (512 << 20) + DYING_SLACK + 2 * (6 << 30)
    gate.set()
    real_join()
    assert pool.dying_bytes() == 0
    # NVML stopped answering (None) while the first was listed, and listed neither of the others: no figure of
    # when their contexts went
    reaped = pool.take_reaped()
    assert len(reaped) == 3 and all(r["context_gone_s"] is None for r in reaped), reaped


def test_a_killed_executor_lets_the_lanes_hold_go_once_its_processes_are_gone_and_says_how_long_that_took(
        monkeypatch):
    """The lane's hold (nothing of it may die while another lane times) goes as soon as the executor's processes
    are gone, their CUDA contexts with them, before its work directory is removed; how long each reaping took is a
    fact of the next evaluation (``take_reaped``), where the time the lanes wait for dying executors is explained."""
    from kbenv.sandbox import pool as pool_mod
    pool = _pool(monkeypatch, "cuda")
    order = []
    pool.sup.fence = NS(release=lambda p: None)
    pool.sup.lanes = NS(hold=lambda gpu, candidates: NS(release=lambda: order.append("hold released")))
    monkeypatch.setattr(pool, "refill", lambda start=True: None)
    monkeypatch.setattr(pool_mod.shutil, "rmtree", lambda path, ignore_errors: order.append("workdir removed"))
    import time as _time
    from kbenv.sandbox import gpustate
    t0 = _time.monotonic()  # NVML lists the executor's process (pid 7) for its first 0.1 s after the kill
    monkeypatch.setattr(gpustate, "compute_processes",
                        lambda index: [(7, 1 << 30)] if _time.monotonic() - t0 < 0.1 else [(99, 1 << 30)])
    proc = NS(pids=lambda: [7], signal_kill=lambda: None, kill=lambda: (_time.sleep(0.2), order.append("gone")),
              workdir="/nonexistent/kbenv-test")
    pool.dispose(proc)
    pool.join()
    assert order == ["gone", "hold released", "workdir removed"]
    (reaped,) = pool.take_reaped()
    assert 0.1 <= reaped["context_gone_s"] < 0.2 and reaped["context_gone_s"] < reaped["gone_s"] <= reaped["cleaned_s"] < 5
    assert pool.take_reaped() == []


def test_a_closed_baseline_sets_dying_bytes_are_what_nvml_reports_its_processes_holding(monkeypatch, tmp_path):
    """A baseline set is closed at every evaluation's end on cuda, and the next evaluation's executor waits for it
    to die unless the plan's room holds what it may still hold (``ExecutorPool.take``): that is what NVML reports
    its processes holding just after the kill (plus slack) and its lent region, as for a candidate's executor; the
    plan's whole figure only where NVML cannot say."""
    from kbenv.sandbox import gpustate
    from kbenv.sandbox.baselines import BaselineExecutors
    from kbenv.sandbox.gpustate import DYING_SLACK
    sup = NS(device=torch.device("cuda"), cache_dir=str(tmp_path), plan=NS(baseline_bytes=20 << 30), lanes=None,
             fresh_baselines=True)
    b = BaselineExecutors(sup, ("eager", "compile"))
    gate = threading.Event()

    def lease(pid):
        return NS(proc=NS(pids=lambda: [pid], signal_kill=lambda: None, kill=gate.wait), close=lambda: None)
    readings = [[(21, 2 << 30), (22, 3 << 30), (99, 40 << 30)]]  # pid 99: another process
    monkeypatch.setattr(gpustate, "compute_processes", lambda index: readings[0])
    b._leases, b._region = {"eager": lease(21), "compile": lease(22)}, NS(nbytes=1 << 30, close=lambda: None)
    b.close(keep_ahead=True, wait=False)
    assert b.dying_bytes() == (5 << 30) + DYING_SLACK + (1 << 30)  # not the plan's 20 GiB
    readings[0] = None  # no NVML: the plan's figure for the next set closed
    b._leases = {"eager": lease(23)}
    b.close(keep_ahead=True, wait=False)
    assert b.dying_bytes() == (5 << 30) + DYING_SLACK + (1 << 30) + (20 << 30)
    gate.set()
    b.join()
    assert b.dying_bytes() == 0
