"""The executor pool's wait for killed executors: on cuda, taking an executor waits for those still being reaped
only when the current memory plan has no room for what they may still hold (their memory and lent region)."""

import threading
from types import SimpleNamespace as NS

import torch

from kbenv.sandbox import process
from kbenv.sandbox.supervisor import ExecutorPool


def _pool(monkeypatch, device: str):
    sup = NS(device=torch.device(device), limits={"spawn_s": 1.0})
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
