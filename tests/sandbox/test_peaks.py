"""The peak table: each GPU the driver describes gets its datasheet figures, and the floor they give never
rejects an honest kernel."""

import json
import math
import pickle

import pytest
import torch

from kbenv.problems import get_problem, list_problems
from kbenv.sandbox import peaks as P

GiB = 2 ** 30

# What the driver reports for each GPU (torch.cuda.get_device_properties: name, capability, total_memory),
# and the datasheet's figures written out again here, independently of the table: peak bandwidth in bytes/s
# and dense bf16, fp16 and TF32 rates in FLOP/s.
DRIVER_REPORTS = [
    # name, capability, total memory, row, bandwidth, bf16, fp16, tf32
    ("NVIDIA A100-SXM4-40GB", (8, 0), 39.59 * GiB, "A100 SXM4 40GB", 1.555e12, 312e12, 312e12, 156e12),
    ("NVIDIA A100-SXM4-80GB", (8, 0), 79.15 * GiB, "A100 SXM4 80GB", 2.039e12, 312e12, 312e12, 156e12),
    ("NVIDIA A100-PCIE-40GB", (8, 0), 39.39 * GiB, "A100 PCIe 40GB", 1.555e12, 312e12, 312e12, 156e12),
    ("NVIDIA A100 80GB PCIe", (8, 0), 79.15 * GiB, "A100 PCIe 80GB", 1.935e12, 312e12, 312e12, 156e12),
    ("NVIDIA H100 80GB HBM3", (9, 0), 79.11 * GiB, "H100 SXM5", 3.35e12, 989.5e12, 989.5e12, 494.5e12),
    ("NVIDIA H100 PCIe", (9, 0), 79.18 * GiB, "H100 PCIe", 2.0e12, 756.5e12, 756.5e12, 378e12),
    ("NVIDIA H100 NVL", (9, 0), 93.1 * GiB, "H100 NVL", 3.9e12, 835.5e12, 835.5e12, 417.5e12),
    ("NVIDIA H200", (9, 0), 139.8 * GiB, "H200 SXM", 4.8e12, 989.5e12, 989.5e12, 494.5e12),
    ("NVIDIA H200 NVL", (9, 0), 139.8 * GiB, "H200 NVL", 4.8e12, 835.5e12, 835.5e12, 417.5e12),
    ("NVIDIA GH200 480GB", (9, 0), 94.5 * GiB, "GH200 96GB", 4.0e12, 989.5e12, 989.5e12, 494.5e12),
    ("NVIDIA GH200 144G HBM3e", (9, 0), 139.5 * GiB, "GH200 144GB", 4.9e12, 989.5e12, 989.5e12, 494.5e12),
    ("NVIDIA B200", (10, 0), 178.4 * GiB, "B200", 8.0e12, 2.25e15, 2.25e15, 1.1e15),
    ("NVIDIA GB200", (10, 0), 184.0 * GiB, "GB200", 8.0e12, 2.5e15, 2.5e15, 1.25e15),
    ("NVIDIA L40S", (8, 9), 44.4 * GiB, "L40S", 864e9, 362.05e12, 362.05e12, 183e12),
    ("NVIDIA L40", (8, 9), 44.4 * GiB, "L40", 864e9, 181.05e12, 181.05e12, 90.5e12),
    ("NVIDIA GeForce RTX 4090", (8, 9), 23.65 * GiB, "RTX 4090", 1008e9, 165.2e12, 330.3e12, 82.6e12),
    ("NVIDIA A10", (8, 6), 22.05 * GiB, "A10", 600e9, 125e12, 125e12, 62.5e12),
    ("NVIDIA L4", (8, 9), 22.03 * GiB, "L4", 300e9, 121e12, 121e12, 60e12),
]

UNKNOWN = [
    ("NVIDIA A10G", (8, 6), 22.0 * GiB),  # AWS's part: no datasheet row, probed
    ("NVIDIA H800", (9, 0), 79.1 * GiB),
    ("NVIDIA B300", (10, 3), 268.0 * GiB),
    ("NVIDIA A100-SXM4-80GB", (8, 0), 60.0 * GiB),  # a memory size no A100 reports: not guessed
    ("NVIDIA H200", (8, 0), 139.8 * GiB),  # a capability the name never has
    ("Tesla V100-SXM2-16GB", (7, 0), 15.8 * GiB),
]


@pytest.mark.parametrize("name,cap,mem,row,bw,bf16,fp16,tf32", DRIVER_REPORTS, ids=[r[3] for r in DRIVER_REPORTS])
def test_each_driver_report_gets_its_datasheet_row(name, cap, mem, row, bw, bf16, fp16, tf32):
    p = P.peaks_for(name, cap, int(mem))
    assert p is not None and p.name == row
    # The table rounds up (the floor must stay a lower bound), by at most 1%.
    assert bw <= p.bytes_per_s <= 1.01 * bw
    for prec, want in (("bf16", bf16), ("fp16", fp16), ("fp32", tf32)):
        assert want <= p.rate(prec) <= 1.025 * want, prec
    assert "http" in p.source or "whitepaper" in p.source


def test_every_table_row_is_reached_by_a_driver_report():
    assert {r.name for r in P.GPUS} == {r[3] for r in DRIVER_REPORTS}


@pytest.mark.parametrize("name,cap,mem", UNKNOWN, ids=[u[0] for u in UNKNOWN])
def test_a_gpu_no_row_describes_is_not_guessed(name, cap, mem):
    assert P.peaks_for(name, cap, int(mem)) is None


@pytest.mark.parametrize("name,cap,mem,row,bw,bf16,fp16,tf32", DRIVER_REPORTS, ids=[r[3] for r in DRIVER_REPORTS])
def test_an_honest_kernel_at_90_percent_of_the_peak_is_never_below_the_floor(name, cap, mem, row, bw, bf16, fp16,
                                                                             tf32):
    p = P.peaks_for(name, cap, int(mem))
    rates = {"bf16": bf16, "fp16": fp16, "fp32": tf32}
    for prob in list_problems():
        for prec in prob.precision_allowed:
            honest_ms = 1e3 * max(prob.floor_bytes(prec) / (0.9 * bw), prob.floor.get("flops", 0) / (0.9 * rates[prec]))
            assert honest_ms >= p.floor_ms(prob, prec), (prob.id, prec)


# The floor of each listed GPU for two sample problems at full size: ReLU (memory-bound: 2 x 1.61e9 fp32
# elements moved) and a square matmul in bf16 (compute-bound: 2 x 4096^3 FLOPs).
RELU, MATMUL = "kernelbench/level1/19", "kernelbench/level1/1"


@pytest.mark.parametrize("name,cap,mem,row,bw,bf16,fp16,tf32", DRIVER_REPORTS, ids=[r[3] for r in DRIVER_REPORTS])
def test_the_floor_of_each_listed_gpu_for_sample_problems(name, cap, mem, row, bw, bf16, fp16, tf32):
    p = P.peaks_for(name, cap, int(mem))
    relu = get_problem(RELU)
    assert relu.floor["float_elements"] == 2 * 4096 * 393216
    want_relu_ms = 1e3 * 2 * 4096 * 393216 * 4 / bw
    assert p.floor_ms(relu, "fp32") == pytest.approx(want_relu_ms, rel=0.011)
    mm = get_problem(MATMUL)
    assert mm.floor["flops"] == 2 * 4096 ** 3
    want_mm_ms = max(1e3 * 2 * 4096 ** 3 / bf16, 1e3 * mm.floor_bytes("bf16") / bw)
    assert p.floor_ms(mm, "bf16") == pytest.approx(want_mm_ms, rel=0.026)
    # Faster GPUs have lower floors: the H200's ReLU floor is 2.68 ms, an A10's 8x that.
    if row == "H200 SXM":
        assert p.floor_ms(relu, "fp32") == pytest.approx(2.684, abs=0.001)


def test_peaks_name_themselves_in_a_results_facts():
    p = P.peaks_for("NVIDIA H200", (9, 0), int(139.8 * GiB))
    d = json.loads(json.dumps(p.to_dict()))
    assert d == {"name": "H200 SXM", "bytes_per_s": 4.8e12, "flops": {"bf16": 990e12, "fp16": 990e12,
                                                                      "fp32": 495e12}, "source": p.source}
    with pytest.raises(TypeError):
        p.flops["bf16"] = 1.0  # frozen, all the way down
    assert pickle.loads(pickle.dumps(p)) == p  # crosses Ray
    with pytest.raises(ValueError, match="fp8"):
        p.rate("fp8")


@pytest.mark.parametrize("name,cap,mem,row,bw,bf16,fp16,tf32", DRIVER_REPORTS, ids=[r[3] for r in DRIVER_REPORTS])
def test_the_probe_stays_above_the_peak_when_the_gpu_reaches_its_efficiency_bound(name, cap, mem, row, bw, bf16, fp16,
                                                                                  tf32):
    # The worst case the bounds allow: the copy reaches exactly PROBE_BANDWIDTH_EFFICIENCY of the peak and the
    # matmuls PROBE_FLOPS_EFFICIENCY of theirs. The figures are then the true peaks, never below them.
    rates = {"bf16": bf16, "fp16": fp16, "fp32": tf32}
    measured = P.peaks_from_measurement(name, P.PROBE_BANDWIDTH_EFFICIENCY * bw,
                                        {k: P.PROBE_FLOPS_EFFICIENCY * v for k, v in rates.items()})
    assert measured.bytes_per_s >= bw * (1 - 1e-12)
    for k, v in rates.items():
        assert measured.rate(k) >= v * (1 - 1e-12)
    assert "probe" in measured.source and measured.name == name
    # A GPU reaching more than its bound (the usual case) gets a looser floor, never a tighter one.
    better = P.peaks_from_measurement(name, 0.85 * bw, {k: 0.7 * v for k, v in rates.items()})
    assert better.bytes_per_s > bw and all(better.rate(k) > v for k, v in rates.items())


def test_the_probe_refuses_a_cpu():
    with pytest.raises(ValueError, match="GPU"):
        P.probe_peaks("cpu")
    with pytest.raises(ValueError):
        P.peaks_for_device("cpu")


@pytest.mark.gpu
def test_on_a_gpu_the_device_gets_figures_and_the_probe_bounds_the_table():
    dev = torch.device("cuda", torch.cuda.current_device())
    props = torch.cuda.get_device_properties(dev)
    p = P.peaks_for_device(dev)
    assert p.bytes_per_s > 0 and all(math.isfinite(v) and v > 0 for v in p.flops.values())
    probed = P.probe_peaks(dev)
    assert P.probe_peaks(dev) is probed  # measured once per process
    row = P.peaks_for(props.name, (props.major, props.minor), props.total_memory)
    if row is not None:  # the probe's figures (measured / bound) must not be below the datasheet's
        assert probed.bytes_per_s >= row.bytes_per_s, (probed.source, row.source)
        for k in ("bf16", "fp16", "fp32"):
            assert probed.rate(k) >= row.rate(k), (k, probed.source)
