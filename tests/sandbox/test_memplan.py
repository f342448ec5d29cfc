"""The memory plan: sizes from the meta device match real tensors, the plan's parts add up, the largest
problems are refused on small cards with a one-line message naming the size that fits, and every medium size
fits 22 GiB."""

import json
import os
import math
import subprocess
import sys
import types
from pathlib import Path

import pytest
import torch

from kbenv.problems import PRECISIONS, get_problem, list_problems, make_inputs, make_model
from kbenv.sandbox import build_medium, memplan as M

GiB = M.GiB
ROOT = Path(__file__).resolve().parents[2]
H200_GIB = 139.8  # what torch reports for an H200's 141 GB


@pytest.fixture(autouse=True)
def no_caps(monkeypatch):
    monkeypatch.delenv("KBENV_GPU_MEMORY_CAP", raising=False)
    monkeypatch.delenv("KBENV_HOST_MEMORY_CAP", raising=False)
    monkeypatch.setattr(M, "_gpu_cap", None)


def fake_gpu(monkeypatch, total_gib: float, name: str = "NVIDIA H200", l2_mib: int = 60):
    """Make torch report a GPU (on a CPU-only machine) so the device-side paths run with a fake budget."""
    props = types.SimpleNamespace(name=name, major=9, minor=0, total_memory=int(total_gib * GiB),
                                  L2_cache_size=l2_mib << 20)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index=0: props)


def test_memory_sizes_parse_binary_and_decimal_units():
    assert M.parse_bytes("40G") == 40 * GiB == M.parse_bytes("40GiB") == M.parse_bytes("40 gib")
    assert M.parse_bytes("24GB") == 24 * 10 ** 9
    assert M.parse_bytes("512M") == 512 << 20
    assert M.parse_bytes("1.5T") == int(1.5 * 2 ** 40)
    assert M.parse_bytes("1000") == 1000 == M.parse_bytes(1000)
    for bad in ("forty", "40X", "-1G", "", "G"):
        with pytest.raises(ValueError, match="memory size"):
            M.parse_bytes(bad)


def test_the_gpu_cap_comes_from_python_or_the_environment_and_reaches_child_processes(monkeypatch):
    assert M.gpu_memory_cap() is None
    monkeypatch.setenv("KBENV_GPU_MEMORY_CAP", "80G")
    assert M.gpu_memory_cap() == 80 * GiB
    M.set_gpu_memory_cap("24G")
    assert M.gpu_memory_cap() == 24 * GiB
    child = subprocess.run([sys.executable, "-c", "from kbenv.sandbox import memplan; print(memplan.gpu_memory_cap())"],
                           capture_output=True, text=True, check=True)
    assert int(child.stdout) == 24 * GiB  # a process started afterwards honours the same cap
    fake_gpu(monkeypatch, H200_GIB)
    assert M.device_budget_bytes("cuda") == 24 * GiB
    M.set_gpu_memory_cap(None)
    assert M.gpu_memory_cap() is None and M.device_budget_bytes("cuda:0") == int(H200_GIB * GiB)
    monkeypatch.setenv("KBENV_GPU_MEMORY_CAP", "lots")
    with pytest.raises(ValueError, match="KBENV_GPU_MEMORY_CAP"):
        M.gpu_memory_cap()


def test_the_cpu_budget_is_the_hosts_capped_by_kbenv_host_memory_cap(monkeypatch):
    host = M.host_budget_bytes()
    assert 1 * GiB < host < 1 << 50
    assert M.device_budget_bytes("cpu") == host
    monkeypatch.setenv("KBENV_HOST_MEMORY_CAP", "3G")
    assert M.host_budget_bytes() == M.device_budget_bytes("cpu") == min(host, 3 * GiB)


def _nbytes(xs):
    return sum(x.numel() * x.element_size() for x in xs if isinstance(x, torch.Tensor))


@pytest.mark.parametrize("pid", ["kernelbench/level1/19", "kernelbench/level1/23", "kernelbench/level1/37",
                                 "kernelbench/level1/1", "kernelbench/level1/42", "kernelbench/level1/95",
                                 "kernelbench/level1/97", "dlrm/1", "dlrm/4", "dlrm/11"])
def test_sizes_from_the_meta_device_match_the_real_tensors(pid):
    p = get_problem(pid)
    for prec in p.precision_allowed:
        fp = M.footprint(p, "small", prec)
        ns = p.namespace("small")
        inputs = make_inputs(ns, 7, "default", "cpu", PRECISIONS[prec], p.broad_inputs)
        model = make_model(ns, "Model", 42, "cpu", PRECISIONS[prec])
        with torch.no_grad():
            out = model(*inputs)
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        assert fp.input_bytes == _nbytes(inputs), prec
        assert fp.output_bytes == _nbytes(outs), prec
        assert fp.output_elements == sum(o.numel() for o in outs)
        assert fp.param_bytes == _nbytes(list(model.parameters()) + list(model.buffers()))
        assert fp.forward_peak_bytes >= fp.output_bytes
        assert fp.slot_bytes >= fp.input_bytes + fp.output_bytes and fp.slot_bytes % M.SLOT_ALIGN == 0
        if prec != "fp32":  # the reference runs in fp32 on upcast copies of the floating-point inputs
            floats = [x for x in inputs if isinstance(x, torch.Tensor) and x.is_floating_point()]
            assert fp.reference_upcast_bytes == 2 * _nbytes(floats)


@pytest.mark.parametrize("pid", ["kernelbench/level1/23", "kernelbench/level1/95", "dlrm/4", "dlrm/11"])
def test_a_planned_slot_is_the_lent_memorys_slot(pid):
    from kbenv.sandbox import lent
    assert M.SLOT_ALIGN == lent.ALIGN
    p = get_problem(pid)
    ns = p.namespace("small")
    inputs = make_inputs(ns, 7, "default", "cpu", PRECISIONS[p.precision_default], p.broad_inputs)
    with torch.no_grad():
        out = make_model(ns, "Model", 42, "cpu", PRECISIONS[p.precision_default])(*inputs)
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    layout = lent.SlotLayout.build(inputs, [(o.dtype, tuple(o.shape)) for o in outs], 1)
    assert M.footprint(p, "small", p.precision_default).slot_bytes == layout.slot_bytes


LARGEST = ["kernelbench/level1/37", "kernelbench/level1/23", "kernelbench/level1/38", "kernelbench/level1/45"]
# At full size in fp32, with two baseline workers kept and check_finite's whole-output temporaries, these four
# need more than an H200 (144-158 GiB planned): they run at medium there until the plan shrinks.
TOO_BIG_FOR_AN_H200 = {"kernelbench/level1/38", "kernelbench/level1/39"}  # 25 and 30 fit since the baselines'
# region is counted as what it holds on cuda (inputs only)
CARDS_GIB = [23.6, 39.6, 79.1, H200_GIB]  # what torch reports for 24, 40, 80 and 141 GB cards


@pytest.mark.parametrize("pid", LARGEST)
@pytest.mark.parametrize("card", CARDS_GIB)
def test_the_largest_problems_at_full_size_fit_only_the_141_gb_card(pid, card):
    budget = int(card * GiB)
    p = M.plan(pid, "full", None, budget, host_budget=1 << 50)
    assert p.fits == (card == H200_GIB and pid not in TOO_BIG_FOR_AN_H200), p.explain()
    assert p.fits == (p.required_bytes <= budget)
    assert p.total_bytes == p.held_bytes + max(p.reference_work_bytes, p.output_copies_bytes + p.check_work_bytes)
    assert p.required_bytes == p.total_bytes - p.reference_cache_bytes
    if p.fits:
        assert 0 <= p.reference_cache_bytes <= M.REFERENCE_CACHE_SHARE * budget and p.total_bytes <= budget
    else:
        assert p.reference_cache_bytes == 0
    assert p.n_slots == 2 and p.lent_slot_bytes == 2 * p.slot_bytes  # each slot far above the L2
    assert p.worker_cap_bytes >= p.input_bytes + p.output_bytes
    assert p.spare_context_bytes == M.CONTEXT_BYTES and p.worker_context_bytes == M.CONTEXT_BYTES


def test_the_workers_allocator_fraction_is_of_the_whole_device_even_under_a_cap():
    p = M.plan("kernelbench/level1/37", "medium", None, 24 * GiB, host_budget=1 << 50)
    h200 = int(H200_GIB * GiB)
    assert p.worker_memory_fraction(h200) * h200 == pytest.approx(p.worker_cap_bytes)
    assert p.worker_memory_fraction(p.worker_cap_bytes // 2) == 1.0


def test_problem_37_at_full_size_part_by_part():
    p = M.plan("kernelbench/level1/37", "full", "fp32", int(H200_GIB * GiB), host_budget=1 << 50)
    tensor = 112 * 64 * 512 * 512 * 4  # one fp32 input or output: 7 GiB
    assert p.input_bytes == p.output_bytes == tensor == 7 * GiB
    assert p.reference_entry_bytes == 2 * tensor
    assert p.lent_slot_bytes == 2 * 2 * tensor
    assert p.output_copies_bytes == 2 * tensor
    # Two baseline workers: each a context and its forward's blocks (the output and the norm's scalar), the
    # compile workspace, and their own region of two slots, which holds inputs only on cuda (a baseline keeps no
    # output: the executor's deliver="none")
    want = 2 * (M.CONTEXT_BYTES + tensor) + M.COMPILE_WORKSPACE_BYTES + 2 * tensor
    assert 0 <= p.baseline_bytes - want < 1 << 20 and p.baseline_processes == 2
    assert p.check_work_bytes > tensor  # check_finite's |y| and masks over the whole 7 GiB output
    assert 115 * GiB < p.required_bytes <= H200_GIB * GiB and p.fits


def test_slot_count_fills_the_lend_budget_between_two_and_thirty_two():
    p = M.plan("dlrm/11", "small", None, 24 * GiB, host_budget=1 << 50)
    assert p.n_slots == M.MAX_SLOTS  # small slots: as many as allowed
    big = M.plan("kernelbench/level1/23", "full", None, 140 * GiB, host_budget=1 << 50)
    assert big.n_slots == M.MIN_SLOTS  # a 12 GiB slot: two (the supervisor evicts the L2 before each block)
    mid = M.slot_count(100 << 20, "cuda")
    assert mid * (100 << 20) <= M.LEND_BYTES < (mid + 1) * (100 << 20)
    cpu = M.plan("dlrm/11", "small", None, 24 * GiB, device_type="cpu")
    assert cpu.n_slots == 2  # no cache to defeat on the CPU


def test_spares_each_add_a_context():
    one = M.plan("kernelbench/level1/23", "medium", None, 24 * GiB, spares=1, host_budget=1 << 50)
    three = M.plan("kernelbench/level1/23", "medium", None, 24 * GiB, spares=3, host_budget=1 << 50)
    assert three.required_bytes - one.required_bytes == 2 * M.CONTEXT_BYTES
    assert three.host_bytes - one.host_bytes == 2 * M.HOST_PROCESS_BYTES_CUDA


def test_every_problem_but_two_fits_the_h200_at_full_size():
    refused = set()
    for prob in list_problems():
        for prec in prob.precision_allowed:
            p = M.plan(prob, "full", prec, int(H200_GIB * GiB), host_budget=1 << 50)
            if not p.fits:
                refused.add(prob.id)
                assert prec == "fp32" and p.required_bytes < 160 * GiB, p.explain()
    assert refused == TOO_BIG_FOR_AN_H200


def test_every_medium_size_loads_and_fits_22_gib_at_every_precision():
    reduced = 0
    for prob in list_problems():
        ns = prob.namespace("medium")  # loads: every override names a module constant
        full_ns = prob.namespace("full")
        full_fits = all(M.plan(prob, "full", prec, 22 * GiB, host_budget=1 << 50, medium_tier_rule=True).fits
                        for prec in prob.precision_allowed)  # the rule the tier was built with
        assert (prob.medium == {}) == full_fits, prob.id
        reduced += bool(prob.medium)
        for k, v in prob.medium.items():
            assert prob.small[k] <= v <= full_ns[k] and ns[k] == v, (prob.id, k)
        for prec in prob.precision_allowed:
            p = M.plan(prob, "medium", prec, 22 * GiB, host_budget=1 << 50)
            assert p.fits and p.required_bytes <= 22 * GiB, p.explain()
    assert reduced >= 50  # most of level 1's full sizes do not fit a 24 GB card


@pytest.mark.parametrize("pid", ["kernelbench/level1/19", "kernelbench/level1/37", "kernelbench/level1/45"])
def test_a_medium_size_is_the_largest_that_fits(pid):
    prob = get_problem(pid)
    (key, value), = prob.medium.items()
    full = prob.namespace("full")[key]
    bigger = [v for v in build_medium._candidates(full, prob.small[key]) if v > value]
    assert bigger and not build_medium._fits(prob, {key: bigger[0]})
    assert build_medium._fits(prob, {key: value})


def test_the_committed_medium_sizes_are_a_fresh_build():
    r = subprocess.run([sys.executable, "-m", "kbenv.sandbox.build_medium", "--check"], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_sizes_are_small_medium_and_full_and_nothing_else():
    prob = get_problem("kernelbench/level1/23")
    assert prob.overrides("full") == {} and prob.overrides("small") == prob.small
    assert prob.overrides("medium") == prob.medium == {"batch_size": 512}
    with pytest.raises(ValueError, match="'small', 'medium' or 'full'"):
        prob.overrides("large")
    with pytest.raises(ValueError, match="small, medium, full"):
        M.preflight(prob, "large", None, "cpu")


def test_on_the_cpu_full_size_is_refused_in_one_line_naming_medium(monkeypatch):
    # The newcomer's machine: 23 GiB, where `kbenv eval --size full` for problem 19 was OOM-killed at 12.7 GB.
    host_gib = [23]
    monkeypatch.setattr(M, "host_budget_bytes", lambda: host_gib[0] * GiB)
    with pytest.raises(M.MemoryPlanError) as e:
        M.preflight("kernelbench/level1/19", "full", None, "cpu")
    msg = str(e.value)
    assert "\n" not in msg and isinstance(e.value, ValueError)
    assert msg.startswith("kernelbench/level1/19 at --size full (fp32) needs ")
    assert "of host memory, cpu allows 23.0 GiB" in msg and msg.endswith("GiB)") and "use --size medium" in msg
    assert e.value.fitting_size == "medium" and not e.value.plan.fits
    assert M.preflight("kernelbench/level1/19", "medium", None, "cpu").fits
    host_gib[0] = 6
    with pytest.raises(M.MemoryPlanError, match="use --size small"):
        M.preflight("kernelbench/level1/19", "full", None, "cpu")
    host_gib[0] = 1
    with pytest.raises(M.MemoryPlanError, match="no size of it fits this device") as e:
        M.preflight("kernelbench/level1/19", "small", None, "cpu")
    assert e.value.fitting_size is None
    monkeypatch.setenv("KBENV_HOST_MEMORY_CAP", "1G")
    with pytest.raises(M.MemoryPlanError, match=r"cpu allows 1.0 GiB \(KBENV_HOST_MEMORY_CAP=1G\)"):
        M.preflight("kernelbench/level1/19", "small", None, "cpu")


@pytest.mark.parametrize("cap,fits_full", [("24G", False), ("40G", False), ("80G", False), (None, True)])
def test_a_capped_h200_refuses_problem_37_before_anything_allocates(monkeypatch, cap, fits_full):
    fake_gpu(monkeypatch, H200_GIB)
    monkeypatch.setattr(M, "host_budget_bytes", lambda: 256 * GiB)  # the H200 machine's host, not this one's
    if cap:
        M.set_gpu_memory_cap(cap)
    if fits_full:
        p = M.preflight("kernelbench/level1/37", "full", None, "cuda")
        assert p.fits and p.budget_bytes == int(H200_GIB * GiB)
        # with the supervisor's default spares (the medium tier's count, which counts the baselines' region with
        # outputs, needs fewer)
        assert p.spares == M.default_spares("cuda")
        old = M.plan("kernelbench/level1/37", "full", None, p.budget_bytes, M.default_spares("cuda"),
                     host_budget=256 * GiB, medium_tier_rule=True)
        assert not old.fits
        return
    with pytest.raises(M.MemoryPlanError) as e:
        M.preflight("kernelbench/level1/37", "full", None, "cuda:0")
    msg = str(e.value)
    assert "\n" not in msg
    assert msg.startswith("kernelbench/level1/37 at --size full (fp32) needs ")
    assert f"of GPU memory, cuda:0 allows {M.parse_bytes(cap) / GiB:.1f} GiB (KBENV_GPU_MEMORY_CAP={cap})" in msg
    assert msg.endswith("GiB)") and ": use --size medium (" in msg
    assert M.preflight("kernelbench/level1/37", "medium", None, "cuda").fits


def test_a_plan_explains_itself_in_one_line_and_serialises():
    p = M.plan("kernelbench/level1/23", "medium", None, 24 * GiB, host_budget=1 << 50)
    line = p.explain()
    assert "\n" not in line and line.startswith("kernelbench/level1/23 size=medium fp32: ")
    for word in ("fits", "slots 2x", "worker cap", "2 baseline workers", "checks", "cache", "host"):
        assert word in line
    d = json.loads(json.dumps(p.to_dict()))
    assert d["total_bytes"] == p.total_bytes and d["fits"] is True and d["n_slots"] == 2
    with pytest.raises(dataclasses_frozen_error()):
        p.n_slots = 3


def dataclasses_frozen_error():
    import dataclasses
    return dataclasses.FrozenInstanceError


def test_a_memory_plan_error_is_a_value_error_with_or_without_a_plan():
    e = M.MemoryPlanError("x at --size full needs 9 GiB")
    assert isinstance(e, ValueError) and e.plan is None and e.fitting_size is None


@pytest.mark.parametrize("pid", ["kernelbench/level1/23", "kernelbench/level1/42"])
def test_the_checks_take_no_more_than_the_plan_says(pid):
    # Measured in a fresh process (the peak resident set only grows): the checks of one trial of 2^24
    # output elements, as the supervisor runs them, against memplan.check_work_bytes.
    # A controlled environment: variables other tests of the session set (threads, allocator, caps) change the
    # peak resident set this measures.
    env = {k: os.environ[k] for k in ("PATH", "HOME", "PYTHONPATH", "VIRTUAL_ENV") if k in os.environ}
    env["TRITON_INTERPRET"] = "1"
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "memplan_checks.py"), "--one", pid, str(1 << 24)],
                       capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    d = json.loads(r.stdout.strip().splitlines()[-1])
    assert d["output_elements"] >= 1 << 23
    assert d["check_work_measured"] > 0
    assert d["check_work_planned"] >= d["check_work_measured"], d
    assert math.isfinite(d["check_work_planned"])


def test_a_problem_the_meta_device_cannot_run_is_named_not_crashed(tmp_path):
    from kbenv.problems import Problem, ProblemError
    f = tmp_path / "1_DataDependent.py"
    f.write_text("import torch\n"
                 "class Model(torch.nn.Module):\n"
                 "    def forward(self, x):\n"
                 "        return x[: int(x.sum().item())]\n"
                 "N = 16\n"
                 "def get_inputs():\n    return [torch.rand(N)]\n"
                 "def get_init_inputs():\n    return []\n")
    prob = Problem(id="kernelbench-ext/level1/1", name=f.stem, path=f, family="elementwise")
    with pytest.raises(ProblemError, match="1_DataDependent.py: its tensor sizes could not be computed"):
        M.plan(prob, "full", "fp32", 24 * GiB, host_budget=1 << 50)


@pytest.mark.gpu
def test_a_processs_cuda_context_fits_the_plans_figure_for_it():
    # What a worker holds before the candidate allocates anything: the context, torch's cuBLAS and cuDNN
    # handles and workspaces. Measured as the device's free memory before and after a fresh process makes them.
    torch.cuda.init()
    free_before, _ = torch.cuda.mem_get_info()
    code = ("import sys, torch\n"
            "a = torch.randn(512, 512, device='cuda'); (a @ a).sum().item()\n"
            "x = torch.randn(1, 3, 32, 32, device='cuda'); w = torch.randn(8, 3, 3, 3, device='cuda')\n"
            "torch.nn.functional.conv2d(x, w).sum().item(); torch.cuda.synchronize()\n"
            "print('ready', flush=True); sys.stdin.read()\n")
    child = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "ready"
        free_after, _ = torch.cuda.mem_get_info()
    finally:
        child.kill()
        child.wait()
    used = free_before - free_after
    assert 0 < used <= M.CONTEXT_BYTES, f"a CUDA process holds {used / 2**20:.0f} MiB"


def test_lend_budget_scales_with_the_device_between_its_bounds():
    assert M.lend_bytes(None) == M.LEND_BYTES
    assert M.lend_bytes(139 * GiB) == M.MAX_LEND_BYTES  # an H200: 1/8 is 17 GiB, capped at 8
    assert M.lend_bytes(139 * GiB, M.LEND_SHARE_TIGHT) == 139 * GiB // 32  # 4.3 GiB per executor
    assert M.lend_bytes(1000 * GiB) == M.MAX_LEND_BYTES
    assert M.lend_bytes(24 * GiB) == 3 * GiB and M.lend_bytes(24 * GiB, M.LEND_SHARE_TIGHT) == M.LEND_BYTES
    slot = 256 << 20
    assert M.slot_count(slot, "cuda", 139 * GiB) == 32 and M.slot_count(slot, "cuda", 139 * GiB, 32) == 17
    assert M.slot_count(slot, "cuda", 24 * GiB, 32) == 4
    assert M.slot_count(slot, "cpu", 141 * GiB) == M.MIN_SLOTS


def test_the_larger_lend_is_taken_only_where_the_plan_has_room_for_it(monkeypatch):
    """1/8 of the budget is lent where that plan fits and keeps the decoy's room as 1/32's would; otherwise 1/32:
    more calls per timed block never cost a problem its size or its decoy beside correctness. On an H100's budget
    problem 23 at ``medium`` takes 1/8 (more slots); under a 22 GiB budget problem 100 at ``medium`` fits only with
    1/32, and under 16 GiB problem 40 keeps its decoy's room only with 1/32. The medium tier's own rule stays at
    1/32, and a share set for a measurement (``KBENV_LEND_SHARE``) is used as it is."""
    monkeypatch.delenv("KBENV_LEND_SHARE", raising=False)
    roomy = M.plan("kernelbench/level1/23", "medium", None, 75 * GiB, 4, host_budget=1 << 50)
    tight = M._plan("kernelbench/level1/23", "medium", None, 75 * GiB, 4, host_budget=1 << 50, share=32)
    assert roomy.lend_share == 8 and roomy.fits and roomy.n_slots > tight.n_slots
    small = M.plan("kernelbench/level1/100", "medium", None, 22 * GiB, 1, host_budget=1 << 50)
    wide = M._plan("kernelbench/level1/100", "medium", None, 22 * GiB, 1, host_budget=1 << 50, share=8)
    assert small.fits and small.lend_share == 32 and not wide.fits
    decoy = M.plan("kernelbench/level1/40", "full", None, 16 * GiB, 1, host_budget=1 << 50)
    no_room = M._plan("kernelbench/level1/40", "full", None, 16 * GiB, 1, host_budget=1 << 50, share=8)
    assert decoy.decoy_room and decoy.lend_share == 32 and no_room.fits and not no_room.decoy_room
    tier = M.plan("kernelbench/level1/23", "medium", None, 75 * GiB, 4, host_budget=1 << 50, medium_tier_rule=True)
    assert tier.lend_share == 32
    monkeypatch.setenv("KBENV_LEND_SHARE", "8")
    assert M.plan("kernelbench/level1/100", "medium", None, 22 * GiB, 1, host_budget=1 << 50).lend_share == 8


def test_a_lanes_budget_lends_a_quarter_where_that_gives_more_slots_and_keeps_the_rest(monkeypatch):
    """Under lanes a lane's budget is the device's over the lanes, and 1/8 of it gave blocks of few calls (H100, stop
    50, three lanes: 23 two calls against five alone, paid 0.847-1.052x for 1.00x). 1/4 is lent where its plan lends
    more slots and keeps what 1/8 keeps: an H200's third gives 23 at ``medium`` five slots (three at 1/8) and dlrm/2
    32 at full; on an H100's third 88 at full keeps 1/8, because 1/4 would cost it the decoy's room; with one lane
    both shares reach the 8 GiB cap, so 1/8 stays."""
    monkeypatch.delenv("KBENV_LEND_SHARE", raising=False)
    h200, h100 = 139 * GiB // 3, 79 * GiB // 3
    kw = dict(host_budget=1 << 50, l2_bytes=50 << 20)
    p = M.plan("kernelbench/level1/23", "medium", None, h200, 1, **kw)
    eighth = M._plan("kernelbench/level1/23", "medium", None, h200, 1, share=8, **kw)
    assert p.lend_share == M.LEND_SHARE_WIDE and p.n_slots == 5 and eighth.n_slots == 3
    assert p.fits and p.decoy_room
    assert M.plan("dlrm/2", "full", None, h200, 1, **kw).n_slots == 32
    kept = M.plan("kernelbench/level1/88", "full", None, h100, 1, **kw)
    wide = M._plan("kernelbench/level1/88", "full", None, h100, 1, share=M.LEND_SHARE_WIDE, **kw)
    assert kept.lend_share == 8 and kept.decoy_room and wide.n_slots > kept.n_slots and not wide.decoy_room
    alone = M.plan("kernelbench/level1/23", "medium", None, 139 * GiB, 1, **kw)
    assert alone.lend_share == 8 and alone.n_slots == 5


def test_preflight_keeps_the_most_spares_that_fit_and_refuses_only_without_any(monkeypatch):
    """A spare executor only saves start-up time: a plan that fits with fewer spares than the supervisor would
    like gets fewer (and the supervisor keeps that many); the refusal reports what the size needs with none."""
    fake_gpu(monkeypatch, H200_GIB)
    monkeypatch.setattr(M, "host_budget_bytes", lambda: 256 * GiB)
    assert M.preflight("kernelbench/level1/23", "full", None, "cuda").spares == M.default_spares("cuda")
    assert M.preflight("kernelbench/level1/23", "full", None, "cuda", spares=5).spares == 5
    with pytest.raises(M.MemoryPlanError) as e:
        M.preflight("kernelbench/level1/39", "full", None, "cuda")
    none = M.plan_for_device("kernelbench/level1/39", "full", None, "cuda", 0)
    assert f"needs {none.required_bytes / GiB:.1f} GiB" in str(e.value)


def test_preflight_gives_up_spares_beyond_the_first_for_the_decoys_room(monkeypatch):
    """The decoy's room beside correctness is worth more than spares beyond the first (stop 42: without it the
    decoy ran after the timing phase, 4.8 s of each evaluation at three lanes on an H100). Problem 23 at medium on
    a third of an H100: with four spares the plan fits without the room, with three it has it."""
    fake_gpu(monkeypatch, 79.18, name="NVIDIA H100 80GB HBM3")
    monkeypatch.setattr(M, "host_budget_bytes", lambda: 120 * GiB)
    M.set_gpu_lanes(3)
    try:
        four = M.plan_for_device("kernelbench/level1/23", "medium", None, "cuda", 4)
        assert four.fits and not four.decoy_room
        p = M.preflight("kernelbench/level1/23", "medium", None, "cuda")
        assert p.decoy_room and 1 <= p.spares < 4
        assert not M.plan_for_device("kernelbench/level1/23", "medium", None, "cuda", p.spares + 1).decoy_room
        # a problem with the room at four spares keeps all four
        assert M.preflight("kernelbench/level1/88", "full", None, "cuda").spares == 4
    finally:
        M.set_gpu_lanes(None)
    # on the CPU the decoy runs beside correctness whatever the plan says: spares are never given up for it
    cpu = M.preflight("kernelbench/level1/19", "small", None, "cpu")
    assert cpu.spares == M.default_spares("cpu")


def test_the_baselines_region_holds_inputs_only_on_cuda():
    """On cuda the baseline workers' region is lent inputs (they keep no output); on the CPU a slot lends both.
    The medium tier keeps the count it was built with (outputs too), so its sizes do not move."""
    tensor = 112 * 64 * 512 * 512 * 4  # problem 37 at full size: one 7 GiB input, one 7 GiB output
    cuda = M.plan("kernelbench/level1/37", "full", "fp32", 200 * GiB, host_budget=1 << 50)
    tier = M.plan("kernelbench/level1/37", "full", "fp32", 200 * GiB, host_budget=1 << 50, medium_tier_rule=True)
    assert tier.baseline_bytes - cuda.baseline_bytes == cuda.n_slots * tensor  # the outputs' share of the region
    assert cuda.lent_slot_bytes == tier.lent_slot_bytes == cuda.n_slots * 2 * tensor  # the candidate's: both
    cpu = M.plan("kernelbench/level1/37", "small", "fp32", 64 * GiB, device_type="cpu")
    cpu_tier = M.plan("kernelbench/level1/37", "small", "fp32", 64 * GiB, device_type="cpu", medium_tier_rule=True)
    assert cpu.baseline_bytes == cpu_tier.baseline_bytes


def test_the_decoys_room_is_kept_before_the_elastic_cache():
    """Problem 23 at full size on an H200: what the plan leaves after everything it requires holds the decoy's
    executor (a worker and its lent slot) beside correctness, so that room is kept before the reference cache gets
    the rest (up to its share); where it does not, the cache gets everything as before and the decoy runs later."""
    budget = int(H200_GIB * GiB)
    p = M.plan("kernelbench/level1/23", "full", None, budget, 3, host_budget=1 << 50)
    assert p.fits and p.decoy_room and p.room_bytes >= p.decoy_bytes
    assert p.decoy_bytes == p.worker_bytes + p.input_bytes  # one slot of inputs, lent (6 GiB, no padding)
    assert p.reference_cache_bytes == budget - p.required_bytes - p.decoy_bytes
    tier = M.plan("kernelbench/level1/23", "full", None, budget, 3, host_budget=1 << 50, medium_tier_rule=True)
    assert tier.room_bytes == 0 and not tier.decoy_room  # the cache took it all (stop 33: the decoy after timing)
    # a budget with no room for the decoy: the cache gets what is left, and the decoy waits for the timing phase
    tight = M.plan("kernelbench/level1/23", "full", None, p.required_bytes + p.decoy_bytes // 2, 3,
                   host_budget=1 << 50)
    assert tight.fits and not tight.decoy_room and tight.reference_cache_bytes == p.decoy_bytes // 2
    # a small problem: the cache's share binds, and the room holds the decoy many times over
    small = M.plan("kernelbench/level1/88", "full", None, budget, 3, host_budget=1 << 50)
    assert small.reference_cache_bytes == int(M.REFERENCE_CACHE_SHARE * budget) and small.decoy_room


def test_a_lend_share_set_for_a_measurement_gives_more_slots_and_the_plan_counts_them(monkeypatch):
    """``KBENV_LEND_SHARE`` (trusted_bench.py --lend-share): more of the budget lent, so more slots, which the plan
    counts in the lent memory and the baselines' region alike; a value below 1 is refused in one line."""
    budget = 79 * GiB
    monkeypatch.setenv("KBENV_LEND_SHARE", "32")  # the default until stop 41
    base = M.plan("kernelbench/level1/23", "medium", None, budget, 4, host_budget=1 << 50)
    monkeypatch.delenv("KBENV_LEND_SHARE")
    assert M.lend_share() == M.LEND_SHARE == 8
    more = M.plan("kernelbench/level1/23", "medium", None, budget, 4, host_budget=1 << 50)
    assert more.n_slots > base.n_slots >= M.MIN_SLOTS
    assert more.lent_slot_bytes == more.n_slots * more.slot_bytes
    assert more.required_bytes > base.required_bytes
    assert M.lend_bytes(budget) == M.MAX_LEND_BYTES  # 1/8 of 79 GiB, capped
    monkeypatch.setenv("KBENV_LEND_SHARE", "0")
    with pytest.raises(ValueError, match="KBENV_LEND_SHARE"):
        M.lend_bytes(budget)
