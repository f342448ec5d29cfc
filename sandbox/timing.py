"""Paired timing on the supervisor's clock: candidate and baselines in alternating blocks of calls.

A block is one call per slot of an executor's lent region, each slot holding fresh inputs the supervisor wrote
just before the block, with the L2 cache evicted by the supervisor after writing them (so every call of the
block reads cold inputs, as in KernelBench's protocol). The block is one frame, which the executor runs back to
back with no read, reply or wake-up between two calls (its own cost per call is an ``as_strided`` per input:
``kbenv.sandbox.lent.Places``), so a kernel longer than that path keeps the GPU queue ahead of it and the block
is timed by the GPU, not by the CPU's jitter. The clock starts before the block is sent and stops when the fence
returns, so work the executor left queued or running after its reply is counted; the block's time over its
calls is one per-call figure. Rounds alternate the order (ABBA) of the candidate's block
and each baseline's block, so both see the same machine state; the speedup is the ratio of the best baseline's
typical time to the candidate's (:func:`typical_time`), and rounds continue until the median of paired ratios
has a tight confidence interval or the time budget is spent. The candidate's executor is held by the fence (stopped, and on cuda locked by the driver)
from the end of each of its blocks to the start of its next one, so it cannot run while a baseline is timed.

Nothing here is reported by the executor: the only facts are the supervisor's clock and the lent memory.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import statistics
import time

import torch


@dataclasses.dataclass(frozen=True)
class TimingPlan:
    """How long to time: warm-up rounds (not counted), then ``min_rounds`` to ``max_rounds`` rounds, stopping
    early once the paired ratio's relative 95% confidence half-width is at most ``target_rel_ci``, or when
    ``budget_s`` of wall time has been spent. After ``min_rounds``, a baseline whose typical time is more than
    ``prune_ratio`` times the fastest baseline's is timed only every few rounds (:class:`BaselineSchedule`, from
    ``pruned_every``): its blocks took most of the budget where it is far slower (H200, full size: eager LayerNorm
    8.2 ms a call against torch.compile's 0.46 ms, 1.8 s of a 3 s budget), so the rounds that decide the ratio get
    the time. It is still timed now and then, and timed every round again once it is within ``prune_ratio`` of the
    fastest, because the first rounds can mislead: on an H100 (stop 38) a fresh torch.compile baseline of problem
    23 ran its first five blocks at 2.7-2.8 ms a call against its usual 1.45, was never timed again, and eager
    (1.63 ms) became the denominator: the candidate was paid 1.20x where the other four evaluations paid
    1.08-1.10x.

    On cuda the block's fixed cost (:class:`BlockCalibration`) is measured again in the warm-up round and the first
    three counted rounds, then every ``calibrate_every`` rounds where an estimate costs one one-call block per
    trusted side (its long block is the round's own), and every ``cycled_calibrate_every`` rounds where it also
    times a cycled long block (few slots: :func:`calibration_calls`), which costs up to six calls a side. The
    candidate's own estimate (a cap on what its blocks lose) is taken in the same rounds. Why every round where it
    is cheap (stop 53): on an H100, problem 88 at full size (16 slots), one estimate spread 0.72-1.13 ms (p10-p90
    of 60, eager's process, ``benchmarks/intercept_spike.py``), and the figure removed is the median of the later
    half of a phase's estimates: with one every four rounds that was four or five estimates, a noise of about 0.1 ms
    on a 2.7 ms torch.compile block (4%, the CV 88 showed: 3.8% on the H200, stop 51). The cost is a one-call block per side
    a round (88: about 3 ms of a 40 ms round). Before stop 53 every calibration was on the every-fourth schedule:
    the fence's cost once took 2.1 s of the 37.1 s of timing of 16 back-to-back evaluations (H100, stop 36), when a
    calibration timed the fence seven times.

    The interval rule applies from ``interval_min_rounds`` counted rounds on (six paired ratios, six blocks of each
    order per side), never sooner: its half-width comes from the paired ratios' interquartile range, and from the
    three ratios of six rounds that range is small by chance often enough to end a phase on too few blocks for the
    lower quartiles the speedup is made of (H100: one of five evaluations of problem 23 at ``medium`` stopped after
    six rounds, stop 39; back-to-back rollouts stopped problems 1, 24, 39 and 47 after 6-10, stops 36 and 39).

    Nor before ``interval_min_s`` of timed rounds: the first few tenths of a second of a phase run in an unsettled
    machine state, the same for every round of it, so a tight interval says nothing about it. H100, stop 47,
    problem 23 at ``medium``, five evaluations: two stopped by the interval after 12 rounds (0.59 s) and paid
    1.093x and 1.091x; the three that ran 42-71 rounds paid 1.013-1.036x, and in those the first 4-6 rounds were
    the slow ones (torch.compile's blocks 5-7% slower, the block calibration's intercept 1.0-1.5 ms against its
    settled 0.5). The lower quartile of a side's blocks then comes from the settled rounds."""

    warmup_rounds: int = 1
    min_rounds: int = 5
    max_rounds: int = 150
    target_rel_ci: float = 0.01
    budget_s: float = 3.0
    prune_ratio: float = 1.5
    pruned_every: int = 3
    calibrate_every: int = 1
    cycled_calibrate_every: int = 4
    interval_min_rounds: int = 12
    interval_min_s: float = 1.2

    def stop(self, rounds: int, paired_rel_ci95: float, past_budget: bool, elapsed_s: float) -> str | None:
        """Why the rounds end after ``rounds`` counted ones and ``elapsed_s`` seconds of timed rounds (``interval``
        or ``budget``), or None to go on; the caller ends them at ``max_rounds`` itself."""
        if rounds < self.min_rounds:
            return None
        if (rounds >= self.interval_min_rounds and elapsed_s >= self.interval_min_s
                and paired_rel_ci95 <= self.target_rel_ci):
            return "interval"
        return "budget" if past_budget else None

    def calibrates(self, r: int, cycled: bool = False) -> bool:
        """Whether round ``r`` (warm-up rounds included) measures the block's fixed cost again: with ``cycled``,
        where the estimate would time a cycled long block (or for the candidate's own, reported estimate)."""
        every = self.cycled_calibrate_every if cycled else self.calibrate_every
        return r < self.warmup_rounds + 3 or r % max(every, 1) == 0

    @classmethod
    def for_device(cls, device: torch.device, **overrides) -> "TimingPlan":
        base = cls() if device.type == "cuda" else cls(warmup_rounds=1, min_rounds=2, max_rounds=2, budget_s=1.0)
        return dataclasses.replace(base, **overrides)


@dataclasses.dataclass
class Series:
    """Per-call seconds of one side, one entry per counted round it was timed in: ``raw_s`` as timed (a block's
    time over its ``calls``), and :attr:`per_call_s` with ``overhead_s``, the block's fixed cost
    (:class:`BlockCalibration`), removed (never more than half a block). ``rounds``: the counted round of each entry, where the side was not timed in
    every round (a pruned baseline, :class:`TimingPlan`); empty means one entry per round from the first."""

    name: str
    raw_s: list = dataclasses.field(default_factory=list)
    calls: int = 1
    overhead_s: float = 0.0
    rounds: list = dataclasses.field(default_factory=list)

    def add(self, round_index: int, seconds: float) -> None:
        self.rounds.append(round_index)
        self.raw_s.append(seconds)

    @property
    def round_ids(self) -> list[int]:
        return list(self.rounds) if self.rounds else list(range(len(self.raw_s)))

    @property
    def per_call_s(self) -> list[float]:
        per = self.overhead_s / self.calls
        return [x - min(per, x / 2) for x in self.raw_s]

    @property
    def median_ms(self) -> float:
        return 1e3 * statistics.median(self.per_call_s)

    @property
    def typical(self) -> tuple[float, float]:
        """The side's per-call seconds as the speedup uses them, and the absolute ~95% half-width: see
        :func:`typical_time`."""
        return typical_time(self.per_call_s, self.round_ids)


def lower_quartile(values: list[float]) -> tuple[float, float]:
    """The lower quartile of ``values`` (interpolated) and the absolute half-width of its distribution-free ~95%
    confidence interval (the order statistics ``m/4 -+ 1.96 sqrt(3m/16)``); inf with fewer than 3 values."""
    s = sorted(values)
    m = len(s)
    i = 0.25 * (m - 1)
    lo = int(i)
    q = s[lo] + (s[min(lo + 1, m - 1)] - s[lo]) * (i - lo)
    if m < 3:
        return q, math.inf
    h = 1.96 * math.sqrt(m * 0.25 * 0.75)
    return q, (s[min(m - 1, math.ceil(m * 0.25 + h))] - s[max(0, math.floor(m * 0.25 - h))]) / 2


def typical_time(per_call: list[float], rounds: list[int] | None = None) -> tuple[float, float]:
    """A side's typical per-call time: the mean, over the two orders a round can run its sides in (rounds
    alternate them), of that order's lower quartile; and the absolute ~95% half-width of it.

    Why a lower quartile: what disturbs a block adds time and never removes any (a CPU hiccup that lets the GPU
    queue run dry, the driver, the fence's own jitter), so a side's block times are skewed to the right of its
    undisturbed time, and by how much differs between processes and machines. Why per order: a side's time can
    depend on what ran just before it (the H200's eager baseline of problem 23: 6.7 or 7.3 ms by round parity), and
    weighing both orders equally cancels that whatever the number of rounds. On the H200's repeatability runs
    (issue 11: five evaluations each of problems 23, 88, 40 and dlrm/2, in five calls over two stops) this figure's
    ratio spread less between evaluations than the median of paired ratios in 11 of 14 problem-runs (dlrm/2, stop
    28: CV 1.9% against 4.0%; 88: 1.1-2.6% against 2.2-4.6%), and its means agreed with the median's within their
    noise. A block-level shortcut cannot buy a low quartile: every round re-checks a secret quarter of the
    candidate's calls (``TimingPhase._recheck``). ``rounds``: each entry's round, whose parity is its order
    (default: one entry per round)."""
    if len(per_call) < 2:
        return (per_call[0], math.inf) if per_call else (math.nan, math.inf)
    rounds = range(len(per_call)) if rounds is None else rounds
    orders = [[x for x, r in zip(per_call, rounds) if r % 2 == parity] for parity in (0, 1)]
    if not all(orders):  # every entry of one order: that order's figure alone
        return lower_quartile(orders[0] or orders[1])
    (a, ha), (b, hb) = lower_quartile(orders[0]), lower_quartile(orders[1])
    return (a + b) / 2, math.hypot(ha, hb) / 2


@dataclasses.dataclass(frozen=True)
class Speedup:
    """The timing phase's answer: ``ratio`` = the fastest baseline's typical time over the candidate's
    (:func:`typical_time`), ``rel_ci95`` its relative ~95% half-width (the two sides' combined), and
    ``paired_rel_ci95`` the half-width of the median of paired ratios (two consecutive rounds each), which
    decides when the rounds may stop (:attr:`TimingPlan.target_rel_ci`): it follows how steadily the two sides
    compare under the same machine state, and it settles in a few rounds for long kernels."""

    ratio: float
    rel_ci95: float
    paired_rel_ci95: float
    best: str


def fastest(series: dict) -> str:
    """The baseline a speedup is against: the one of ``series`` (name -> :class:`Series`) with the least typical
    time (a side with no entry yet, as in the warm-up rounds, last)."""
    typical = {k: s.typical[0] for k, s in series.items()}
    return min(typical, key=lambda k: typical[k] if not math.isnan(typical[k]) else math.inf)


def speedup(cand: Series, series: dict) -> Speedup:
    best = series[fastest(series)]
    (vb, hb), (vc, hc) = best.typical, cand.typical
    ratio = vb / vc if vc > 0 else math.nan
    rel = math.hypot(hb / vb, hc / vc) if vb > 0 and vc > 0 else math.inf
    # paired by round: the rounds both sides were timed in (all of them but where the best was once pruned)
    b, c = dict(zip(best.round_ids, best.per_call_s)), dict(zip(cand.round_ids, cand.per_call_s))
    common = sorted(set(b) & set(c))
    pairs = [(b[i] + b[j]) / (c[i] + c[j]) for i, j in zip(common[0::2], common[1::2])
             if c[i] + c[j] > 0] or [b[i] / c[i] for i in common if c[i] > 0]  # (one round: its own)
    paired = median_ci(pairs)[1] if pairs else math.inf
    return Speedup(ratio, rel, paired, best.name)


def settling(sides: list, first: int = 4) -> dict:
    """Each side's median block time over its first ``first`` counted rounds against its median over the rest, as
    timed (a fact, where a side has at least twice ``first``): above 1 where the phase's start ran slow. H100, stop
    47, problem 23 at ``medium``: torch.compile's first rounds 5-7% slower, the candidate's up to 5%; what the
    interval rule's ``interval_min_s`` and the lower quartile are there for, watched in every result."""
    out = {}
    for s in sides:
        if len(s.raw_s) >= 2 * first:
            late = statistics.median(s.raw_s[first:])
            if late > 0:
                out[s.name] = round(statistics.median(s.raw_s[:first]) / late, 4)
    return out


def worth_timing(series: dict, active: list, ratio: float) -> list:
    """The baselines of ``active`` worth timing every round: those whose typical time (the figure :func:`speedup`
    picks the fastest baseline by) is within ``ratio`` of the fastest one's (:attr:`TimingPlan.prune_ratio`). One
    baseline always stays. The others are timed only every few rounds (:class:`BaselineSchedule`)."""
    typical = {name: series[name].typical[0] for name in active}
    fastest = min(typical.values())
    return [name for name in active if typical[name] <= ratio * fastest]


class BaselineSchedule:
    """Which baselines a round times (:class:`TimingPlan`): all of them until ``min_rounds``; then those within
    ``prune_ratio`` of the fastest every round, and each slower one only every ``period`` rounds, its period
    ``pruned_every`` times its distance from the fastest in steps of ``prune_ratio`` (made odd, so that its rounds
    alternate their order). A far slower baseline then costs at most about half a block of the fastest per round
    (eager LayerNorm, 18x the fastest: one block in 37 rounds), while one slowed for a few rounds (a transient) is
    timed again soon enough to be timed every round again once its figures say so."""

    def __init__(self, plan: TimingPlan, names: list):
        self.plan = plan
        self.names = list(names)
        self.active = set(self.names)
        self.due: dict[str, int] = {}  # a slower baseline -> the counted round it is timed in next
        self.pruned: dict[str, int] = {}  # baseline -> counted rounds after which it was first timed now and then
        self.restored: dict[str, int] = {}  # baseline -> counted rounds after which it was timed every round again

    def timed(self, counted: int) -> list:
        """The baselines timed in the counted round ``counted`` (negative: a warm-up round, every one)."""
        return [n for n in self.names if n in self.active or counted < 0 or self.due.get(n) == counted]

    def after_round(self, counted: int, series: dict) -> None:
        """After the counted round ``counted`` (every side's figures in ``series``)."""
        rounds = counted + 1
        for n in self.names:  # a slower baseline timed in this round: its next round
            if n not in self.active and self.due.get(n) == counted:
                self.due[n] = counted + self.period(n, series)
        if rounds < self.plan.min_rounds or len(self.names) < 2:
            return
        keep = set(worth_timing(series, self.names, self.plan.prune_ratio))
        for n in self.names:
            if n in self.active and n not in keep:
                self.active.discard(n)
                self.pruned.setdefault(n, rounds)
                self.due[n] = counted + self.period(n, series)
            elif n not in self.active and n in keep:
                self.active.add(n)
                self.restored[n] = rounds
                self.due.pop(n, None)

    def period(self, name: str, series: dict) -> int:
        fastest = min(series[n].typical[0] for n in self.names)
        steps = max(1, math.ceil(series[name].typical[0] / (fastest * self.plan.prune_ratio))) if fastest > 0 else 1
        p = self.plan.pruned_every * steps
        return p if p % 2 else p + 1


class PhaseSplit:
    """Wall seconds of a phase by part (the timing phase: inputs written, outputs poisoned and L2 flushed, each
    side's blocks, re-checks, the fence's calibration; what comes before its first block; the decoy run):
    ``with split("inputs"): ...``. A fact, so that the share of a phase each part takes is known; it decides
    nothing."""

    def __init__(self):
        self._s: dict[str, float] = {}

    @contextlib.contextmanager
    def __call__(self, part: str):
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self._s[part] = self._s.get(part, 0.0) + time.perf_counter() - t0

    def seconds(self) -> dict[str, float]:
        return {k: round(v, 4) for k, v in self._s.items()}


def median_ci(values: list[float]) -> tuple[float, float]:
    """Median and the relative half-width of its ~95% confidence interval (1.57 IQR / sqrt(n), as notched
    box plots use); inf with fewer than 3 values."""
    med = statistics.median(values)
    if len(values) < 3 or med <= 0:
        return med, math.inf
    q = statistics.quantiles(values, n=4)
    return med, 1.57 * (q[2] - q[0]) / math.sqrt(len(values)) / med


def flush_l2(device: torch.device, _buf={}) -> None:
    """Evict the L2 with a 256 MiB write of the supervisor's own (KernelBench's flush), outside any block. First
    every persisting L2 line is made normal again (``cuCtxResetPersistingL2Cache``): a candidate's access-policy
    window would otherwise keep lines of the lent inputs resident through the flush, and the supervisor's writes of
    the next block's inputs would land in them warm."""
    if device.type != "cuda":
        return
    buf = _buf.get(str(device))
    if buf is None:
        buf = _buf[str(device)] = torch.empty(32 * 1024 * 1024, dtype=torch.int64, device=device)
    torch.cuda.synchronize(device)
    _reset_persisting_l2()
    buf.fill_(1)
    torch.cuda.synchronize(device)


def _reset_persisting_l2(_fn=[]) -> None:
    if not _fn:
        import ctypes
        try:
            fn = ctypes.CDLL("libcuda.so.1").cuCtxResetPersistingL2Cache
            fn.argtypes, fn.restype = [], ctypes.c_int
        except (OSError, AttributeError):
            fn = None  # no driver API for it (then no persisting lines either)
        _fn.append(fn)
    if _fn[0] is not None:
        _fn[0]()


def time_block(lease, fence, deadline, hold_timeout_s: float, overhead_s: float = 0.0, slots=None) -> float:
    """One call per slot (``slots``: these only, default all) on the supervisor's clock, sent as one block, ended
    by the fence's completion (on cuda the driver lock of the executor's CUDA processes, found before the block);
    the executor is then held, and a CUDA process that appeared during the block is locked too. Seconds per call,
    after removing ``overhead_s`` (at most half the block): a fixed cost per block measured on a trusted
    executor (:class:`BlockCalibration`, :func:`fence_overhead`), never on the candidate's."""
    ks = list(range(len(lease.layout.slots))) if slots is None else list(slots)
    n = len(ks)
    pids = fence.prepare(lease.proc)
    t0 = time.perf_counter()
    lease.call_block(ks, deadline)
    fence.complete(lease.proc, pids, hold_timeout_s)
    t1 = time.perf_counter()
    fence.hold(lease.proc, hold_timeout_s)
    return (t1 - t0 - min(overhead_s, (t1 - t0) / 2)) / n  # never more than half a block: a tiny block stays timed


def fence_overhead(lease, fence, repeats: int = 7) -> float:
    """The fixed cost the fence adds to a block, in seconds: the least time to fence an idle trusted executor
    (the lock's driver call and its thread). Measured on a baseline's process, so no candidate can inflate it.
    The timing phase's figure for blocks of one call (:class:`BlockCalibration`): the least of all its
    measurements (a figure taken while the driver was slow would shorten every block by too much, and the
    candidate's, the shorter, most: H200, problem 40, 3.8 ms once against 0.4-0.8 ms usually)."""
    best = float("inf")
    for _ in range(repeats):
        fence.release(lease.proc)
        pids = fence.prepare(lease.proc)
        t0 = time.perf_counter()
        fence.complete(lease.proc, pids, 10.0)
        best = min(best, time.perf_counter() - t0)
        fence.hold(lease.proc, 10.0)
    fence.release(lease.proc)
    return best


class BlockCalibration:
    """The fixed cost of a timed block, measured on the trusted baselines' executors: a block of n calls takes
    ``c + n t``, and the speedup is a ratio of the ``t``, the time a call takes, whatever the lend share made n.
    Each trusted side has its own ``c`` removed from its own blocks (:meth:`side_s`); the candidate's blocks have the
    compared baseline's removed, never more than the candidate's own estimate allows (:meth:`candidate_s`).

    Why more than the fence's cost: on an H100 (stop 43, problems 40 and dlrm/2 at the 1/32 and 1/8 lend shares,
    4-10 and 16-32 slots) every side's per-call time fell with more slots, by a fixed ~0.9-1.3 ms per block
    (the message, the executor's wake-up, the first launch after the driver's unlock, the fence), of which the
    fence's lock cost removed only 0.13-0.17 ms; the rest, over few calls, pulled the ratio towards 1 (dlrm/2:
    1.28-1.32x at 10 slots, 1.39-1.47x at 32). Measured as the intercept of a trusted side's two blocks of the
    same round: its full block (n calls, ``T_n``) and, after the round with the L2 evicted again, a block of its
    first call alone (``T_1``): ``c = (n T_1 - T_n) / (n - 1)``. A side's figure is the median of the later half
    of its estimates in the phase (a disturbed one-call block would shorten every block by too much; the first
    rounds run unsettled); with one slot there is no slope to tell ``c`` from ``t``, and the fence's cost
    (:func:`fence_overhead`, the least measured) is removed as before. With it (H100, stop 44, host B): dlrm/2
    1.634x at 10 slots and 1.648x at 32, 40 1.101x at 4 and 1.085x at 16, against the same host's in-process truth
    by CUDA events (``benchmarks/slot_bias.py``).

    Why per side, and the least for the candidate (since stop 48): ``c`` belongs to a process, not to the path.
    Until then it was measured on the fastest trusted side alone and removed from every side. On an H100 (stop 48,
    the honest 88 under three lanes, 6 calls a block) one evaluation's torch.compile process had every estimate at
    0.75-0.80 ms (0.42-0.50 in five others): removed from the candidate's blocks too, it put the candidate under
    the physical floor (paid 0 as ``impossible_speed``), and where no floor catches it such an error pays a speedup
    that is not there. A slow ``c`` of one baseline now stays that baseline's.

    Why the compared baseline's for the candidate, capped by its own (since stop 54; :meth:`candidate_s`): the least
    trusted figure (stops 48-53) is never gameable, but it charges a candidate the difference wherever the compared
    baseline's process has the larger fixed cost, and which side has it moves from one evaluation to the next. On an
    H200 (stop 51, one lane, full size) torch.compile's was the larger in most evaluations (23: 1.41-1.66 ms against
    eager's 1.06-1.22), and the least rule paid the honest 23 0.955-1.009x (CV 2.1%); the same records with the
    compared baseline's own figure removed from the candidate's blocks read 0.998-1.009x (CV 0.4%), and 88's mean
    1.01x against 0.94x as paid. Removing the same figure from both sides of the ratio is what makes them like
    measurements: its noise moves both. On an H100 (stop 53) the honest candidates' own estimates lay at or above
    the compared baseline's (23: 1.80 ms against eager's 1.08; 19: 0.98 against 0.90), where the cap does nothing.

    What a candidate can do about it: nothing to the trusted figures (its processes are held while a baseline is
    measured). Its own estimate only ever lowers what is removed from its blocks: its executor can tell a one-call
    block from a full one and run it slow (known-bad ``23:inflate_own_intercept``), which earns the compared
    baseline's figure and no more, what an honest candidate whose fixed cost is at least the baseline's is removed
    anyway. The most shaping can earn over an honest twin is the compared baseline's figure less the twin's true
    fixed cost, over the block's calls (the twin's own estimate is removed where it is the lower); a fixed cost
    really lower than the baseline's (a faster wake-up of its executor) is credited, as it should be."""

    def __init__(self, fence_s: float):
        self.fence_s = fence_s  # the least fence cost measured so far (blocks of one call)
        self.estimates: dict[str, list[float]] = {}  # trusted side -> its estimates, in the order taken
        self.long_calls: dict[str, int] = {}  # trusted side -> the calls of its latest estimate's longer block
        self.own: list[float] = []  # the candidate's own estimates (a cap on what is removed: measure_own)

    def side_s(self, name: str) -> float:
        """What is removed from the trusted side ``name``'s blocks: the median of the later half of its estimates
        (all of them up to two); the fence's cost before it has any. The first rounds, where the estimates are
        taken most often (:meth:`TimingPlan.calibrates`), run unsettled: H100, stop 47, a phase's first four or five
        estimates 1.0-1.5 ms, its later ones 0.4-0.6 ms (problems 23 and 88)."""
        est = self.estimates.get(name)
        if not est:
            return self.fence_s
        return settled(est)

    def side_se(self, name: str) -> float:
        """The standard error of :meth:`side_s` (:func:`settled_se`)."""
        return settled_se(self.estimates.get(name) or [])

    def own_upper_s(self) -> float | None:
        """The upper end of the ~95% interval of the candidate's own figure (the median of the later half of its
        estimates, plus 1.96 :func:`settled_se`); None before any estimate."""
        if not self.own:
            return None
        return settled(self.own) + 1.96 * settled_se(self.own)

    def candidate_rule(self, best: str) -> str:
        """Which figure :meth:`candidate_s` removes for the compared baseline ``best``: ``compared`` (its own),
        ``own`` (the candidate's own estimate's upper end, where that is the lower), or ``least`` (the least trusted
        side's, where the compared baseline or the candidate has no estimate: one slot and nothing to cycle, a
        baseline pruned before its first calibration, the CPU)."""
        own = self.own_upper_s()
        if not self.estimates.get(best) or own is None:
            return "least"
        return "own" if own < self.side_s(best) else "compared"

    def candidate_s(self, best: str) -> float:
        """What is removed from the candidate's blocks, compared with the baseline ``best``: that baseline's own
        figure, never more than the upper end of the candidate's own estimate's interval (so that two estimates of
        one fixed cost do not make it the lesser of two noisy figures); the least trusted figure without both
        (:meth:`candidate_rule`)."""
        rule = self.candidate_rule(best)
        return {"compared": self.side_s(best), "own": self.own_upper_s(), "least": self.least_s}[rule]

    def uncertainty(self, best: str, cand_s: float, best_s: float, n: int) -> tuple[float, float]:
        """What the removed intercepts add to the speedup's uncertainty, relative to it, with ``cand_s`` and
        ``best_s`` the candidate's and the compared baseline's per-call seconds over blocks of ``n`` calls:

        - the ~95% half-width from the estimates' noise, reported beside the speedup's interval, which leaves it out.
          Where one figure is removed from both sides (:meth:`candidate_rule` ``compared``) its error moves both
          per-call times and mostly cancels in the ratio: ``se (1/cand_s - 1/best_s) / n``. Otherwise the two
          figures' errors add, each divided among the block's calls (measured on an H100, stop 50, under the least
          rule: it matched the spread under three lanes, 23: 14-23% against 0.847-1.052x, and was about twice the
          spread with one lane);
        - the gap: how much more a call the candidate kept than the baseline had removed (the baseline's own
          figure over the candidate's), relative to the candidate's call: 0 under ``compared``; where the
          candidate's true fixed cost is the baseline's, its speedup is understated by about that much. Reported.

        Why: under lanes a block has few calls (23 at full size: 2 against 5 with one lane; an estimate at two calls
        is 2 T_1 - T_2), and on an H100 (stop 50, three lanes) the honest 23 was paid 0.847-1.052x, 1.00x alone,
        while each evaluation reported an interval of 4-8% and the gap read 16-24% in three of four. Both are 0
        without estimates (one slot and nothing to cycle: :func:`calibration_calls`) or without a per-call time."""
        measured = {k: v for k, v in self.estimates.items() if v}
        if n < 1 or not measured or cand_s <= 0 or best_s <= 0:
            return 0.0, 0.0
        rule = self.candidate_rule(best)
        if rule == "compared":
            return 1.96 * self.side_se(best) * abs(1 / cand_s - 1 / best_s) / n, 0.0
        cand_se = settled_se(self.own) if rule == "own" else self.side_se(min(measured, key=self.side_s))
        half = 1.96 * math.hypot(cand_se / (n * cand_s), self.side_se(best) / (n * best_s))
        gap = max(0.0, self.side_s(best) - self.candidate_s(best)) / (n * cand_s) if best in measured else 0.0
        return half, gap

    def _measured(self) -> list[float]:
        """Each trusted side's figure (:meth:`side_s`), for the sides with an estimate."""
        return [self.side_s(k) for k, v in self.estimates.items() if v]

    @property
    def least_s(self) -> float:
        """The least of the trusted sides' figures (the fence's cost before any estimate): what the candidate's blocks
        had removed until stop 53, and still where :meth:`candidate_rule` has no other (``least``)."""
        measured = self._measured()
        return min(measured) if measured else self.fence_s

    def measure_own(self, lease, per_call_s: float, fence, device, deadline, hold_timeout_s: float, n: int) -> None:
        """The candidate's own intercept, estimated as a trusted side's is (its one-call block against the round's
        block of ``n``): a cap on what :meth:`candidate_s` removes from its blocks, never a figure removed for its
        own sake. Its executor can tell a one-call block from a full one and shape it; shaped up, the cap stops at
        the compared baseline's figure; shaped down, it lowers its own speedup. A failure here is the candidate's,
        as in its own blocks."""
        if n < 2:
            return
        flush_l2(device)
        fence.release(lease.proc)
        one = time_block(lease, fence, deadline, hold_timeout_s, slots=[0])
        self.own.append(intercept(n, one, per_call_s))

    def measure(self, trusted: dict, per_call: dict, fence, device, deadline, n: int, m: int | None = None) -> float:
        """One estimate for each of the ``trusted`` leases (name -> lease), whose blocks of ``n`` calls took
        ``per_call`` seconds a call this round (as timed; their inputs still in place, their executors held): its
        one-call block timed now, against a longer block: the round's own where ``m`` is ``n``, else one timed now
        that cycles over the ``n`` slots, of up to ``m`` calls (:func:`calibration_calls`) and about
        :data:`CYCLED_BLOCK_S` of the side's calls (:func:`cycled_calls`). With ``m`` under 2, the fence's cost
        measured again instead. Leaves the executors held; returns the least trusted figure."""
        m = n if m is None else m
        if m < 2:
            lease = trusted[min(trusted, key=lambda k: per_call[k])]
            self.fence_s = min(self.fence_s, fence_overhead(lease, fence, repeats=1))
            fence.hold(lease.proc, 10.0)
            return self.least_s
        for name, lease in trusted.items():
            flush_l2(device)
            fence.release(lease.proc)
            one = time_block(lease, fence, deadline, 60.0, slots=[0])
            k, long = n, per_call[name]
            if m != n and (k := cycled_calls(m, n, per_call[name])) != n:
                flush_l2(device)
                fence.release(lease.proc)
                long = time_block(lease, fence, deadline, 60.0, slots=[j % n for j in range(k)])
            self.long_calls[name] = k
            self.estimates.setdefault(name, []).append(intercept(k, one, long))
        return self.least_s


def intercept(k: int, one_s: float, per_call_s: float) -> float:
    """A block's fixed cost from a one-call block (``one_s``) and a block of ``k`` calls (``per_call_s`` a call):
    ``(k T_1 - T_k) / (k - 1)``, never negative."""
    return max(0.0, k * (one_s - per_call_s) / (k - 1))


def settled(estimates: list[float]) -> float:
    """The median of the later half of a phase's estimates (all of them up to two): its first rounds run
    unsettled (:meth:`BlockCalibration.side_s`)."""
    return statistics.median(estimates[len(estimates) // 2:])


def settled_se(estimates: list[float]) -> float:
    """The standard error of :func:`settled` (0 with fewer than three estimates in the later half): their spread as a
    median absolute deviation (1.4826 MAD, so that one disturbed estimate does not set it), times 1.2533 for a
    median, over the square root of their count."""
    late = estimates[len(estimates) // 2:]
    if len(late) < 3:
        return 0.0
    mid = statistics.median(late)
    mad = statistics.median(abs(x - mid) for x in late)
    return 1.2533 * 1.4826 * mad / math.sqrt(len(late))


CALIBRATION_CALLS = 6  # the most calls of the calibration's long block where its slots are cycled
FEW_CALLS = 3  # blocks of at most this many calls have their slots cycled for it
CYCLED_BLOCK_S = 0.010  # about how long a cycled block's calls take, at most


def cycled_calls(m: int, n: int, per_call_s: float) -> int:
    """The calls of a cycled calibration block for a side whose calls take ``per_call_s``: up to ``m``, as many as
    take about :data:`CYCLED_BLOCK_S`, and never fewer than ``n`` (then the round's own block serves) nor than 2.
    Why a cap by time: the intercept matters where a block's calls are short beside it (about 1 ms a block); where
    they are long it is a small part of the block, and the cycled block costs the budget that decides the ratio.
    H200, stop 51, 23 at full size with one lane (2 slots, 5 ms a call): six-call blocks took 0.62-0.75 s of each
    3 s timing phase, for an intercept that was 11% of a block."""
    fit = int(CYCLED_BLOCK_S / per_call_s + 1e-6) if per_call_s > 0 else m
    return max(n, 2, min(m, fit))


def calibration_calls(n: int, slot_bytes: int, l2_bytes: int) -> int:
    """The calls of a trusted side's long calibration block (:meth:`BlockCalibration.measure`), for blocks of ``n``
    calls over slots of ``slot_bytes`` of inputs each: ``n`` (the round's own block), or :data:`CALIBRATION_CALLS`
    cycling over the ``n`` slots where there are :data:`FEW_CALLS` or fewer and they together hold at least twice the L2
    (``l2_bytes``), so that a slot's inputs are evicted before its next call as surely as in a block of fresh
    slots. Only a trusted side may repeat a slot in a block: it has no cache keyed by its inputs, and a
    candidate's block repeats none (a repeated slot would let it return its last output).

    Why: the estimate ``(m T_1 - T_m) / (m - 1)`` is the difference of two noisy blocks, its noise about
    ``sqrt(m^2 + 1) / (m - 1)`` times a block's, 2.2 at ``m`` = 2 and 1.2 at 6. Under three lanes a lane's lend
    share leaves few slots (H100, stop 50, 23 at full size: 2 calls a block against 5 alone), and there the
    removed intercepts spread the honest 23 over 0.847-1.052x (1.00x alone), with ``intercept_rel_ci95`` at 11-23%
    (3-5% alone). With one slot there was no estimate at all, only the fence's cost. Not above three calls: the
    cycled block is timed on top of the round's (6 calls per trusted side per calibration; 23 at full size takes
    milliseconds a call, and the rounds that decide the ratio share the budget), for a gain that falls fast
    (1.6 at three calls, 1.3 at five)."""
    if n > FEW_CALLS or n * slot_bytes < 2 * l2_bytes:
        return n
    return CALIBRATION_CALLS
