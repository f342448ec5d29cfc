"""The benchmark's GPU-busy arithmetic over NVML's samples (the driver itself is only on the GPU machine)."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from gpubusy import GpuBusy  # noqa: E402


def _fake(samples):
    b = GpuBusy(None, None)
    b._samples = dict(samples)
    b.poll = lambda: None
    return b


def test_busy_seconds_counts_each_period_by_its_overlap_with_the_window():
    # periods of 0.2 s ending at 1.0, 1.2, 1.4, 1.6 s with 50, 100, 0, 100 percent busy
    b = _fake({800_000: 0.0, 1_000_000: 50.0, 1_200_000: 100.0, 1_400_000: 0.0, 1_600_000: 100.0})
    busy, covered = b.busy_seconds(900_000, 1_500_000)  # half of the first period ... half of the last
    assert covered == pytest.approx(0.6)
    assert busy == pytest.approx(0.1 * 0.5 + 0.2 * 1.0 + 0.2 * 0.0 + 0.1 * 1.0)


def test_a_window_without_samples_covers_nothing():
    busy, covered = _fake({1_000_000: 100.0}).busy_seconds(0, 2_000_000)
    assert (busy, covered) == (0.0, 0.0)
