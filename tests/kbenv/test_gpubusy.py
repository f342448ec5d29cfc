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


def test_cpu_busy_averages_over_the_window_and_counts_the_saturated_periods():
    from gpubusy import CpuBusy
    # (busy ticks, total ticks) at each read: 50%, then 100%, then 0% busy over equal periods of 100 ticks
    reads = iter([(0, 0), (50, 100), (150, 200), (150, 300)])
    c = CpuBusy(read=lambda: next(reads))
    c.sample(), c.sample(), c.sample()
    c.samples = [(float(i), b, n) for i, (_, b, n) in enumerate(c.samples)]  # one second apart
    mean, hot = c.summary()
    assert mean == pytest.approx(150 / 300)
    assert hot == pytest.approx(1 / 3)


def test_cpu_busy_reads_this_machine():
    from gpubusy import CpuBusy
    c = CpuBusy()
    import time
    time.sleep(0.1)  # ten ticks of USER_HZ on every CPU
    c.stop()
    mean, hot = c.summary()
    assert 0.0 <= mean <= 1.0 and 0.0 <= hot <= 1.0
    assert c.samples[-1][2] > c.samples[0][2]  # the clock ticked


def test_the_busy_fraction_between_a_runs_first_and_last_record_leaves_its_start_and_end_out(tmp_path):
    import json
    from phase_split import busy_between_records
    from gpubusy import load_samples
    # 1 s periods: idle start-up (0-10 s), 60% busy while records arrive (10-20 s), idle after
    samples = {t * 1_000_000: (60.0 if 10 < t <= 20 else 0.0) for t in range(0, 31)}
    path = tmp_path / "busy.json"
    path.write_text(json.dumps({"samples": sorted(samples.items())}))
    rows = [{"time": 10.0}, {"time": 15.0}, {"time": 20.0}, {"phase_seconds": {}}]  # one record without a time
    line = busy_between_records(rows, load_samples(str(path)))
    assert "6.0 s busy of 10.0 s (60.0%" in line, line
    assert "fewer than two" in busy_between_records(rows[:1], load_samples(str(path)))
