"""Peak figures per GPU for the physical floor: no honest kernel moves bytes faster than the memory's peak
bandwidth or computes faster than the tensor cores' peak rate, so a time below ``max(bytes / bandwidth,
FLOPs / rate)`` is rejected as ``impossible_speed`` and never paid.

The floor must stay a lower bound on every GPU: a figure too low rejects honest kernels, a figure too high
only loosens the floor. So every rate here is the datasheet's dense peak (sparsity figures halved), rounded
up, and a GPU is recognised only from what its driver reports (name, compute capability, memory size). A
GPU that no row matches gets figures from :func:`probe_peaks`: a trusted measurement in the supervisor's
process, once per actor, divided by a stated efficiency bound so that it stays above the true peak.

Precision keys are kbenv's: ``bf16``, ``fp16`` and ``fp32``; ``fp32`` is the TF32 tensor-core rate, not the
plain fp32 units' (split-TF32 schemes reach fp32 accuracy on tensor cores, and the floor must stay a lower
bound).
"""

from __future__ import annotations

import dataclasses
import re
from types import MappingProxyType

import torch

GB = 10 ** 9
TB = 10 ** 12
TFLOPS = 10 ** 12


@dataclasses.dataclass(frozen=True)
class Peaks:
    """Peak figures of one GPU.

    Attributes:
        bytes_per_s: peak device-memory bandwidth (HBM or GDDR), bytes per second.
        flops: peak dense tensor-core rate per kbenv precision (``bf16``, ``fp16``, ``fp32`` = TF32), FLOP/s.
        source: where the figures come from (a datasheet and its address, or the probe and its margins).
        name: the GPU they are for (the table's row, or the driver's name for a probed GPU).
    """

    bytes_per_s: float
    flops: MappingProxyType
    source: str
    name: str

    def __post_init__(self):
        object.__setattr__(self, "flops", MappingProxyType(dict(self.flops)))

    def __reduce__(self):  # picklable (Ray), although a mapping proxy is not
        return (Peaks, (self.bytes_per_s, dict(self.flops), self.source, self.name))

    def rate(self, precision: str) -> float:
        """The peak rate at a kbenv precision (``fp32`` is the TF32 tensor-core rate)."""
        try:
            return self.flops[precision]
        except KeyError:
            raise ValueError(f"no peak rate for precision {precision!r}; known: {sorted(self.flops)}") from None

    def floor_ms(self, problem, precision: str) -> float:
        """The problem's physical floor on this GPU, in ms (:meth:`kbenv.problems.Problem.floor_ms`)."""
        return problem.floor_ms(precision, self.bytes_per_s, self.rate(precision))

    def to_dict(self) -> dict:
        """JSON-safe, for a result's facts: which figures the floor used."""
        return {"name": self.name, "bytes_per_s": self.bytes_per_s, "flops": dict(self.flops), "source": self.source}


@dataclasses.dataclass(frozen=True)
class GpuRow:
    """A row of the table: which driver reports it matches, and the datasheet's figures.

    ``name_pattern`` is a regular expression searched (case-insensitively) in the driver's device name;
    ``capability`` the compute capability; ``memory_gib`` the range of total memory the driver reports, in
    GiB (telling 40 GB from 80 GB parts apart). Rates are dense, in FLOP/s.
    """

    name: str
    name_pattern: str
    capability: tuple
    memory_gib: tuple
    bytes_per_s: float
    bf16: float
    fp16: float
    tf32: float
    source: str

    def matches(self, name: str, capability: tuple, total_memory_bytes: int) -> bool:
        lo, hi = self.memory_gib
        return (tuple(capability) == self.capability and re.search(self.name_pattern, name, re.I) is not None
                and lo <= total_memory_bytes / 2 ** 30 <= hi)

    def peaks(self) -> Peaks:
        return Peaks(self.bytes_per_s, {"bf16": self.bf16, "fp16": self.fp16, "fp32": self.tf32}, self.source,
                     self.name)


_A100 = "NVIDIA A100 Tensor Core GPU datasheet (nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf), " \
        "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/" \
        "nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf"
_H100 = "NVIDIA H100 Tensor Core GPU datasheet, https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet"
_H200 = "NVIDIA H200 Tensor Core GPU product page and datasheet, https://www.nvidia.com/en-us/data-center/h200/"
_B200 = "NVIDIA HGX B200 specifications (per GPU: 1/8 of the 8-GPU board), https://www.nvidia.com/en-us/data-center/hgx/"
_GB200 = "NVIDIA GB200 NVL72 specifications (per GPU: 1/72 of the rack), https://www.nvidia.com/en-us/data-center/gb200-nvl72/"
_L40S = "NVIDIA L40S datasheet, https://resources.nvidia.com/en-us-l40s/l40s-datasheet-28413"
_L40 = "NVIDIA L40 datasheet, https://www.nvidia.com/en-us/data-center/l40/"
_GH200 = "NVIDIA GH200 Grace Hopper Superchip datasheet, https://www.nvidia.com/en-us/data-center/grace-hopper-superchip/"
_ADA = "NVIDIA Ada GPU Architecture whitepaper v2.1, Appendix A (GeForce RTX 4090), " \
       "https://images.nvidia.com/aem-dam/Solutions/geforce/ada/nvidia-ada-gpu-architecture.pdf"
_A10 = "NVIDIA A10 datasheet, https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a10/pdf/" \
       "datasheet-new/nvidia-a10-datasheet.pdf"
_L4 = "NVIDIA L4 datasheet, https://resources.nvidia.com/en-us-data-center-overview/l4-gpu-datasheet"

# Datasheet figures, dense (the datasheets print bf16/fp16/TF32 with sparsity; those are halved here), rounded
# up. Order matters only where patterns overlap: the first matching row wins.
GPUS: tuple[GpuRow, ...] = (
    # A100: 312 TFLOPS bf16/fp16, 156 TFLOPS TF32 (dense) for every form factor; bandwidth by memory and form.
    GpuRow("A100 SXM4 40GB", r"A100.*SXM", (8, 0), (36, 44), 1555 * GB, 312 * TFLOPS, 312 * TFLOPS, 156 * TFLOPS, _A100),
    GpuRow("A100 SXM4 80GB", r"A100.*SXM", (8, 0), (72, 84), 2039 * GB, 312 * TFLOPS, 312 * TFLOPS, 156 * TFLOPS, _A100),
    GpuRow("A100 PCIe 40GB", r"A100.*PCI", (8, 0), (36, 44), 1555 * GB, 312 * TFLOPS, 312 * TFLOPS, 156 * TFLOPS, _A100),
    GpuRow("A100 PCIe 80GB", r"A100.*PCI", (8, 0), (72, 84), 1935 * GB, 312 * TFLOPS, 312 * TFLOPS, 156 * TFLOPS, _A100),
    # H100: SXM 3.35 TB/s, 1979/989 TFLOPS bf16/TF32 with sparsity; PCIe 2.0 TB/s, 1513/756; NVL 3.9 TB/s,
    # 1671/835. The driver names the SXM part "H100 80GB HBM3".
    GpuRow("H100 NVL", r"H100 NVL", (9, 0), (88, 100), 3900 * GB, 836 * TFLOPS, 836 * TFLOPS, 418 * TFLOPS, _H100),
    GpuRow("H100 PCIe", r"H100.*PCI", (9, 0), (72, 84), 2000 * GB, 757 * TFLOPS, 757 * TFLOPS, 378 * TFLOPS, _H100),
    GpuRow("H100 SXM5", r"(?<!G)H100", (9, 0), (72, 84), 3350 * GB, 990 * TFLOPS, 990 * TFLOPS, 495 * TFLOPS, _H100),
    # H200: SXM 4.8 TB/s, 1979/989 with sparsity; NVL 4.8 TB/s, 1671/835.
    GpuRow("H200 NVL", r"(?<!G)H200 NVL", (9, 0), (130, 145), 4800 * GB, 836 * TFLOPS, 836 * TFLOPS, 418 * TFLOPS, _H200),
    GpuRow("H200 SXM", r"(?<!G)H200", (9, 0), (130, 145), 4800 * GB, 990 * TFLOPS, 990 * TFLOPS, 495 * TFLOPS, _H200),
    # GH200 (Grace Hopper): the H100's tensor cores; 96 GB HBM3 at 4 TB/s or 144 GB HBM3e at 4.9 TB/s.
    GpuRow("GH200 96GB", r"GH200", (9, 0), (88, 100), 4000 * GB, 990 * TFLOPS, 990 * TFLOPS, 495 * TFLOPS, _GH200),
    GpuRow("GH200 144GB", r"GH200", (9, 0), (130, 150), 4900 * GB, 990 * TFLOPS, 990 * TFLOPS, 495 * TFLOPS, _GH200),
    # B200 (HGX): 64 TB/s, 36 PFLOPS bf16 and 18 PFLOPS TF32 with sparsity per 8 GPUs. GB200's B200 runs at a
    # higher power: 8 TB/s, 5 PFLOPS bf16 and 2.5 PFLOPS TF32 with sparsity per GPU.
    GpuRow("GB200", r"GB200", (10, 0), (170, 200), 8000 * GB, 2500 * TFLOPS, 2500 * TFLOPS, 1250 * TFLOPS, _GB200),
    GpuRow("B200", r"(?<!G)B200", (10, 0), (170, 200), 8000 * GB, 2250 * TFLOPS, 2250 * TFLOPS, 1125 * TFLOPS, _B200),
    # 24-48 GB cards. L40S: 864 GB/s, 733/366 TFLOPS bf16/TF32 with sparsity (L40: 362/181). RTX 4090: 1008 GB/s; fp16 with
    # fp16 accumulation 330.3 dense (the fastest a kernel may use), bf16 (fp32 accumulation) 165.2, TF32 82.6.
    # A10: 600 GB/s, 250/125 with sparsity. L4: 300 GB/s, 242/120 with sparsity.
    GpuRow("L40S", r"L40S", (8, 9), (42, 48), 864 * GB, 367 * TFLOPS, 367 * TFLOPS, 184 * TFLOPS, _L40S),
    GpuRow("L40", r"L40\b(?!S)", (8, 9), (42, 48), 864 * GB, 182 * TFLOPS, 182 * TFLOPS, 91 * TFLOPS, _L40),
    GpuRow("RTX 4090", r"RTX 4090", (8, 9), (22, 25), 1008 * GB, 166 * TFLOPS, 331 * TFLOPS, 83 * TFLOPS, _ADA),
    GpuRow("A10", r"A10\b(?!0)", (8, 6), (20, 25), 600 * GB, 125 * TFLOPS, 125 * TFLOPS, 63 * TFLOPS, _A10),
    GpuRow("L4", r"\bL4\b", (8, 9), (20, 25), 300 * GB, 121 * TFLOPS, 121 * TFLOPS, 61 * TFLOPS, _L4),
)


def peaks_for(name: str, capability: tuple, total_memory_bytes: int) -> Peaks | None:
    """The table's figures for the GPU the driver describes (``torch.cuda.get_device_properties``: ``name``,
    ``(major, minor)``, ``total_memory``), or None when no row matches."""
    for row in GPUS:
        if row.matches(name, capability, total_memory_bytes):
            return row.peaks()
    return None


# The probe measures what torch's own copy and matmul reach; a GPU's peak is above that by a factor no
# larger than these bounds (a device copy reaches 80-93% of the peak bandwidth and cuBLAS's large matmuls
# 60-85% of the peak rate on every GPU in the table), so dividing by them keeps the floor a lower bound.
PROBE_BANDWIDTH_EFFICIENCY = 0.5
PROBE_FLOPS_EFFICIENCY = 0.25
PROBE_COPY_BYTES = 1 << 30
PROBE_MATMUL_N = 4096

_PROBED: dict[int, Peaks] = {}


def peaks_from_measurement(name: str, copy_bytes_per_s: float, matmul_flops: dict) -> Peaks:
    """Peaks for an unknown GPU from measured throughputs: each divided by its efficiency bound
    (``PROBE_BANDWIDTH_EFFICIENCY``, ``PROBE_FLOPS_EFFICIENCY``), so the result is above the true peak."""
    return Peaks(
        copy_bytes_per_s / PROBE_BANDWIDTH_EFFICIENCY,
        {k: v / PROBE_FLOPS_EFFICIENCY for k, v in matmul_flops.items()},
        f"probe: device copy {copy_bytes_per_s / GB:.0f} GB/s / {PROBE_BANDWIDTH_EFFICIENCY}, matmul "
        + ", ".join(f"{k} {v / TFLOPS:.0f} TFLOP/s" for k, v in sorted(matmul_flops.items()))
        + f" / {PROBE_FLOPS_EFFICIENCY} (measured once per actor; no table row matched)",
        name)


def _best_ms(fn, reps: int = 10) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    fn()  # warm-up (cuBLAS heuristics, allocator)
    best = float("inf")
    for _ in range(reps):
        start.record()
        fn()
        end.record()
        end.synchronize()
        best = min(best, start.elapsed_time(end))
    return best


def probe_peaks(device: torch.device | str) -> Peaks:
    """Measure a GPU's achievable copy bandwidth and matmul rates (trusted code, in the supervisor's process),
    once per device per process, and turn them into figures above the true peaks
    (:func:`peaks_from_measurement`). Allocates about 2 GiB for a moment."""
    device = torch.device(device)
    if device.type != "cuda":
        raise ValueError(f"probe_peaks measures a GPU; got {device}")
    index = device.index if device.index is not None else torch.cuda.current_device()
    if index in _PROBED:
        return _PROBED[index]
    with torch.cuda.device(index):
        src = torch.empty(PROBE_COPY_BYTES, dtype=torch.uint8, device="cuda")
        dst = torch.empty_like(src)
        ms = _best_ms(lambda: dst.copy_(src))
        copy_bps = 2 * PROBE_COPY_BYTES / (ms / 1e3)  # read + write
        del src, dst
        rates = {}
        n = PROBE_MATMUL_N
        for prec, dtype in (("bf16", torch.bfloat16), ("fp16", torch.float16), ("fp32", torch.float32)):
            a = torch.randn(n, n, device="cuda", dtype=dtype)
            b = torch.randn(n, n, device="cuda", dtype=dtype)
            old = torch.backends.cuda.matmul.allow_tf32
            torch.backends.cuda.matmul.allow_tf32 = True  # the fp32 rate is the TF32 tensor-core rate
            try:
                ms = _best_ms(lambda: torch.mm(a, b))
            finally:
                torch.backends.cuda.matmul.allow_tf32 = old
            rates[prec] = 2 * n ** 3 / (ms / 1e3)
            del a, b
        torch.cuda.empty_cache()
        name = torch.cuda.get_device_properties(index).name
    _PROBED[index] = peaks_from_measurement(name, copy_bps, rates)
    return _PROBED[index]


def peaks_for_device(device: torch.device | str) -> Peaks:
    """The floor's figures for a GPU: its table row when the driver's report matches one, else the probe's."""
    device = torch.device(device)
    if device.type != "cuda":
        raise ValueError(f"peak figures are for GPUs; the floor is not applied on {device}")
    index = device.index if device.index is not None else torch.cuda.current_device()
    props = torch.cuda.get_device_properties(index)
    return peaks_for(props.name, (props.major, props.minor), props.total_memory) or probe_peaks(device)


__all__ = ["Peaks", "GpuRow", "GPUS", "peaks_for", "peaks_for_device", "probe_peaks", "peaks_from_measurement"]
