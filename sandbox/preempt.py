"""Giving way: a lane lets another lane's timing phase have the GPU without waiting for its evaluation to end.

Without this, a lane waiting to time (``Lanes.timing``) waits until every other lane's evaluation has ended, since
each holds the GPU shared from its start to its end: on an H100 with three lanes that wait was 1-16 s per
evaluation, most of each evaluation's wall time (stop 39), and lanes barely beat one lane. Here each lane watches for
a lane waiting to time (``Lanes.wanted``) and, when one does, gives way at the next point where everything of it is
quiet, for as long as that timing phase lasts:

1. **Park.** Every thread of the lane that uses the GPU (the evaluation's, and the decoy's beside it) is registered
   (:meth:`Yielder.working`); each parks at its next checkpoint (:meth:`Yielder.checkpoint`: between correctness
   blocks, before a compile, between phases), where it has no work of its own queued on the GPU. A thread waiting for
   another thread of the lane, for a build, or for its executor's reply (:meth:`Yielder.idle`; since stop 45 its
   compile: an import that sleeps, an extension still building; since stop 46 a block of calls: a first call's
   Triton compile, a slow kernel, the executor then held mid-call) counts as parked. If they have not all parked
   within ``park_s`` (a long block), the attempt is given up and made again later: the other lane then waits as it
   did before, never longer. While they park, the lane waits ahead (``ahead()``, since stop 47) for what step 2
   waits for without touching what its threads use: its dying processes, and its started spares' contexts.
2. **Quiet.** The supervisor's ``quiet()`` makes every process of the lane quiet: processes being reaped are waited
   for (a dying context may still run kernels), started spares settle and are paused, and every live executor of
   the lane (the candidate's, the decoy's, the baselines') is held by the fence, which waits for the GPU work it
   submitted. A fence that cannot hold a candidate's process is that candidate's timeout, which sharing can cause
   and so is judged again alone (``lanes.sharing_could_cause``); the attempt is given up, and nothing else changes.
3. **Give way.** The evaluation's shared hold of the GPU is let go (``Lanes.giving_way``) and taken again behind
   every lane that waits to time; then the processes are resumed and the threads go on.

Nothing here decides a verdict: it only changes when a lane's untimed work runs. What could change is a deadline: a
lane that gives way pauses for the other lane's timing phase (seconds) inside its own phase's deadline (minutes);
a timeout that results is one sharing can cause, judged again alone.

Measured on an H100 (stop 41, the 16 known-good kernels, docs/results/h100-stop41.txt): at two lanes the timing
phases' waits for the other lane fell from 44.0 s to 25.2 s summed, while the lanes that gave way paused 23.4 s in
their own phases, so the pace stayed the same (11.8 against 11.6 evaluations/min); three lanes at a 1.5 s timing
budget ran at 13.0/min with it. A lane's quiet costs most where it must wait for its own dying processes.
"""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Callable


#: Checkpoints after which the thread reaches no other before its lane times or its evaluation ends: the timing
#: phase's set-up (its spares paused, its candidate held, its baselines built and warmed, then the lane's wait to
#: time) and the phase itself never give way.
NO_CHECKPOINT_AFTER = frozenset({"timing_setup"})


class Yielder:
    """One lane's giving way (see the module's docstring). ``quiet()`` makes the lane's processes quiet and returns
    the function that lets them go on; it raises if it cannot (the attempt is then given up)."""

    def __init__(self, lanes, quiet: Callable[[], Callable[[], None]], poll_s: float = 0.01, park_s: float = 2.0,
                 retry_s: float = 0.25, ahead: Callable[[float], None] | None = None):
        self.lanes, self.quiet, self.ahead = lanes, quiet, ahead
        self.poll_s, self.park_s, self.retry_s = poll_s, park_s, retry_s
        self._cv = threading.Condition()
        self._closing = False  # an attempt to give way is on: threads park at their checkpoints
        self.gave_way = 0  # times this lane let the GPU go (facts)
        self.gave_way_s = 0.0
        self.given_up = 0  # attempts given up (threads did not park in time, or the lane could not be made quiet)
        self.last_error = ""
        # where giving way's time goes, summed (a fact): waiting for the threads to park, making the lane quiet
        # (``quiet_lane`` adds its own steps: reaping, spares settling and pausing, fence holds, the sync), and
        # away (the other lane's timing phase and taking the GPU back)
        self.split_s: dict[str, float] = {}
        # where the threads that did not park were (a fact, by the last checkpoint each passed): what a given-up
        # attempt waited on, to be made parkable next (H100, stop 47: 2-16 attempts given up per 16 evaluations)
        self.unparked: dict[str, int] = {}
        self.not_quiet: dict[str, int] = {}  # attempts given up because quiet() raised, by the exception's type
        self._where: dict[int, str] = {}  # thread -> the last checkpoint it passed
        self._working_ids: dict[int, int] = {}  # the registered threads -> how many working() blocks each is in
        self._parked_ids: dict[int, int] = {}  # threads parked at a checkpoint or idle -> how many parks or idles
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="kbenv-lane-yielder", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------------------------------ the lane's threads
    @contextlib.contextmanager
    def working(self, where: str = "start"):
        """A thread of the lane that uses the GPU, from here to the block's end (it enters at a checkpoint)."""
        me = threading.get_ident()
        with self._cv:
            _count(self._working_ids, me, +1)
            self._where[me] = where
            self._wait_open()
        try:
            yield
        finally:
            with self._cv:
                # a thread that leaves while the lane gives way waits, parked, until it has: after this block the
                # evaluation lets its holds go and starts spares, which must not happen while the lane gives way
                self._wait_open()
                _count(self._working_ids, me, -1)
                if me not in self._working_ids:  # (a thread per decoy run: none is kept once it has left)
                    self._where.pop(me, None)
                self._cv.notify_all()

    def checkpoint(self, where: str = "") -> None:
        """A point where the calling thread has no GPU work of its own queued: it parks here while the lane gives
        way. Free when nobody waits to time. ``where`` names what the thread does next (a fact, where it does
        not park in time: :attr:`unparked`)."""
        if where:
            self._where[threading.get_ident()] = where
        if not self._closing:
            return
        with self._cv:
            self._wait_open()

    @contextlib.contextmanager
    def idle(self):
        """The calling thread waits with no GPU work of its own (for another thread of the lane, or a build): it
        counts as parked; on leaving it parks if the lane is giving way."""
        me = threading.get_ident()
        with self._cv:
            _count(self._parked_ids, me, +1)
            self._cv.notify_all()
        try:
            yield
        finally:
            with self._cv:
                _count(self._parked_ids, me, -1)
                self._wait_open()

    def _wait_open(self) -> None:
        """(With the condition held.) Parked until no attempt to give way is on."""
        me = threading.get_ident()
        while self._closing:
            _count(self._parked_ids, me, +1)
            self._cv.notify_all()
            try:
                self._cv.wait()
            finally:
                _count(self._parked_ids, me, -1)

    # -------------------------------------------------------------------------------------------- watching
    def _watch(self) -> None:
        while not self._stop.wait(self.poll_s):
            try:
                if self._working_ids and self.lanes.in_evaluation() and self.lanes.wanted() and not self._unparkable():
                    if not self.give_way():
                        self._stop.wait(self.retry_s)
            except Exception as e:  # noqa: BLE001 - the lane then keeps its hold, as without giving way
                self.given_up += 1
                self.last_error = f"{type(e).__name__}: {e}"[:300]
                self._stop.wait(self.retry_s)

    def give_way(self) -> bool:
        """One attempt (the watcher's; tests call it too): park, quiet, let the GPU go and take it again."""
        t0 = time.monotonic()
        with self._cv:
            self._closing = True
        if self.ahead is not None:  # while the threads park: what quiet() would wait for first (its own step
            try:  # then finds it done)
                self.ahead(t0 + self.park_s)
            except Exception:  # noqa: BLE001 - only a head start: quiet() waits for the same, and raises
                pass
            self.add_split("ahead", time.monotonic() - t0)
        with self._cv:
            parked = self._cv.wait_for(lambda: not self._unparked_ids(),
                                       timeout=max(0.0, t0 + self.park_s - time.monotonic()))
            for me in self._unparked_ids():  # where the threads that did not park were (a fact)
                where = self._where.get(me, "?")
                self.unparked[where] = self.unparked.get(where, 0) + 1
            # no registered thread: the evaluation is starting or has ended, outside what giving way covers
            parked = parked and bool(self._working_ids)
        self.add_split("park", time.monotonic() - t0)
        try:
            if not parked:
                self.given_up += 1
                self.last_error = (f"the lane's threads did not park within {self.park_s} s" if self._working_ids
                                   else "no evaluation thread was working")
                return False
            if not self.lanes.in_evaluation():  # the evaluation ended, or this lane went to time, meanwhile
                self.given_up += 1
                self.last_error = "the evaluation was no longer sharing the GPU"
                return False
            t_quiet = time.monotonic()
            try:
                resume = self.quiet()
            except Exception as e:  # noqa: BLE001 - the attempt is given up; what failed shows in the evaluation
                self.given_up += 1
                self.last_error = f"{type(e).__name__}: {e}"[:300]
                self.not_quiet[type(e).__name__] = self.not_quiet.get(type(e).__name__, 0) + 1
                return False
            finally:
                self.add_split("quiet", time.monotonic() - t_quiet)
            t_away = time.monotonic()
            try:
                if not self.lanes.may_give_way():  # a dying process of the lane still holds the GPU shared
                    self.given_up += 1
                    self.last_error = "a process of the lane was still being reaped"
                    return False
                with self.lanes.giving_way():
                    self.gave_way += 1
                    # the other lane takes the GPU alone now; giving_way's end waits until it has timed
            finally:
                resume()
                self.add_split("away", time.monotonic() - t_away)
            self.gave_way_s += time.monotonic() - t0
            return True
        finally:
            with self._cv:
                self._closing = False
                self._cv.notify_all()

    def _unparkable(self) -> bool:
        """Whether every registered thread has passed a checkpoint after which none follows (``NO_CHECKPOINT_AFTER``):
        an attempt then cannot succeed, and while it lasted (``park_s``) a thread leaving its work waited for it
        (:meth:`working`), its evaluation's end, and the lane waiting to time with it. H100, stop 50 (stop 49's code),
        three lanes: 9 attempts of 16 evaluations given up so, all at ``timing_setup``."""
        with self._cv:
            wheres = [self._where.get(me) for me in self._working_ids if not self._parked_ids.get(me)]
        return bool(wheres) and all(w in NO_CHECKPOINT_AFTER for w in wheres)

    def _unparked_ids(self) -> list[int]:
        """(With the condition held.) The registered threads neither parked nor idle: each thread counts once,
        whatever else parks or idles (a thread outside :meth:`working`, or one idle twice over)."""
        return [me for me in self._working_ids if not self._parked_ids.get(me)]

    def add_split(self, key: str, seconds: float) -> None:
        self.split_s[key] = self.split_s.get(key, 0.0) + seconds

    def facts(self) -> dict:
        """Counts and seconds since the lane started (the supervisor reports one evaluation's difference)."""
        return {"gave_way": self.gave_way, "gave_way_s": round(self.gave_way_s, 3), "given_up": self.given_up,
                "split_s": {k: round(v, 3) for k, v in dict(self.split_s).items()},  # (copies: the watcher adds)
                "unparked": dict(self.unparked), "not_quiet": dict(self.not_quiet)}

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5.0)


def _count(counts: dict, key, step: int) -> None:
    """A per-thread count (with the condition held): a thread leaves the dict when its count falls to 0."""
    n = counts.get(key, 0) + step
    if n > 0:
        counts[key] = n
    else:
        counts.pop(key, None)


def wait_ahead(sup, until: float, split: Callable[[str, float], None] | None = None) -> None:
    """What :func:`quiet_lane` waits for first, waited for while the lane's threads park (until ``until`` at most),
    touching nothing they use: the lane's processes being reaped, and its started spares' ready frames (read by
    nobody here). On an H100 (stop 47, three lanes, 28 give-ways) those two were 0.4 s of each give-way's 1.3-1.5 s
    hand-over, after the threads' park (0.4-0.9 s); at stop 48 the wait ahead was most of the park (24.1 of 28.5 s),
    so ``split`` is told each part's seconds (``ahead_reaped``, ``ahead_starts``)."""
    t0 = time.monotonic()
    sup.pool.wait_reaped(until)
    sup.baselines.wait_reaped(until)
    t1 = time.monotonic()
    sup.pool.await_starts(until)
    if split is not None:
        split("ahead_reaped", t1 - t0)
        split("ahead_starts", time.monotonic() - t1)


def quiet_lane(sup, fence_s: float = 2.0, trusted_fence_s: float = 60.0,
               split: Callable[[str, float], None] | None = None) -> Callable[[], None]:
    """Step 2 of the module's docstring, for the supervisor ``sup`` of a lane whose threads are parked: every process
    of it quiet, and its own context's work done. Returns what lets them go on (it raises, with everything it
    held let go, where it cannot). A candidate's process gets ``fence_s``, a baseline's a minute, so that no
    trusted process is lost to a candidate that slows the GPU (a lost one would be a harness fault). A lock the
    driver ends at its timeout gives the attempt up; one it does not end kills the process a second later
    (``ProcessLockFence``): that candidate's timeout, which sharing can cause, judged again alone.

    Why 2 s for a candidate's (10 s before stop 47): the candidate's processes not yet held here are those held
    mid-call or mid-import (since stops 45 and 46), and giving way is only worth it when it is quick. H100, stop
    47, three lanes: one such lock ran to the driver's 10 s timeout, and the lane waiting to time waited 10.3 s."""
    held: list = []
    paused: list[int] = []
    t = [time.monotonic()]

    def step(name: str) -> None:  # ``split(step, seconds)``: where the time goes (``Yielder.add_split``)
        now = time.monotonic()
        if split is not None:
            split(name, now - t[0])
        t[0] = now

    def resume() -> None:
        for p in held:
            sup.fence.release(p)
        sup.pool.resume_spares(paused)

    try:
        sup.pool.wait_reaped()  # a dying context may still run kernels: its hold of the GPU goes with it
        sup.baselines.wait_reaped()
        step("reaped")
        sup.pool.settle()  # no spare still creating its context
        step("spares_settle")
        paused.extend(sup.pool.pause_spares())
        step("spares_pause")
        for p in [*sup.pool.taken, *sup.baselines.started()]:
            if not sup.fence.holds(p):
                held.append(p)  # (released by resume() even where the hold raised: a partial stop is undone)
                sup.fence.hold(p, trusted_fence_s if p.trusted else fence_s)  # once its submitted GPU work ended
        step("fence_holds")
        if sup.device.type == "cuda":
            import torch
            torch.cuda.synchronize(sup.device)  # the supervisor's own work (its judging, its references)
        step("sync")
    except BaseException:
        resume()
        raise
    return resume


__all__ = ["Yielder", "quiet_lane", "wait_ahead"]
