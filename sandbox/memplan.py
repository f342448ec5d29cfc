"""The memory plan of one evaluation: the one place that says what an evaluation holds, and whether it fits.

Used by the supervisor (how many slots to lend, the worker's allocator cap, what the reference cache may
keep), by the CLI and the Python API before anything allocates (:func:`preflight`), and per device (the
budget comes from the device, capped by ``KBENV_GPU_MEMORY_CAP``). Nothing here allocates: the problem's
tensor sizes come from one forward of its reference on the meta device
(:func:`kbenv.problems.build_manifest.run_on_meta`, the same run that computes the floor).

What one evaluation holds on the device (each a :class:`MemoryPlan` field, in bytes):

- the supervisor (trusted): its CUDA context; the reference model (in fp32, plus the model at the problem's
  precision when that is not fp32, which gives the output dtypes); the reference entry of the trial in flight
  (inputs and outputs); the reference cache (an LRU of other entries: elastic, it gets what the rest leaves,
  up to a share of the budget); and, at different moments, either the work of computing a reference
  (the fp32 copies of low-precision inputs, at fp32 the TF32-rounded copies the fp32 contract measures with where
  the reference runs a matmul or convolution, and the forward's own allocations) or the copies of the
  candidate's outputs (two runs: two poison patterns) with the checks' temporaries: the plan counts the
  larger of the two.
- the slots lent to the candidate's worker: ``n_slots`` × (inputs + outputs of one call), counted by
  :func:`slot_count` (the supervisor's layout uses the same function).
- the worker's allocator cap: what the candidate may allocate for its weights, intermediates and outputs;
  and its CUDA context.
- spare workers' CUDA contexts (``spares`` of them, started ahead of the next evaluation).
- the trusted baseline workers (one per baseline kind, eager and torch.compile by default), which live
  across evaluations of their problem: each one's context, the model at the problem's precision and the
  blocks its forward leaves in its caching allocator; torch.compile's workspace; and the region they share,
  as many slots as the candidate's so both run under the same cache conditions.
- a fixed headroom for the driver and allocator fragmentation.

On the CPU the same parts live in host memory (no CUDA contexts: each process's resident interpreter
instead). On cuda the host holds each process's resident libraries and the output arena that outputs fall
back to when device memory cannot be shared; the plan checks that against the host budget too.

The constants below are estimates with a margin; ``benchmarks/memplan_checks.py`` measures the checks'
working memory against :func:`check_work_bytes`, and ``benchmarks/memplan_gpu.py`` the peak of whole
evaluations against :attr:`MemoryPlan.total_bytes`.
"""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path

import torch

from kbenv.problems import PRECISIONS, Problem, ProblemError, get_problem, load_namespace
from kbenv.rewards import precision as precision_contract
from kbenv.sandbox.process import WRITE_QUOTA_BYTES

GiB = 1 << 30
MiB = 1 << 20

SIZES = ("small", "medium", "full")  # smallest first; a refusal names the largest smaller size that fits

# One CUDA process's context with torch's cuBLAS/cuDNN handles: ~0.5 GiB measured on an H200 at 00dfa0e;
# 0.75 GiB leaves room for the driver's per-context growth (module loading, lazy kernels).
CONTEXT_BYTES = 768 * MiB
# A CPU-only process's resident interpreter with torch and Triton imported (~0.3 GiB measured on x86-64).
HOST_PROCESS_BYTES_CPU = 512 * MiB
# A CUDA process's resident host memory (CUDA runtime, cuBLAS, cuDNN and torch libraries mapped).
HOST_PROCESS_BYTES_CUDA = 2 * GiB
# What the sandboxes that run candidate code at once may write into their bounded /tmp (host memory): the
# candidate's executor, its decoy's and cuda's four builders (kbenv.sandbox.process.WRITE_QUOTA_BYTES each).
SANDBOX_WRITERS = 6

MIN_SLOTS = 2
MAX_SLOTS = 32
LEND_BYTES = 1 << 30  # cuda: the least lent per executor (the supervisor evicts the L2 before each block)
MAX_LEND_BYTES = 8 << 30  # cuda: the most lent per executor
# cuda: an executor is lent up to 1/8 of the device budget, between the two above, where the plan has room for it;
# otherwise 1/32 (LEND_SHARE_TIGHT, the only share until stop 41; see plan()). On an H100, five evaluations each, one
# lane, 1/8 took 23 at medium from CV 2.23% (4.67 s median wall) to 1.04% (4.08 s) and 88 at full from 3.06% (5.39 s)
# to 0.94% (4.24 s): a block of more calls (5 slots instead of 2 for 23) spreads its fixed costs
# (docs/results/h100-stop41.txt). On H100 and H200 budgets, one to three lanes, every one of the 112 problems keeps
# its largest fitting size and its decoy placement with 1/8; on budgets of 16-26 GiB some fit a size or keep the
# decoy's room only with 1/32, and keep 1/32 (tests/sandbox/test_memplan.py).
# Up to 1/4 (LEND_SHARE_WIDE) where that lends more slots and keeps what 1/8 keeps. That is under lanes, whose
# budgets are the device's over the lanes: at 1/8 a lane of three is lent 3.3 GiB on an H100, where one lane reaches the
# 8 GiB cap. On an H100 (stop 50, three lanes) the shorter blocks cost accuracy: 23 had 2 calls a block against 5
# alone, and the honest kernel was paid 0.847-1.052x (1.00x alone); dlrm/2 13 against 32, 1.35-1.49x (1.61x alone).
# At 1/4 under three lanes, by the plan: on an H200 23 (medium) 5 slots, 88 and 40 16, dlrm/2 32, as with one lane;
# on an H100 40 13 and dlrm/2 26, while 88 and 23 keep 1/8 (1/4 would cost them the decoy's room)
# (tests/sandbox/test_memplan.py).
LEND_SHARE = 8
LEND_SHARE_TIGHT = 32
LEND_SHARE_WIDE = 4


def lend_share() -> int:
    """The share of the device budget an executor is lent, as a divisor: ``LEND_SHARE``, or ``KBENV_LEND_SHARE``
    where set. The variable is a measuring knob (``benchmarks/trusted_bench.py --lend-share``), not a setting: a
    larger share means more slots, so more calls per timed block and fewer fixed costs per call, and more memory per
    plan (which may then run a problem at a smaller size)."""
    env = os.environ.get(_LEND_SHARE_ENV, "")
    if not env:
        return LEND_SHARE
    try:
        share = int(env)
    except ValueError:
        share = 0
    if share < 1:
        raise ValueError(f"{_LEND_SHARE_ENV}={env!r} is not a whole number of at least 1")
    return share


def lend_bytes(device_budget_bytes: int | None, share: int | None = None) -> int:
    """What one executor's slots take on cuda (its inputs lent, its outputs kept): 1/8 of the device budget
    (:func:`lend_share`, or ``share``), at least ``LEND_BYTES`` and at most ``MAX_LEND_BYTES`` (8 GiB on an H100 or an
    H200)."""
    if device_budget_bytes is None:
        return LEND_BYTES
    return max(LEND_BYTES, min(MAX_LEND_BYTES, int(device_budget_bytes) // (share or lend_share())))


def slot_count(slot_bytes: int, device_type: str, device_budget_bytes: int | None = None,
               share: int | None = None) -> int:
    """How many slots an executor is lent: the one rule the supervisor's layout and this plan share. cuda: as
    many as fit in :func:`lend_bytes` (a block of calls then outlasts the fence's fixed cost many times), between
    ``MIN_SLOTS`` and ``MAX_SLOTS``; cpu: ``MIN_SLOTS`` (there is no cache to cover and no GPU timing)."""
    if device_type != "cuda":
        return MIN_SLOTS
    return max(MIN_SLOTS, min(MAX_SLOTS, lend_bytes(device_budget_bytes, share) // max(int(slot_bytes), 1)))
DEFAULT_L2_BYTES = 128 * MiB  # above every L2 of the GPUs kbenv lists (B200: 126 MB): more slots, never fewer
SLOT_ALIGN = 256  # each tensor in a slot starts on this boundary (sandbox/lent.py ALIGN)

OUTPUT_COPIES = 2  # the candidate's outputs of the two poisoned runs, copied into the supervisor's memory
WORKER_CAP_BASE = 1 * GiB  # cuBLAS workspace, Triton autotuning buffers, small tensors
COMPILE_WORKSPACE_BYTES = 1 * GiB  # torch.compile's autotuning and its own buffers in the baseline worker
HEADROOM_BYTES = 512 * MiB  # driver allocations and allocator fragmentation
# On the CPU there is no cuBLAS workspace, driver or CUDA context: smaller fixed parts.
CPU_WORKER_CAP_BASE = 256 * MiB
CPU_COMPILE_WORKSPACE_BYTES = 256 * MiB
CPU_HEADROOM_BYTES = 256 * MiB
BASELINE_PROCESSES = 2  # eager and torch.compile, each a trusted worker kept while its problem stays current
REFERENCE_CACHE_SHARE = 0.25  # the reference cache may keep up to this share of the budget (35 GiB on an H200)

# The checks' temporaries (rewards/checks.py, rewards/invariants.py), measured on the CPU with
# benchmarks/memplan_checks.py; the checks run one after another, so the peak is the largest of:
# - check_finite's torch.isfinite on a whole output: |x| in the output's dtype and three bool masks
#   (7 bytes per fp32 element measured: 1794 MiB for 2^28 elements);
# - the chunked error, written-fraction and determinism figures: temporaries of one chunk of at most 2^26
#   elements (checks._CHUNK; 1094 MiB measured for an fp32 chunk, 1355 MiB for a bf16 one widened to fp32);
# - the invariants' float64 copies of samples of at most 2^26 elements (invariants._SAMPLE_ELEMENTS; 468 MiB
#   measured for 2^24 output elements of a standardized invariant: 29 bytes per element).
CHECK_CHUNK_ELEMENTS = 1 << 26
CHECK_CHUNK_BYTES_PER_ELEMENT = 32
CHECK_MASK_BYTES_PER_ELEMENT = 4  # three bool masks, plus one byte of margin
CHECK_INVARIANT_BYTES_PER_ELEMENT = 40
CHECK_INVARIANT_BYTES = 4 * (1 << 26) * 8
CHECK_BASE_BYTES = 64 * MiB

_CAP_ENV = "KBENV_GPU_MEMORY_CAP"
_LANES_ENV = "KBENV_GPU_LANES"  # supervisors sharing each GPU (kbenv.sandbox.lanes): each plans with its share
_HOST_CAP_ENV = "KBENV_HOST_MEMORY_CAP"
_LEND_SHARE_ENV = "KBENV_LEND_SHARE"  # lend_share(): a measuring knob for the slot count


class MemoryPlanError(ValueError):
    """An evaluation does not fit the device (or the host). The message is one line naming the problem, the
    size, what it needs against the budget and the size that fits; ``plan`` is the refused plan and
    ``fitting_size`` the largest smaller size that fits (None when none does)."""

    def __init__(self, message: str, plan: "MemoryPlan | None" = None, fitting_size: str | None = None):
        super().__init__(message)
        self.plan = plan
        self.fitting_size = fitting_size


# ------------------------------------------------------------------------------------------- budgets

def parse_bytes(text: str | int) -> int:
    """``"40G"``, ``"40GiB"`` (binary), ``"40GB"`` (decimal), ``"512M"``, ``"1.5T"`` or a byte count."""
    if isinstance(text, int):
        return text
    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]*)?)\s*([kKmMgGtT]?)(i?[bB]?)\s*", str(text))
    if not m:
        raise ValueError(f"not a memory size: {text!r} (examples: 40G, 80GiB, 24GB, 512M)")
    value, unit, suffix = float(m.group(1)), m.group(2).upper(), m.group(3)
    if not unit:
        if suffix.lower() not in ("", "b"):
            raise ValueError(f"not a memory size: {text!r} (examples: 40G, 80GiB, 24GB, 512M)")
        return int(value)
    power = "KMGT".index(unit) + 1
    base = 1000 if suffix in ("B", "b") else 1024  # "GB" is decimal; "G" and "GiB" are binary
    return int(value * base ** power)


_gpu_cap: int | None = None


def set_gpu_memory_cap(cap: int | str | None) -> None:
    """Cap the GPU memory kbenv plans with (e.g. ``"40G"`` to act as a 40 GB card on a bigger one).

    Also sets ``KBENV_GPU_MEMORY_CAP`` in this process's environment, so processes started afterwards (Ray
    actors, workers) honour the same cap; None removes it.
    """
    global _gpu_cap
    if cap is None:
        _gpu_cap = None
        os.environ.pop(_CAP_ENV, None)
        return
    _gpu_cap = parse_bytes(cap)
    if _gpu_cap <= 0:
        raise ValueError(f"GPU memory cap must be positive, got {cap!r}")
    os.environ[_CAP_ENV] = cap.strip() if isinstance(cap, str) else str(_gpu_cap)


def gpu_memory_cap() -> int | None:
    """The cap in bytes: :func:`set_gpu_memory_cap`'s value, else ``KBENV_GPU_MEMORY_CAP``, else None."""
    if _gpu_cap is not None:
        return _gpu_cap
    env = os.environ.get(_CAP_ENV)
    if not env:
        return None
    try:
        return parse_bytes(env)
    except ValueError:
        raise ValueError(f"{_CAP_ENV}={env!r} is not a memory size (examples: 40G, 80GiB, 24GB)") from None


def set_gpu_lanes(lanes: int | None) -> None:
    """How many supervisors share each GPU (``kbenv.sandbox.lanes``): each plans with the budget over ``lanes``.
    Also sets ``KBENV_GPU_LANES`` in this process's environment, so processes started afterwards (Ray actors)
    plan the same way; None or 1 removes it."""
    if lanes is None or int(lanes) <= 1:
        os.environ.pop(_LANES_ENV, None)
        return
    os.environ[_LANES_ENV] = str(int(lanes))


def gpu_lanes() -> int:
    """The supervisors sharing each GPU (``KBENV_GPU_LANES``, default 1)."""
    env = os.environ.get(_LANES_ENV, "")
    try:
        return max(int(env), 1) if env else 1
    except ValueError:
        raise ValueError(f"{_LANES_ENV}={env!r} is not a whole number of lanes") from None


def host_budget_bytes() -> int:
    """The host memory an evaluation may plan with: physical memory, capped by the cgroup's limit and by
    ``KBENV_HOST_MEMORY_CAP`` when set."""
    limits = []
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    limits.append(int(line.split()[1]) * 1024)
                    break
    except OSError:
        pass
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            v = Path(path).read_text().strip()
        except OSError:
            continue
        if v.isdigit() and int(v) < (1 << 60):
            limits.append(int(v))
    env = os.environ.get(_HOST_CAP_ENV)
    if env:
        limits.append(parse_bytes(env))
    if not limits:
        limits.append(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    return min(limits)


def device_budget_bytes(device: torch.device | str) -> int:
    """The memory an evaluation on ``device`` may plan with: a GPU's total memory capped by
    :func:`gpu_memory_cap`, over the lanes sharing it (:func:`gpu_lanes`); the host's budget
    (:func:`host_budget_bytes`) for ``cpu``."""
    device = torch.device(device)
    if device.type == "cpu":
        return host_budget_bytes()
    if device.type != "cuda":
        raise ValueError(f"no memory plan for device type {device.type!r}")
    total = torch.cuda.get_device_properties(device.index if device.index is not None else 0).total_memory
    cap = gpu_memory_cap()
    return (min(total, cap) if cap else total) // gpu_lanes()


def l2_bytes(device: torch.device | str) -> int:
    """The device's L2 cache in bytes (0 on the CPU, where the slots do not need to cover a cache)."""
    device = torch.device(device)
    if device.type != "cuda":
        return 0
    props = torch.cuda.get_device_properties(device.index if device.index is not None else 0)
    return int(getattr(props, "L2_cache_size", 0)) or DEFAULT_L2_BYTES


# ------------------------------------------------------------------------------------------ footprint

@dataclasses.dataclass(frozen=True)
class Footprint:
    """A problem's tensor sizes at one size and precision, from its reference on the meta device.

    Attributes:
        input_bytes: one call's inputs at the precision (floating-point tensors cast, others as drawn).
        input_slot_bytes: the same laid out in a slot (each tensor aligned to ``SLOT_ALIGN``).
        output_bytes: one call's outputs at the precision.
        output_slot_bytes: the same laid out in a slot.
        output_elements: elements of all outputs.
        largest_output_elements: elements of the largest output (the checks work on one at a time).
        largest_output_bytes: bytes of the largest output.
        param_bytes: parameters and buffers at the precision.
        forward_peak_bytes: the most a forward at the precision allocates at once, its outputs included.
        reference_param_bytes: parameters and buffers in fp32 (the reference always runs in fp32).
        reference_upcast_bytes: the fp32 copies of floating-point inputs made when the precision is not fp32.
        reference_forward_peak_bytes: the most the fp32 reference forward allocates at once.
        contract_copy_bytes: where the reference runs a matmul or convolution, what the precision contract's
            measurement adds (``References.contract``): at fp32 the TF32-rounded copies of its floating-point
            inputs and weights; at bf16 the native bf16 forward's outputs and one rounded copy, held beside the
            fp32 forward; 0 otherwise.
    """

    input_bytes: int
    input_slot_bytes: int
    output_bytes: int
    output_slot_bytes: int
    output_elements: int
    largest_output_elements: int
    largest_output_bytes: int
    param_bytes: int
    forward_peak_bytes: int
    reference_param_bytes: int
    reference_upcast_bytes: int
    reference_forward_peak_bytes: int
    contract_copy_bytes: int = 0

    @property
    def slot_bytes(self) -> int:
        return max(self.input_slot_bytes + self.output_slot_bytes, SLOT_ALIGN)


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


def _align(n: int) -> int:
    return (n + SLOT_ALIGN - 1) // SLOT_ALIGN * SLOT_ALIGN


_FOOTPRINTS: dict[tuple, Footprint] = {}


def footprint(problem: Problem, size: str, precision: str, overrides: dict | None = None) -> Footprint:
    """The problem's :class:`Footprint` at ``size`` (``overrides``, when given, replace the size's own module
    constants: the medium-size builder searches with them). Cached per problem file, size and precision."""
    from kbenv.problems.build_manifest import run_on_meta  # the floor's meta run (a script module)

    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {sorted(PRECISIONS)}, got {precision!r}")
    over = problem.overrides(size) if overrides is None else dict(overrides)
    key = (problem.id, problem.source_sha256, precision, tuple(sorted(over.items())))
    if key in _FOOTPRINTS:
        return _FOOTPRINTS[key]
    ns = load_namespace(problem.source, str(problem.path), over)
    try:
        run = run_on_meta(ns, PRECISIONS[precision])
    except Exception as e:  # noqa: BLE001 - e.g. a data-dependent op that the meta device cannot run
        raise ProblemError(f"{problem.path}: its tensor sizes could not be computed on the meta device, so no "
                           f"memory plan can be made for it: {e!r}") from e
    ins = [x for x in run.inputs if isinstance(x, torch.Tensor)]
    params = list(run.model.parameters()) + list(run.model.buffers())
    contract = 0
    if precision == "fp32":
        ref_params, upcast, ref_peak = sum(_nbytes(p) for p in params), 0, run.forward_peak_bytes
        if precision_contract.tensor_core_eligible(run.model, run.inputs) is not False:  # None: it may be
            contract = sum(_nbytes(t) for t in ins + params if t.dtype == torch.float32)
    else:
        ref = run_on_meta(ns, torch.float32)
        ref_params = sum(_nbytes(p) for p in list(ref.model.parameters()) + list(ref.model.buffers()))
        upcast = sum(_nbytes(x) for x in ref.inputs if isinstance(x, torch.Tensor) and x.is_floating_point())
        ref_peak = ref.forward_peak_bytes
        if precision_contract.tensor_core_eligible(ref.model, ref.inputs) is not False:  # the bf16 contract holds
            contract = 2 * sum(_nbytes(o) for o in run.outputs)  # the native outputs and a rounded copy beside
            # the fp32 forward (the native forward itself runs first, alone: less than the fp32 one)
    fp = Footprint(
        input_bytes=sum(_nbytes(x) for x in ins),
        input_slot_bytes=sum(_align(_nbytes(x)) for x in ins),
        output_bytes=sum(_nbytes(o) for o in run.outputs),
        output_slot_bytes=sum(_align(_nbytes(o)) for o in run.outputs),
        output_elements=sum(o.numel() for o in run.outputs),
        largest_output_elements=max((o.numel() for o in run.outputs), default=0),
        largest_output_bytes=max((_nbytes(o) for o in run.outputs), default=0),
        param_bytes=sum(_nbytes(p) for p in params),
        forward_peak_bytes=run.forward_peak_bytes,
        reference_param_bytes=ref_params,
        reference_upcast_bytes=upcast,
        reference_forward_peak_bytes=ref_peak,
        contract_copy_bytes=contract,
    )
    _FOOTPRINTS[key] = fp
    return fp


def check_work_bytes(fp: Footprint) -> int:
    """The checks' temporaries for one trial's outputs, beyond the outputs themselves: an upper bound of what
    ``rewards.verdict.correctness_checks`` allocates (``benchmarks/memplan_checks.py`` measures it)."""
    whole = fp.largest_output_bytes + CHECK_MASK_BYTES_PER_ELEMENT * fp.largest_output_elements
    chunked = CHECK_CHUNK_BYTES_PER_ELEMENT * min(fp.largest_output_elements, CHECK_CHUNK_ELEMENTS)
    invariants = min(CHECK_INVARIANT_BYTES, CHECK_INVARIANT_BYTES_PER_ELEMENT * fp.output_elements)
    return CHECK_BASE_BYTES + max(whole, chunked, invariants)


# ------------------------------------------------------------------------------------------------ plan

@dataclasses.dataclass(frozen=True)
class MemoryPlan:
    """What one evaluation holds, part by part, in bytes, against the budget it was planned for.

    Parts (on the device; in host memory on the CPU, where the ``*_context_bytes`` are each process's
    resident interpreter):

    - held throughout (:attr:`held_bytes`): ``supervisor_context_bytes``, ``reference_model_bytes``,
      ``reference_entry_bytes`` (the inputs and outputs of the trial in flight: one at a time, the official pair's
      included, which an evaluation never holds between uses), ``reference_cache_bytes``
      (what the LRU may keep during this evaluation: elastic, whatever the rest leaves, up to
      ``REFERENCE_CACHE_SHARE`` of the budget; 0 when the plan does not fit), ``lent_slot_bytes`` (``n_slots``
      × ``slot_bytes``), ``worker_cap_bytes`` (the candidate worker's allocator cap), ``worker_context_bytes``,
      ``spare_context_bytes``, ``baseline_bytes`` (``baseline_processes`` trusted workers: contexts, models,
      their forwards' cached blocks, torch.compile's workspace, and their own region of ``n_slots`` slots) and
      ``headroom_bytes``;
    - at different moments, the supervisor's transient (:attr:`supervisor_transient_bytes`): the larger of
      ``reference_work_bytes`` (computing a reference: the fp32 copies of low-precision inputs and the
      forward's own allocations) and ``output_copies_bytes`` + ``check_work_bytes`` (the candidate's outputs
      of the two poisoned runs, copied, and the checks' temporaries).

    ``total_bytes`` is their sum; ``required_bytes`` the same without the elastic cache. ``fits`` holds when
    ``required_bytes`` is within ``budget_bytes`` and ``host_bytes`` within ``host_budget_bytes``.

    The contract that makes this hold by construction: the supervisor keeps its cache within
    ``reference_cache_bytes``, lends ``n_slots`` slots of ``slot_bytes`` to the candidate and as many to the
    baseline workers, caps the worker's allocator at ``worker_cap_bytes`` (:meth:`worker_memory_fraction`),
    keeps at most ``spares`` spares and ``baseline_processes`` baseline workers, and frees a reference's work
    before it copies the candidate's outputs (``empty_cache`` between them).
    """

    problem: str
    size: str
    precision: str
    device_type: str
    budget_bytes: int
    host_budget_bytes: int
    spares: int
    n_slots: int
    slot_bytes: int
    input_bytes: int
    output_bytes: int
    supervisor_context_bytes: int
    reference_model_bytes: int
    reference_entry_bytes: int
    reference_cache_bytes: int
    reference_work_bytes: int
    output_copies_bytes: int
    check_work_bytes: int
    lent_slot_bytes: int
    worker_cap_bytes: int
    worker_context_bytes: int
    spare_context_bytes: int
    baseline_processes: int
    baseline_bytes: int
    headroom_bytes: int
    host_bytes: int
    decoy_bytes: int = 0
    lend_share: int = LEND_SHARE  # the share of the budget its slots were counted with (memplan.slot_count)

    @property
    def held_bytes(self) -> int:
        """What the evaluation holds throughout, the cache included."""
        return (self.supervisor_context_bytes + self.reference_model_bytes + self.reference_entry_bytes
                + self.reference_cache_bytes + self.lent_slot_bytes + self.worker_cap_bytes
                + self.worker_context_bytes + self.spare_context_bytes + self.baseline_bytes + self.headroom_bytes)

    @property
    def supervisor_transient_bytes(self) -> int:
        return max(self.reference_work_bytes, self.output_copies_bytes + self.check_work_bytes)

    @property
    def total_bytes(self) -> int:
        return self.held_bytes + self.supervisor_transient_bytes

    @property
    def room_bytes(self) -> int:
        """What the plan leaves free beside everything it holds (the elastic cache included): the room for a
        process still dying (a killed executor, an old baseline set) or for a second worker (the decoy's beside
        correctness)."""
        return self.budget_bytes - self.total_bytes

    @property
    def worker_bytes(self) -> int:
        """What one candidate worker may hold as planned: its allocator cap and its context."""
        return self.worker_cap_bytes + self.worker_context_bytes

    @property
    def decoy_room(self) -> bool:
        """Whether the plan leaves room for the decoy's executor beside correctness (``decoy_bytes``: a worker and
        its one lent slot); where it does, :func:`plan` has kept that room out of the elastic cache."""
        return self.fits and self.room_bytes >= self.decoy_bytes

    @property
    def required_bytes(self) -> int:
        """Everything but the elastic reference cache: what must fit."""
        return self.total_bytes - self.reference_cache_bytes

    @property
    def fits_device(self) -> bool:
        return self.required_bytes <= self.budget_bytes

    @property
    def fits_host(self) -> bool:
        return self.host_bytes <= self.host_budget_bytes

    @property
    def fits(self) -> bool:
        return self.fits_device and self.fits_host

    def worker_memory_fraction(self, device_total_bytes: int) -> float:
        """The share of the whole device (``torch.cuda.set_per_process_memory_fraction`` counts against the
        device's total memory, not against a cap) that gives the worker's allocator ``worker_cap_bytes``."""
        return min(1.0, self.worker_cap_bytes / device_total_bytes)

    def explain(self) -> str:
        """One line: the peak against the budget, and the parts that make it."""
        g = lambda n: f"{n / GiB:.1f}"  # noqa: E731
        where = "GPU" if self.device_type == "cuda" else "host"
        verdict = "fits" if self.fits else "does not fit"
        contexts = (self.supervisor_context_bytes + self.worker_context_bytes + self.spare_context_bytes)
        return (f"{self.problem} size={self.size} {self.precision}: {g(self.total_bytes)} of {g(self.budget_bytes)}"
                f" GiB {where}, {verdict}: reference model {g(self.reference_model_bytes)} + entry "
                f"{g(self.reference_entry_bytes)} + cache {g(self.reference_cache_bytes)} + max(work "
                f"{g(self.reference_work_bytes)}, output copies {g(self.output_copies_bytes)} + checks "
                f"{g(self.check_work_bytes)}); slots {self.n_slots}x{g(self.slot_bytes)}; worker cap "
                f"{g(self.worker_cap_bytes)}; {self.baseline_processes} baseline workers {g(self.baseline_bytes)};"
                f" contexts {g(contexts)}; headroom {g(self.headroom_bytes)}; host {g(self.host_bytes)} of "
                f"{g(self.host_budget_bytes)} GiB")

    def to_dict(self) -> dict:
        """The fields and the derived figures, JSON-safe (for results' facts and reports)."""
        d = dataclasses.asdict(self)
        d.update(held_bytes=self.held_bytes, supervisor_transient_bytes=self.supervisor_transient_bytes,
                 total_bytes=self.total_bytes, required_bytes=self.required_bytes, fits=self.fits)
        return d


def plan(problem: Problem | str, size: str, precision: str | None, device_budget_bytes: int, spares: int = 1, *,
         device_type: str = "cuda", l2_bytes: int = DEFAULT_L2_BYTES, host_budget: int | None = None,
         overrides: dict | None = None, baseline_processes: int = BASELINE_PROCESSES,
         medium_tier_rule: bool = False) -> MemoryPlan:
    """Plan one evaluation of ``problem`` at ``size`` and ``precision`` (None: the problem's default)
    against a device budget (see :class:`MemoryPlan` for the parts and the contract).

    ``device_type`` ``cpu`` plans host memory (then ``device_budget_bytes`` is the host budget and the host
    budget defaults to it); ``l2_bytes`` is the device's L2 cache (:func:`l2_bytes`); ``host_budget``
    defaults to :func:`host_budget_bytes` on cuda; ``overrides`` replace the size's module constants;
    ``baseline_processes`` is the number of baseline kinds (eager, torch.compile) kept as workers.

    ``medium_tier_rule``: the count the ``medium`` tier was built with (``sandbox/build_medium.py``), kept so
    that the tier's sizes stay what users have compared results at: the baselines' region counted with outputs
    (it holds inputs only on cuda), no room kept for the decoy, and 1/32 of the budget lent. Every evaluation plans
    without it.

    The slots are counted with 1/8 of the budget lent (``LEND_SHARE``) where that plan fits and keeps the decoy's
    room as the plan with 1/32 (``LEND_SHARE_TIGHT``) would; otherwise with 1/32: more calls per timed block are
    worth less than a larger size or the decoy beside correctness. With 1/4 (``LEND_SHARE_WIDE``) where that keeps
    the same and lends more slots than 1/8 (a lane's budget). ``KBENV_LEND_SHARE`` (a measuring knob) is used
    as it is.
    """
    kw = dict(spares=spares, device_type=device_type, l2_bytes=l2_bytes, host_budget=host_budget,
              overrides=overrides, baseline_processes=baseline_processes, medium_tier_rule=medium_tier_rule)
    if medium_tier_rule:
        return _plan(problem, size, precision, device_budget_bytes, share=LEND_SHARE_TIGHT, **kw)
    share = lend_share()
    p = _plan(problem, size, precision, device_budget_bytes, share=share, **kw)
    if device_type != "cuda" or share >= LEND_SHARE_TIGHT or os.environ.get(_LEND_SHARE_ENV):
        return p
    tight = _plan(problem, size, precision, device_budget_bytes, share=LEND_SHARE_TIGHT, **kw)

    def keeps(q: MemoryPlan) -> bool:  # what 1/32 would have: the size, and the decoy's room
        return (q.fits or not tight.fits) and (q.decoy_room or not tight.decoy_room)
    if not keeps(p):
        return tight
    wide = _plan(problem, size, precision, device_budget_bytes, share=LEND_SHARE_WIDE, **kw)
    return wide if keeps(wide) and wide.n_slots > p.n_slots else p


def _plan(problem: Problem | str, size: str, precision: str | None, device_budget_bytes: int, spares: int = 1, *,
          device_type: str = "cuda", l2_bytes: int = DEFAULT_L2_BYTES, host_budget: int | None = None,
          overrides: dict | None = None, baseline_processes: int = BASELINE_PROCESSES,
          medium_tier_rule: bool = False, share: int = LEND_SHARE) -> MemoryPlan:
    if isinstance(problem, str):
        problem = get_problem(problem)
    precision = precision or problem.precision_default
    if device_type not in ("cuda", "cpu"):
        raise ValueError(f"device_type must be 'cuda' or 'cpu', got {device_type!r}")
    cuda = device_type == "cuda"
    fp = footprint(problem, size, precision, overrides)
    if host_budget is None:
        host_budget = host_budget_bytes() if cuda else device_budget_bytes
    # A slot is a call's inputs and outputs: lent together on the CPU. On cuda the inputs are lent and each slot's
    # outputs stay in the candidate's executor until that slot's next call, so its slots hold n_slots x both, one
    # part lent and one its own. The baseline workers' region holds inputs only on cuda: they keep no output (their
    # forward's is counted in their own part, baseline_bytes).
    slot = fp.slot_bytes
    n_slots = slot_count(slot, device_type, device_budget_bytes, share)
    lent = n_slots * slot
    baseline_region = n_slots * (fp.input_slot_bytes if cuda and not medium_tier_rule else slot)
    context = CONTEXT_BYTES if cuda else HOST_PROCESS_BYTES_CPU
    worker_base = WORKER_CAP_BASE if cuda else CPU_WORKER_CAP_BASE
    compile_workspace = COMPILE_WORKSPACE_BYTES if cuda else CPU_COMPILE_WORKSPACE_BYTES
    spares = max(int(spares), 0)
    parts = dict(
        supervisor_context_bytes=context,
        reference_model_bytes=fp.reference_param_bytes + (fp.param_bytes if precision != "fp32" else 0),
        reference_entry_bytes=fp.input_bytes + fp.output_bytes,
        reference_cache_bytes=0,
        reference_work_bytes=fp.reference_upcast_bytes + fp.reference_forward_peak_bytes + fp.contract_copy_bytes,
        output_copies_bytes=OUTPUT_COPIES * fp.output_bytes,
        check_work_bytes=check_work_bytes(fp),
        lent_slot_bytes=lent,
        worker_cap_bytes=worker_base + fp.param_bytes + fp.input_bytes + 2 * fp.forward_peak_bytes,
        worker_context_bytes=context,
        spare_context_bytes=spares * context,
        baseline_processes=baseline_processes,
        baseline_bytes=baseline_processes * (context + fp.param_bytes + fp.forward_peak_bytes) + compile_workspace
        + baseline_region,
        headroom_bytes=HEADROOM_BYTES if cuda else CPU_HEADROOM_BYTES)
    if cuda:
        # Each process's libraries (supervisor, worker, baseline workers, spares), the models built on the host
        # before they move (fp32), and the host arena that outputs fall back to when device memory cannot be
        # shared.
        host = ((2 + spares + baseline_processes) * HOST_PROCESS_BYTES_CUDA
                + (2 + baseline_processes) * fp.reference_param_bytes + fp.output_slot_bytes
                + SANDBOX_WRITERS * WRITE_QUOTA_BYTES)
    else:
        host = 0  # set below: on the CPU the plan's parts are the host's
    # The decoy's executor beside correctness: a worker and its one lent slot (inputs only on cuda).
    decoy = parts["worker_cap_bytes"] + context + (fp.input_slot_bytes if cuda else slot)
    p = MemoryPlan(problem=problem.id, size=size, precision=precision, device_type=device_type,
                   budget_bytes=int(device_budget_bytes), host_budget_bytes=int(host_budget), spares=spares,
                   n_slots=n_slots, slot_bytes=slot, input_bytes=fp.input_bytes, output_bytes=fp.output_bytes,
                   host_bytes=host, decoy_bytes=decoy, lend_share=share, **parts)
    # The elastic cache gets what the rest leaves, up to its share; on cuda, where the rest leaves room for the
    # decoy's executor, that room is kept first: the decoy then runs beside correctness instead of after the
    # timing phase (2.8-3.2 s of problem 23's evaluation at full size on the H200), and a reference entry the cache
    # would have kept costs a few milliseconds of GPU work to make again.
    free = int(device_budget_bytes) - p.required_bytes
    if cuda and not medium_tier_rule and free >= decoy:
        free -= decoy
    cache = max(0, min(int(REFERENCE_CACHE_SHARE * device_budget_bytes), free))
    p = dataclasses.replace(p, reference_cache_bytes=cache)
    if not cuda:
        p = dataclasses.replace(p, host_bytes=p.total_bytes)
    return p


def default_spares(device_type: str) -> int:
    """Clean executors a supervisor keeps started ahead by default: on cuda four, two on the CPU. An evaluation
    takes two (the candidate's and the decoy's), and the ones spawned in their place need their imports (2-4 s)
    and then, started when the evaluation ends, 1-2 s for their CUDA contexts. With two spares the next evaluation
    waited that long for its executor (1.3-1.8 s per evaluation in back-to-back H200 rollouts); with three its
    decoy took the one spawned when the last decoy was disposed, still importing or creating its context
    (1.2-3.1 s on the path in 13 of 16 evaluations, one-lane rollout, H100, stop 36); with four, each executor
    taken was spawned an evaluation earlier. On the CPU (no context to create) two cover both executors of an
    evaluation: with one, the decoy's was started on demand (2 s of each evaluation on the 2-core CI machine). A
    plan without room for them keeps fewer (:func:`preflight`)."""
    return 4 if device_type == "cuda" else 2


def plan_for_device(problem: Problem | str, size: str, precision: str | None, device: torch.device | str,
                    spares: int | None = None) -> MemoryPlan:
    """:func:`plan` against ``device``'s budget (:func:`device_budget_bytes`) and L2 cache, with the supervisor's
    spares (``None``: its default for the device, :func:`default_spares`); never raises for a plan that does not
    fit (see :func:`preflight` for that)."""
    device = torch.device(device)
    spares = default_spares(device.type) if spares is None else spares
    return plan(problem, size, precision, device_budget_bytes(device), spares, device_type=device.type,
                l2_bytes=l2_bytes(device))


def preflight(problem: Problem | str, size: str, precision: str | None, device: torch.device | str,
              spares: int | None = None) -> MemoryPlan:
    """The plan for evaluating ``problem`` at ``size`` on ``device``, checked before anything allocates.

    ``spares`` (``None``: :func:`default_spares`) is how many started spare executors the supervisor would like to
    keep; when that many do not fit but fewer do, the plan has fewer (``plan.spares``, which the supervisor then
    keeps): a spare only saves start-up time, and a problem that fits without one is not refused for it.
    Returns the plan when it fits. Otherwise raises :class:`MemoryPlanError` with one line naming the problem,
    the size, what it needs against the budget (and the cap, when one is set), and the largest smaller size
    that fits (``use --size medium``), or that none does.
    """
    if isinstance(problem, str):
        problem = get_problem(problem)
    if size not in SIZES:
        raise ValueError(f"size must be one of {', '.join(SIZES)}, got {size!r}")
    precision = precision or problem.precision_default
    device = torch.device(device)
    want = default_spares(device.type) if spares is None else max(int(spares), 0)
    fitting = [q for q in (plan_for_device(problem, size, precision, device, n) for n in range(want, -1, -1)) if q.fits]
    if fitting:
        # The decoy's room beside correctness is worth more than spares beyond the first: without it the decoy runs
        # after the timing phase, on the path (4.8 s an evaluation at three lanes on an H100, stop 42, where seven
        # of the 16 known-good problems had the room with one spare and not with four); a missing spare costs its
        # start-up, which overlaps correctness. (cuda only: on the CPU the decoy runs beside correctness anyway.)
        roomy = [q for q in fitting if q.decoy_room and q.spares >= min(1, want) and device.type == "cuda"]
        return roomy[0] if roomy else fitting[0]
    p = plan_for_device(problem, size, precision, device, 0)
    # refused: p is the plan with no spare, the least this size needs
    fit = None
    for smaller in reversed(SIZES[:SIZES.index(size)]):
        q = plan_for_device(problem, smaller, precision, device, want)
        if q.fits and q.required_bytes < p.required_bytes:
            fit = q
            break
    host_cap = f" ({_HOST_CAP_ENV}={os.environ[_HOST_CAP_ENV]})" if os.environ.get(_HOST_CAP_ENV) else ""
    if p.fits_device:
        need, budget, what, cap = p.host_bytes, p.host_budget_bytes, "host memory", host_cap
    elif device.type == "cuda":
        need, budget, what = p.required_bytes, p.budget_bytes, "GPU memory"
        cap = f" ({_CAP_ENV}={os.environ[_CAP_ENV]})" if gpu_memory_cap() else ""
        if gpu_lanes() > 1:
            cap += f" (a share of it: {gpu_lanes()} lanes share the GPU)"
    else:
        need, budget, what, cap = p.required_bytes, p.budget_bytes, "host memory", host_cap
    advice = (f"use --size {fit.size} ({fit.required_bytes / GiB:.1f} GiB)" if fit else
              "no size of it fits this device")
    msg = (f"{problem.id} at --size {size} ({precision}) needs {need / GiB:.1f} GiB of {what}, {device} allows "
           f"{budget / GiB:.1f} GiB{cap}: {advice}")
    raise MemoryPlanError(msg, p, fit.size if fit else None)


__all__ = [
    "MemoryPlan", "MemoryPlanError", "Footprint", "plan", "plan_for_device", "preflight", "footprint", "default_spares",
    "check_work_bytes",
    "device_budget_bytes", "host_budget_bytes", "l2_bytes", "gpu_memory_cap", "set_gpu_memory_cap", "parse_bytes",
    "gpu_lanes", "set_gpu_lanes",
    "SIZES",
]
