"""The executor holds no secret, cannot tell one call from another, and nothing it says passes a candidate.

Each test names the class of attack it stands for; the known-bad suite (``problems/*/solutions/*/wrong``) holds a
candidate of each class that is replayed through the full path.
"""

import math
import os
import textwrap
import time

import pytest

from kbenv.rewards.verdict import timing_checks
from kbenv.sandbox import decoy, protocol
from kbenv.sandbox.process import ExecutorProcess
from kbenv.sandbox.result import EvalRequest

from test_faults import GOOD, PID, with_forward


def test_executor_frames_carry_no_secret_and_every_call_is_one_of_the_slot_frames(supervisor, monkeypatch):
    """Correctness trials, broader domains, fresh inputs, warm-ups, timed and re-checked calls: identical frames."""
    sent, sizes = [], {}  # sizes: per executor process, the sizes of the blocks it was sent
    real = ExecutorProcess.send

    def spy(self, obj):
        if not self.trusted:
            sent.append(obj)
            if obj.get("type") == "block":
                sizes.setdefault(id(self), set()).add(len(obj["calls"]))
        return real(self, obj)
    monkeypatch.setattr(ExecutorProcess, "send", spy)
    r = supervisor.evaluate(EvalRequest(problem=PID, candidate=GOOD))
    assert r.verdict == "pass", (r.category, r.reason, r.error)
    kinds = {m["type"] for m in sent}
    assert kinds <= {"start", "setup", "block", "exit"}, kinds
    blocks = [m for m in sent if m["type"] == "block"]
    assert all(set(m) == {"type", "calls"} for m in blocks)
    assert all(len(n) == 1 for n in sizes.values()), sizes  # a process's blocks: one call per slot, every time
    calls = [c for m in blocks for c in m["calls"]]
    assert all(set(c) == {"inputs", "outputs"} for c in calls)
    distinct = {repr(m) for m in calls}
    assert len(calls) > len(distinct) and len(distinct) <= r.facts["slots"]  # the same few frames, over and over
    setup = next(m for m in sent if m["type"] == "setup")
    assert not {"seed", "domain", "positions", "secret", "suppress_custom"} & set(setup)


@pytest.mark.parametrize("entry", [
    {"claims": "all good"},
    {"claims": [["verdict", "pass"]]},
    {"claims": [None] * 10_000},
    {},
    "done",
    {"claims": [["ipc", b"short", 0]]},
    {"claims": [["ipc", "x" * 64, 0]]},
    {"claims": [["ipc", b"h" * 64, -8]]},
    {"claims": [["ipc", b"h" * 64, 1 << 60]]},
    {"claims": [["ipc", b"h" * 64, 0.5]]},
    {"claims": [["lent", -256]]},
    {"claims": [["lent", True]]},
])
def test_forged_replies_are_protocol_violations(entry):
    with pytest.raises(protocol.ProtocolViolation):
        protocol.parse_dones({"type": "dones", "dones": [entry]}, [1])


@pytest.mark.parametrize("frame", [
    {"type": "reply", "dones": [{"claims": [None]}]},
    {"type": "dones", "dones": "all"},
    {"type": "dones", "dones": []},
    {"type": "dones", "dones": [{"claims": [None]}] * 3},  # more replies than calls
    {"type": "dones", "dones": [{"claims": [None]}]},  # fewer, and none failed: calls skipped
    {"type": "dones", "dones": [{"error": "x", "category": "runtime"}, {"claims": [None]}]},  # on past a failure
])
def test_a_block_reply_that_does_not_answer_its_calls_is_a_protocol_violation(frame):
    with pytest.raises(protocol.ProtocolViolation):
        protocol.parse_dones(frame, [1, 1])


def test_an_executor_that_claims_a_harness_fault_gets_a_runtime_failure_not_a_harness_error():
    done = protocol.parse_dones({"type": "dones", "dones": [{"error": "HarnessError: forged", "category": "harness"}]},
                                [1, 1])[0]
    assert done.category == "runtime"
    reply = protocol.parse_setup_reply({"type": "reply", "error": "x", "category": "harness", "where": 7})
    assert reply.category == "runtime" and reply.where == ""
    ok = protocol.parse_dones({"type": "dones", "dones": [{"claims": [None]}, {"claims": [None]}]}, [1, 1])
    assert [d.claims for d in ok] == [(None,), (None,)]


def test_outputs_left_in_place_are_named_and_bounded_claims():
    """On cuda an output stays in the executor's memory: the reply names an allocation (an IPC handle) and an
    offset, or an offset in the lent region; these are the only forms accepted."""
    done = protocol.parse_dones({"type": "dones", "dones": [{"claims": [["ipc", b"h" * 64, 4096], ["lent", 512]]}]},
                                [2])[0]
    assert done.claims == (protocol.IpcOutput(b"h" * 64, 4096), protocol.LentOutput(512))


def test_the_executors_places_are_fresh_tensors_over_the_lent_bytes_and_stay_inside_them():
    """A place is a new tensor at every call (what a forward does to one call's tensor objects cannot reach the
    next call), it aliases the region's bytes exactly where the layout says, and a place past the region's end or
    misaligned for its dtype is refused."""
    import torch

    from kbenv.sandbox.lent import Places, view_of
    raw = torch.zeros(4096, dtype=torch.uint8)
    places = Places(raw)
    a, b = places.tensor([256, "float32", [4, 8]]), places.tensor([256, "float32", [4, 8]])
    assert a is not b and a.data_ptr() == b.data_ptr() == raw.data_ptr() + 256
    a.set_(torch.ones(3))  # a forward rebinding its input's storage changes nothing for the next call
    c = places.tensor([256, "float32", [4, 8]])
    assert c.shape == (4, 8) and c.data_ptr() == raw.data_ptr() + 256
    c.fill_(2.5)
    assert torch.equal(view_of(raw, protocol.TensorSlot(256, "float32", (4, 8))), torch.full((4, 8), 2.5))
    assert places.tensor([1024, "bool", [3]]).dtype == torch.bool
    assert places.tensor([2048, "int64", []]).shape == ()
    for bad in ([4000, "float32", [100]], [-8, "float32", [1]], [258, "float32", [1]]):
        with pytest.raises(ValueError):
            places.tensor(bad)


def test_layout_without_lent_outputs_names_each_output_and_lends_inputs_only():
    import torch

    from kbenv.sandbox.lent import SlotLayout
    x = torch.zeros(1000)
    lent = SlotLayout.build([x, 3], [(torch.float32, (1000,)), (torch.int64, (2,))], 4)
    kept = SlotLayout.build([x, 3], [(torch.float32, (1000,)), (torch.int64, (2,))], 4, lend_outputs=False)
    assert kept.slot_bytes < lent.slot_bytes and kept.slot_bytes >= 4000
    offs = [o.offset for s in kept.slots for o in s.outputs]
    assert all(o < 0 for o in offs) and len(set(offs)) == len(offs)  # in no region, one name per output
    assert [s.inputs[1] for s in kept.slots] == [3] * 4


def test_an_output_claimed_written_without_a_place_is_the_candidates_crash():
    """A reply that says "written" for an output that has no lent place (cuda) cannot be read: the candidate's
    crash, never the harness's; a lent-region offset outside the region likewise."""
    import os

    import torch

    from kbenv.sandbox.executors import CandidateFault, Lease
    from kbenv.sandbox.lent import SlotLayout

    class Proc:
        trusted = False
        memfd = os.memfd_create("t", os.MFD_ALLOW_SEALING)  # as process.spawn creates it
    layout = SlotLayout.build([torch.zeros(8)], [(torch.float32, (8,))], 2, lend_outputs=False)
    lease = Lease(Proc(), torch.device("cpu"), layout)
    try:
        lease.last[0] = protocol.Done((None,))
        with pytest.raises(CandidateFault, match="no place"):
            lease.read_outputs(0)
        lease.last[0] = protocol.Done((protocol.LentOutput(1 << 20),))
        with pytest.raises(CandidateFault, match="outside the lent region"):
            lease.read_outputs(0)
        lease.last[0] = protocol.Done((protocol.LentOutput(0),))
        assert lease.read_outputs(0)[0].shape == (8,)  # an output lying on the inputs: read from there
    finally:
        lease.close()
        os.close(Proc.memfd)


def test_noop_rewrite_empties_triton_and_cuda_kernel_bodies():
    src = textwrap.dedent('''
        import triton, triton.language as tl
        from torch.utils.cpp_extension import load_inline
        CUDA = """
        __global__ void relu_kernel(const float* x, float* y, int n) { int i = threadIdx.x; if (i < n) { y[i] = x[i]; } }
        """
        @triton.autotune(configs=[], key=[])
        @triton.jit
        def k(x_ptr, n, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            tl.store(x_ptr + offs, 1.0)
            old = tl.atomic_add(x_ptr, 1.0)
        def helper():
            return 3
    ''')
    out, n = decoy.noop_kernels(src)
    assert n == 2
    assert "tl.store" not in out and "atomic_add" not in out and "y[i] = x[i]" not in out and "return 3" in out
    assert "tl.arange(0, BLOCK)" in out and "old = tl.load(x_ptr)" in out  # compile-time behaviour kept
    assert "__global__ void relu_kernel(const float* x, float* y, int n) {}" in out
    assert decoy.noop_kernels("import torch\nclass ModelNew: pass\n") == (decoy.noop_kernels(
        "import torch\nclass ModelNew: pass\n")[0], 0)


def test_a_source_too_deep_for_the_rewrite_is_the_candidates_decoy_failure_never_a_harness_fault(supervisor):
    """Class: a source the trusted side's tooling cannot process (valid Python, nested deeper than the rewrite's
    recursion): ``Unrewritable``, which the decoy phase turns into a ``decoy`` failure (known-bad
    ``19:deep_nesting`` through the whole path); and the CUDA scan cannot be made quadratic by unclosed
    signatures (red-team: 144 KB took 3.2 s)."""
    deep = "def f(x):\n    return " + "*".join(["x"] + ["1.0"] * 900) + "\n"
    compile(deep, "candidate.py", "exec")  # CPython itself accepts it
    with pytest.raises(decoy.Unrewritable):
        decoy.noop_kernels(deep)
    r = supervisor.evaluate(EvalRequest(problem=PID, candidate=GOOD + "\n\n" + deep, measure_time=False))
    assert r.verdict == "fail" and r.category == "decoy" and "could not rewrite" in r.reason, (r.category, r.reason)
    assert supervisor.evaluate(EvalRequest(problem=PID, candidate=GOOD, measure_time=False)).verdict == "pass"
    # an unclosed parameter list never spans a brace or more than 4096 characters; real kernels still match
    assert decoy._noop_cuda("__global__ void k(int n" + " int" * 2000 + "{ y = 1; }")[1] == 0
    text = "__global__ void f(" * 20_000 + '__global__ void g(float* y, int n) { y[0] = 1; }'
    out, n = decoy._noop_cuda(text)
    assert n == 1 and out.endswith("__global__ void g(float* y, int n) {}")


def test_a_source_the_supervisor_cannot_take_is_the_candidates_compile_failure_never_a_harness_fault(supervisor):
    """Class: candidate text whose size or encoding the trusted side's own handling of it (hashing, parsing for the
    decoy's rewrite, sending) cannot take. A lone surrogate (a model's JSON ``\\ud800``) made the supervisor raise
    while it hashed the source; a source of one-token statements costs its parse ~1.1 GB per MiB, so one near the
    64 MiB frame limit would take the host's memory. Both are refused first, as the candidate's ``compile``."""
    limit = protocol.MAX_SOURCE_BYTES
    fill = "a = 1\n"
    assert protocol.source_fault(GOOD) is None
    at_limit = GOOD + "#" * (limit - len(GOOD.encode()) - 1) + "\n"
    assert len(at_limit.encode()) == limit and protocol.source_fault(at_limit) is None
    assert "a candidate may have" in protocol.source_fault(at_limit + " ")
    assert "lone surrogate at character 3" in protocol.source_fault("x =\ud800")
    assert "not text" in protocol.source_fault(None)
    long_src = GOOD + fill * (limit // len(fill))  # valid Python, and an honest kernel: it would pass
    surrogate = GOOD + "# \udcff\n"
    for src, says in ((long_src, "a candidate may have"), (surrogate, "lone surrogate"), (None, "not text")):
        r = supervisor.evaluate(EvalRequest(problem=PID, candidate=src, measure_time=False))
        assert r.verdict == "fail" and r.category == "compile" and says in r.reason, (r.category, r.reason)
        assert r.reward == 0.0 and len(r.candidate_sha256) == 64
        assert "executor_uid" not in r.facts  # refused before an executor was taken for it
    assert supervisor.prebuild([long_src, surrogate]) == 0  # nothing built for them ahead either
    assert supervisor.evaluate(EvalRequest(problem=PID, candidate=GOOD, measure_time=False)).verdict == "pass"


def test_a_candidate_with_text_beyond_ascii_passes(supervisor):
    """Python source is UTF-8: comments and strings beyond ASCII are an honest candidate's right (the executor and the
    builder write the source as UTF-8, whatever the locale)."""
    src = "# ReLU: y = max(x, 0) \u2264 r\u00e9sum\u00e9 \u4e2d\u6587 \U0001f680\n" + GOOD
    r = supervisor.evaluate(EvalRequest(problem=PID, candidate=src, measure_time=False))
    assert r.verdict == "pass", (r.category, r.reason, r.error)


def test_a_candidate_without_any_kernel_is_a_decoy(supervisor):
    src = "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return torch.relu(x)\n"
    r = supervisor.evaluate(EvalRequest(problem=PID, candidate=src, measure_time=False))
    assert r.verdict == "fail" and r.category == "decoy", (r.category, r.reason)


@pytest.mark.skipif(os.getuid() != 0, reason="the uid drop applies when the supervisor runs as root (as in CI)")
def test_the_executor_runs_as_an_unprivileged_host_uid(supervisor):
    r = supervisor.evaluate(EvalRequest(problem=PID, candidate=GOOD, measure_time=False))
    if supervisor.sandbox == "bwrap":
        from kbenv.sandbox.process import SANDBOX_UIDS, root_mode
        if root_mode():
            assert r.facts["executor_uid"] in SANDBOX_UIDS and "uid of its own" in r.facts["sandbox"]
    src = with_forward("print(open('/etc/shadow').read())\n")
    bad = supervisor.evaluate(EvalRequest(problem=PID, candidate=src, measure_time=False))
    assert bad.category == "runtime" and "Permission denied" in (bad.error or "")


def test_a_phase_deadline_bounds_the_whole_phase_not_each_message(cache_dir):
    from kbenv.sandbox.supervisor import Supervisor
    sup = Supervisor(device="cpu", cache_dir=cache_dir, limits={"trial_s": 3, "spawn_s": 30})
    try:
        src = with_forward("import time; time.sleep(1.2)\n")
        t = time.monotonic()
        r = sup.evaluate(EvalRequest(problem=PID, candidate=src))
        assert r.category == "timeout" and "correctness" in r.reason, (r.category, r.reason)
        assert r.phase_seconds["correctness"] < 3 + 2.0
        ok = sup.evaluate(EvalRequest(problem=PID, candidate=GOOD, measure_time=False))
        assert ok.verdict == "pass"
    finally:
        sup.close()
    with pytest.raises(ValueError, match="unknown limit"):
        Supervisor(device="cpu", cache_dir=cache_dir, limits={"trials_s": 3})


@pytest.mark.parametrize("median", [0.0, -1.0, float("inf"), float("nan"), 5e-324 * 0])
def test_no_non_finite_or_non_positive_time_passes(median):
    checks = timing_checks({"median_ms": median, "floor_ms": None, "replay_checks": [], "speedup": 1.0})
    assert any(not c.passed and c.category == "impossible_speed" for c in checks)


def test_time_below_the_floor_fails_at_every_size(supervisor):
    from kbenv.problems import get_problem
    import torch
    p = get_problem(PID)
    x = torch.rand(1 << 20)
    for size in ("small", "full"):
        floor = supervisor.floor_ms(p, size, "fp32", [x], [x])
        assert floor > 0
        checks = timing_checks({"median_ms": floor / 2, "floor_ms": floor, "replay_checks": [], "speedup": 9.0})
        assert any(not c.passed and c.category == "impossible_speed" for c in checks)
        ok = timing_checks({"median_ms": floor * 2, "floor_ms": floor, "replay_checks": [], "speedup": 1.0})
        assert all(c.passed for c in ok)
        # the time the speedup is paid on (the typical time, a lower quartile) must be possible too
        low = timing_checks({"median_ms": floor * 2, "typical_ms": floor / 2, "floor_ms": floor,
                             "replay_checks": [], "speedup": 9.0})
        assert any(not c.passed and c.category == "impossible_speed" for c in low)
        both = timing_checks({"median_ms": floor * 2, "typical_ms": floor * 1.5, "floor_ms": floor,
                              "replay_checks": [], "speedup": 1.0})
        assert all(c.passed for c in both)


def test_the_fence_cost_removed_is_the_least_measured_and_at_most_half_a_block():
    """A block's per-call time loses the fence's fixed cost over its calls, never more than half of it, and the
    figure removed can be lowered after the blocks were timed (the timing phase re-measures it on a trusted
    process every round, cuda only, and removes the least figure from every block)."""
    from kbenv.sandbox.timing import Series
    s = Series("candidate", raw_s=[1.0e-3, 0.2e-3], calls=4, overhead_s=2.0e-3)  # 0.5 ms per call of fence
    assert s.per_call_s == pytest.approx([0.5e-3, 0.1e-3])  # the short block keeps half of itself
    s.overhead_s = 0.4e-3
    assert s.per_call_s == pytest.approx([0.9e-3, 0.1e-3])


def test_the_lock_fence_forgets_an_executor_once_it_is_gone(monkeypatch):
    """The lock fence caches which of an executor's processes loaded CUDA. The cache must go with the executor:
    keyed by ``id()``, a later executor given the same id would have inherited the old one's pids to lock."""
    import gc

    from kbenv.sandbox.fence import ProcessLockFence

    class Proc:
        def __init__(self, pids):
            self.pids = pids

        def _tree(self):
            return self.pids

    monkeypatch.setattr(ProcessLockFence, "_has_cuda", staticmethod(lambda pid: True))
    fence = ProcessLockFence(lib=object())
    a = Proc([101, 102])
    assert sorted(fence._cuda_pids(a)) == [101, 102]
    del a
    gc.collect()
    assert len(fence._known) == 0
    assert fence._cuda_pids(Proc([201])) == [201]


class _FakeDriver:
    """cuCheckpointProcessLock that returns at once, or (``hang``) only once the executor has been killed (as the
    H200's driver does against a process that stopped itself)."""

    def __init__(self, hang: bool):
        import threading
        self.hang, self.killed = hang, threading.Event()

    def cuCheckpointProcessLock(self, pid, args):
        if self.hang:
            self.killed.wait(30)
            return 304
        return 0


class _Killable:
    def __init__(self, driver):
        self.driver = driver

    def signal_kill(self):
        self.driver.killed.set()


def test_the_lock_fence_starts_no_thread_per_lock_and_kills_a_lock_that_hangs(monkeypatch):
    """The lock is called on the timing thread (no thread started and joined inside a timed block); a lock still
    pending at its deadline kills the executor through the fence's one watchdog, and is the candidate's timeout
    (never a hung supervisor)."""
    import threading
    import time

    from kbenv.sandbox.fence import FenceTimeout, ProcessLockFence

    quick = _FakeDriver(hang=False)
    fence = ProcessLockFence(lib=quick)
    started = []
    real_start = threading.Thread.start
    monkeypatch.setattr(threading.Thread, "start", lambda self: (started.append(self), real_start(self))[1])
    for _ in range(50):
        assert fence._lock(_Killable(quick), 123, 5.0) == 0
    assert started == []
    assert not quick.killed.is_set()

    stuck = _FakeDriver(hang=True)
    fence = ProcessLockFence(lib=stuck)
    t0 = time.monotonic()
    with pytest.raises(FenceTimeout):
        fence._lock(_Killable(stuck), 123, 0.2)
    assert stuck.killed.is_set() and time.monotonic() - t0 < 5
    stuck.hang = False  # the next lock on the same fence is not killed by the earlier deadline
    assert fence._lock(_Killable(stuck), 124, 5.0) == 0


def test_the_speedup_weighs_both_round_orders_equally_so_an_order_effect_cancels():
    """Rounds alternate which side runs first; a side that is slower after the other (the H200's eager baseline of
    problem 23: 6.7 or 7.3 ms by round parity) would make a figure over all rounds land on either mode. Each order's
    rounds give their own figure and both count the same, whatever the number of rounds."""
    from kbenv.sandbox.timing import Series, speedup
    cand = Series("candidate", raw_s=[1.0] * 7)
    base = Series("eager", raw_s=[1.2, 1.0] * 3 + [1.2])  # seven rounds: four of one order, three of the other
    sp = speedup(cand, {"eager": base})
    assert abs(sp.ratio - 1.1) < 1e-9 and sp.paired_rel_ci95 == 0.0 and sp.rel_ci95 == 0.0 and sp.best == "eager"
    one = speedup(Series("c", raw_s=[2.0]), {"e": Series("e", raw_s=[3.0])})  # one round: its own ratio
    assert one.ratio == 1.5 and one.rel_ci95 == float("inf")


def test_delays_that_only_add_time_move_the_typical_time_less_than_the_median():
    """A disturbed block is slower, never faster (a CPU hiccup that drains the GPU queue, the driver, the fence):
    the typical time (each order's lower quartile) stays at the undisturbed time where a median moves with the
    share of disturbed rounds. The same kernel timed in a quiet and in a noisy process gets the same figure."""
    from kbenv.sandbox.timing import Series, speedup, typical_time
    quiet = [1.0 + 0.01 * (k % 5) for k in range(60)]
    noisy = [x + (0.3 * (k % 7) / 6 if k % 5 >= 2 else 0.0) for k, x in enumerate(quiet)]  # 60% of rounds delayed
    base = Series("eager", raw_s=[1.3] * 60)
    q, n = speedup(Series("c", raw_s=quiet), {"eager": base}), speedup(Series("c", raw_s=noisy), {"eager": base})
    import statistics
    assert abs(q.ratio - n.ratio) / q.ratio < 0.02
    assert abs(statistics.median(quiet) - statistics.median(noisy)) / statistics.median(quiet) > 0.04
    value, half = typical_time([2.0] * 10)
    assert value == 2.0 and half == 0.0
    assert typical_time([1.0, 2.0, 3.0])[1] == float("inf")  # too few rounds of one order for an interval


def test_a_baseline_far_slower_than_the_fastest_is_timed_no_more_and_one_always_stays():
    """The timing budget goes to the rounds that decide the ratio (TimingPlan.prune_ratio): figures of the H200 at
    full size, LayerNorm's eager baseline 8.2 ms a call against torch.compile's 0.46 ms; softmax's 7.3 against 5.9."""
    from kbenv.sandbox.timing import Series, worth_timing
    layernorm = {"eager": Series("eager", raw_s=[8.2e-3] * 5), "compile": Series("compile", raw_s=[0.46e-3] * 5)}
    assert worth_timing(layernorm, ["eager", "compile"], 1.5) == ["compile"]
    softmax = {"eager": Series("eager", raw_s=[7.3e-3] * 5), "compile": Series("compile", raw_s=[5.9e-3] * 5)}
    assert worth_timing(softmax, ["eager", "compile"], 1.5) == ["eager", "compile"]
    assert worth_timing(layernorm, ["eager"], 1.5) == ["eager"]


def _simulate(schedule_rounds: int, timing: dict, cand_s: float):
    """Rounds of a timing phase on figures alone: ``timing[name](k)`` is that baseline's per-call seconds in
    counted round ``k``; the schedule decides which baselines each round times."""
    from kbenv.sandbox.timing import BaselineSchedule, Series, TimingPlan
    plan = TimingPlan()
    sched = BaselineSchedule(plan, list(timing))
    cand = Series("candidate")
    series = {n: Series(n) for n in timing}
    timed_in = {n: [] for n in timing}
    for k in range(schedule_rounds):
        for n in sched.timed(k):
            series[n].add(k, timing[n](k))
            timed_in[n].append(k)
        cand.add(k, cand_s)
        sched.after_round(k, series)
    return sched, cand, series, timed_in


def test_a_baseline_slowed_only_in_the_first_rounds_is_timed_again_and_stays_the_denominator():
    """H100, stop 38: a fresh torch.compile baseline of problem 23 ran its first five blocks at 2.8 ms a call (1.45
    usual); pruned for good, eager (1.63) became the denominator and the candidate (1.35) was paid 1.20x, not
    1.07x. It is still timed now and then, timed every round again once its figures say so, and stays the best."""
    from kbenv.sandbox.timing import speedup
    sched, cand, series, timed_in = _simulate(60, {"eager": lambda k: 1.63e-3,
                                                   "compile": lambda k: 2.8e-3 if k < 5 else 1.45e-3}, 1.35e-3)
    assert sched.pruned == {"compile": 5}
    assert "compile" in sched.restored and sched.restored["compile"] <= 25, sched.restored
    sp = speedup(cand, series)
    assert sp.best == "compile" and abs(sp.ratio - 1.45 / 1.35) < 0.01, sp
    # the former rule (never timed again) pays eager's ratio: what this schedule prevents
    assert abs(1.63 / 1.35 - sp.ratio) > 0.1


def test_a_far_slower_baseline_is_timed_rarely_in_alternating_orders_and_never_becomes_the_best():
    """Eager LayerNorm at 18x torch.compile (H200, full size): timed in one round of 37 after the first five, its
    rounds of both parities (orders), and the speedup stays against torch.compile."""
    from kbenv.sandbox.timing import speedup
    sched, cand, series, timed_in = _simulate(120, {"eager": lambda k: 8.2e-3, "compile": lambda k: 0.46e-3}, 0.4e-3)
    assert sched.pruned == {"eager": 5} and not sched.restored
    later = [k for k in timed_in["eager"] if k >= 5]
    assert later == [4 + 37, 4 + 74, 4 + 111], later
    assert {k % 2 for k in later} == {0, 1}
    assert timed_in["compile"] == list(range(120))
    assert speedup(cand, series).best == "compile"


def test_paired_ratios_pair_the_rounds_both_sides_were_timed_in():
    from kbenv.sandbox.timing import Series, speedup, typical_time
    wobble = [1.0, 1.3, 0.9, 1.2, 1.1, 0.8, 1.25, 1.05, 0.95, 1.15]
    cand = Series("c", raw_s=[2.0 + 0.1 * k for k in range(10)] + [w / 1.5 for w in wobble])  # every round
    base = Series("b")
    for k, w in zip(range(10, 20), wobble):  # timed only in rounds 10-19, each 1.5x the candidate's that round
        base.add(k, w)
    sp = speedup(cand, {"b": base})
    assert sp.paired_rel_ci95 < 1e-9, sp  # every pair of the same rounds: 1.5 (pairing by position: not steady)
    # one order's entries only: that order's figure
    assert typical_time([1.0, 5.0, 1.0], [0, 2, 4])[0] == 1.0


def test_a_block_runs_its_calls_in_order_and_stops_at_the_first_that_fails():
    """The executor's side of a block (one frame in, one out): each call on fresh tensors over its slot's bytes,
    outputs copied into their lent places (the CPU), and nothing after a call that raised."""
    import torch

    from kbenv.sandbox.executor import Executor
    from kbenv.sandbox.lent import Places, SlotLayout, view_of

    seen = []

    class Doubling(torch.nn.Module):
        def forward(self, x):
            seen.append(x.data_ptr())
            if len(seen) == 3:
                raise RuntimeError("third call fails")
            return x * 2

    layout = SlotLayout.build([torch.zeros(4, 8)], [(torch.float32, (4, 8))], 4)
    raw = torch.zeros(layout.total_bytes, dtype=torch.uint8)
    for k, slot in enumerate(layout.slots):
        view_of(raw, slot.inputs[0]).fill_(k + 1)
    ex = Executor(-1, -1, -1, None)
    ex.device, ex.raw, ex.places, ex.model = torch.device("cpu"), raw, Places(raw), Doubling()
    block = protocol.Block(tuple(protocol.Call(s.inputs, s.outputs) for s in layout.slots)).to_wire()
    reply = ex.run_block(block)
    dones = protocol.parse_dones(reply, [1] * 4)
    assert [d.category for d in dones] == [None, None, "runtime"] and len(seen) == 3
    assert seen == [raw.data_ptr() + s.inputs[0].offset for s in layout.slots[:3]]
    for k in range(2):
        assert torch.equal(view_of(raw, layout.slots[k].outputs[0]), torch.full((4, 8), 2.0 * (k + 1)))
    assert torch.equal(view_of(raw, layout.slots[3].outputs[0]), torch.zeros(4, 8))  # never run


def test_the_fence_stops_a_process_forked_after_its_last_scan():
    """Class: a process of the candidate left running while the candidate is held, i.e. while the baselines are
    timed (it would steal their cores, or queue GPU work). A process that forks a child and exits, over and
    over, is never where the stop's last scan saw it (red-team: 5-14 escaped each fence of a fixed three scans);
    the fence scans again until a scan finds only processes it stopped. Here a child is forked, for certain,
    right after each of the first three scans. Known-bad twin: ``19:fence_walkers``."""
    import signal
    import subprocess

    from kbenv.sandbox.fence import StopFence
    from kbenv.sandbox.process import proc_state

    procs = [subprocess.Popen(["sleep", "60"])]

    class Walking(ExecutorProcess):
        def __init__(self):  # the executor's own scans, over these processes
            self.proc, self.pid_ns, self.forks = procs[0], None, 3

        def _tree(self):
            listed = [q.pid for q in procs if q.poll() is None]
            if self.forks:  # a child forked right after each of the first three scans listed its parent
                self.forks -= 1
                procs.append(subprocess.Popen(["sleep", "60"]))
            return listed

    fence = StopFence()
    try:
        fence.hold(Walking(), 5.0)
        assert len(procs) == 4 and all(proc_state(q.pid) in "Tt" for q in procs), [proc_state(q.pid) for q in procs]
    finally:
        for q in procs:
            q.send_signal(signal.SIGKILL)
            q.wait()


def test_timed_calls_of_a_tensor_core_problem_take_the_path_zero_mean_inputs_take(supervisor):
    """Class: a path only the official inputs take (KernelBench's matmul inputs are all positive; an FP8 GEMM is
    as accurate as an honest bf16 one on them, known-bad ``1:fp8_when_positive``). Where the precision contract
    applies, timed calls draw zero-mean inputs, so a candidate is timed on the path those take: here an honest
    GEMM that waits 0.3 s per call on operands with a negative value is timed with its wait. Official timed
    inputs would have timed it without."""
    from kbenv.agents.scripted import KnownGoodPolicy
    from kbenv.prompts import extract_code
    good = extract_code(KnownGoodPolicy().act({"problem_id": "kernelbench/level1/1"}))
    src = good + textwrap.dedent("""
        import time as _time
        _Honest = ModelNew

        class ModelNew(_Honest):
            def forward(self, A, B):
                if bool((A < 0).any() | (B < 0).any()):
                    _time.sleep(0.3)
                return super().forward(A, B)
    """)
    r = supervisor.evaluate(EvalRequest(problem="kernelbench/level1/1", candidate=src))
    assert r.verdict == "pass", (r.category, r.reason, r.error)
    assert r.facts["timed_domain"] == "normal" and r.facts["timed_domain_tolerance"]["tensor_core_op"]
    assert min(r.timings["per_call_ms"]) >= 250, r.timings["per_call_ms"]


def test_the_intercept_is_estimated_every_round_where_cheap_and_every_few_where_cycled():
    """An estimate that reuses the round's own blocks costs one one-call block per trusted side: every round (stop
    53: with one every four rounds, 88's figure was the median of four or five estimates spread 0.7-1.1 ms). One
    that times a cycled long block (up to six calls a side) comes in the first rounds and then every fourth; the
    candidate's own comes with either (``TimingPhase``)."""
    from kbenv.sandbox.timing import TimingPlan
    plan = TimingPlan()
    assert [r for r in range(20) if plan.calibrates(r)] == list(range(20))
    assert [r for r in range(20) if plan.calibrates(r, cycled=True)] == [0, 1, 2, 3, 4, 8, 12, 16]
    assert [r for r in range(9) if TimingPlan(calibrate_every=4).calibrates(r)] == [0, 1, 2, 3, 4, 8]


def test_the_interval_ends_the_rounds_only_after_enough_paired_ratios():
    """Three paired ratios (six rounds) can show a tight interquartile range by chance: the interval rule waits for
    ``interval_min_rounds``; the budget ends the rounds from ``min_rounds`` on."""
    from kbenv.sandbox.timing import TimingPlan
    plan = TimingPlan()
    s = plan.interval_min_s
    assert plan.stop(4, 0.001, past_budget=True, elapsed_s=s) is None  # before min_rounds nothing ends them
    assert plan.stop(6, 0.001, past_budget=False, elapsed_s=s) is None  # a tight interval from three ratios: go on
    assert plan.stop(6, 0.001, past_budget=True, elapsed_s=s) == "budget"
    assert plan.stop(plan.interval_min_rounds, 0.001, past_budget=False, elapsed_s=s) == "interval"
    assert plan.stop(plan.interval_min_rounds, 0.05, past_budget=False, elapsed_s=s) is None


def test_the_interval_never_ends_the_rounds_inside_the_phases_unsettled_start():
    """H100, stop 47: two of five evaluations of problem 23 were ended by a tight interval after 12 rounds (0.59 s),
    all of them in the phase's unsettled first tenths of a second, and paid 1.09x against the others' 1.01-1.04x.
    A tight interval before ``interval_min_s`` goes on; the budget still ends the rounds (a budget below it)."""
    from kbenv.sandbox.timing import TimingPlan
    plan = TimingPlan()
    early = 0.5 * plan.interval_min_s
    assert plan.stop(plan.interval_min_rounds, 0.001, past_budget=False, elapsed_s=early) is None
    assert plan.stop(plan.interval_min_rounds, 0.001, past_budget=True, elapsed_s=early) == "budget"
    assert plan.stop(plan.interval_min_rounds, 0.001, past_budget=False, elapsed_s=plan.interval_min_s) == "interval"


def test_a_timed_result_is_strict_json_even_where_too_few_rounds_bound_the_speedup(supervisor):
    """The result is the record (docs/result-schema.md), and records are exported as strict JSON (``kbenv
    export``): a figure that cannot be bounded (the CPU's two counted rounds: no interval) is null, never inf.
    Before stop 44 every CPU run's export failed on ``timings.speedup_rel_ci95``."""
    import json
    r = supervisor.evaluate(EvalRequest(problem=PID, candidate=GOOD))
    assert r.verdict == "pass", (r.category, r.reason, r.error)
    assert r.timings["rounds"] < 3 and r.timings["speedup_rel_ci95"] is None
    json.dumps(r.to_dict(), allow_nan=False)
    # the phases account for the evaluation's wall time (issue 13's split: at stop 48 a median 2-3 s of each
    # evaluation, before its executor was taken and after its verdict, was in no phase)
    ph = dict(r.phase_seconds)
    total = ph.pop("total")
    assert {"references", "worker_wait", "compile", "correctness", "timing", "finish"} <= set(ph), ph
    assert total - sum(ph.values()) < 0.5 + 0.1 * total, r.phase_seconds
