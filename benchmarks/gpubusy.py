"""How long the GPU was busy during a window of wall time, from the driver's own utilisation samples (NVML).

Used by the sandbox benchmark to split an evaluation's wall time into GPU work (any process's kernels: the
candidate's, the trusted references, checks and input generation) and the rest (host work, waiting, process
start-up), which is the overhead the sandbox adds. Independent of kbenv's own timers: NVML samples the device's
"a kernel was executing" counter every few tens to hundreds of milliseconds; each sample is the busy percentage
over the period since the previous one.

    b = GpuBusy(torch_device_index)   # None if NVML is unavailable
    t0 = b.now_us(); ...; t1 = b.now_us()
    busy_s, covered_s = b.busy_seconds(t0, t1)

Precision: a sample period that straddles the window's start or end is counted in proportion to its overlap,
assuming uniform busyness inside the period; the error is at most one sample period at each end.
"""

from __future__ import annotations

import ctypes
import json
import os
import threading
import time

NVML_GPU_UTILIZATION_SAMPLES = 1


class _Value(ctypes.Union):
    _fields_ = [("dVal", ctypes.c_double), ("uiVal", ctypes.c_uint), ("ulVal", ctypes.c_ulong),
                ("ullVal", ctypes.c_ulonglong), ("sllVal", ctypes.c_longlong)]


class _Sample(ctypes.Structure):
    _fields_ = [("timeStamp", ctypes.c_ulonglong), ("sampleValue", _Value)]


class GpuBusy:
    def __init__(self, handle, lib):
        self._h, self._lib = handle, lib
        self._samples: dict[int, float] = {}  # timestamp (us) -> busy percent over the period ending there
        self._last = 0
        self._lock = threading.Lock()

    def _poll_forever(self, interval_s: float) -> None:
        while True:  # the driver keeps a bounded buffer of samples: fetch them well before they drop out
            self.poll()
            time.sleep(interval_s)

    @classmethod
    def open(cls, torch_index: int = 0, by_pci: bool = True) -> "GpuBusy | None":
        """``by_pci``: find the NVML device by torch's PCI bus id (which starts a CUDA context in this process);
        otherwise by NVML's own index."""
        try:
            lib = ctypes.CDLL("libnvidia-ml.so.1")
            if lib.nvmlInit_v2() != 0:
                return None
            handle = ctypes.c_void_p()
            bus = _pci_bus_id(torch_index) if by_pci else None
            if bus is not None:
                rc = lib.nvmlDeviceGetHandleByPciBusId_v2(bus.encode(), ctypes.byref(handle))
            else:
                rc = lib.nvmlDeviceGetHandleByIndex_v2(ctypes.c_uint(torch_index), ctypes.byref(handle))
            if rc != 0:
                return None
            b = cls(handle, lib)
            b.poll()
            threading.Thread(target=b._poll_forever, args=(0.5,), daemon=True).start()
            return b
        except (OSError, AttributeError, ValueError) as e:  # no driver library, or a symbol missing from it
            print(f"NVML unavailable: {e!r}")
            return None

    @staticmethod
    def now_us() -> int:
        return time.time_ns() // 1000  # NVML's sample timestamps are wall-clock microseconds

    def poll(self) -> None:
        """Fetch the samples the driver has taken since the last poll (a background thread does it twice a
        second)."""
        with self._lock:
            self._poll()

    def _poll(self) -> None:
        vtype, count = ctypes.c_int(), ctypes.c_uint(0)
        rc = self._lib.nvmlDeviceGetSamples(self._h, NVML_GPU_UTILIZATION_SAMPLES, ctypes.c_ulonglong(self._last),
                                            ctypes.byref(vtype), ctypes.byref(count), None)
        if rc != 0 or count.value == 0:
            return
        buf = (_Sample * count.value)()
        rc = self._lib.nvmlDeviceGetSamples(self._h, NVML_GPU_UTILIZATION_SAMPLES, ctypes.c_ulonglong(self._last),
                                            ctypes.byref(vtype), ctypes.byref(count), buf)
        if rc != 0:
            return
        for s in buf[:count.value]:
            v = s.sampleValue
            pct = {0: v.dVal, 1: v.uiVal, 2: v.ulVal, 3: v.ullVal, 4: v.sllVal}.get(vtype.value, v.uiVal)
            self._samples[int(s.timeStamp)] = float(pct)
            self._last = max(self._last, int(s.timeStamp))

    def busy_seconds(self, t0_us: int, t1_us: int) -> tuple[float, float]:
        """(busy seconds, seconds of the window covered by samples) between two ``now_us()`` readings."""
        self.poll()
        with self._lock:
            samples = dict(self._samples)
        return busy_in(samples, t0_us, t1_us)

    def samples(self) -> dict[int, float]:
        self.poll()
        with self._lock:
            return dict(self._samples)


def busy_in(samples: dict, t0_us: int, t1_us: int) -> tuple[float, float]:
    """(busy seconds, seconds covered by samples) of the window ``t0_us``-``t1_us`` (wall-clock microseconds), from
    samples ``{timestamp_us: busy percent over the period ending there}``."""
    ts = sorted(samples)
    busy = covered = 0.0
    for prev, cur in zip(ts, ts[1:]):
        lo, hi = max(prev, t0_us), min(cur, t1_us)
        if hi <= lo:
            continue
        covered += (hi - lo) / 1e6
        busy += (hi - lo) / 1e6 * samples[cur] / 100.0
    return busy, covered


def load_samples(path: str) -> dict[int, float]:
    """The samples a ``--samples`` file holds (``main`` writes it)."""
    with open(path) as f:
        return {int(t): float(p) for t, p in json.load(f)["samples"]}


class CpuBusy:
    """How busy the host's CPUs were, from ``/proc/stat`` sampled every half second: whether an evaluator's
    processes (torch imports, compiles, the supervisors themselves) had the cores they needed, or the host was the
    bound (issue 13: at three lanes the GPU was busy 16% of the time)."""

    IDLE = (3, 4)  # idle and iowait, among the "cpu" line's fields (user nice system idle iowait irq softirq steal)

    def __init__(self, read=None):
        self._read = read or self._proc_stat
        self.samples: list[tuple[float, int, int]] = [(time.monotonic(), *self._read())]  # (t, busy ticks, total)
        self._stop = threading.Event()

    @staticmethod
    def _proc_stat() -> tuple[int, int]:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:9]]
        idle = sum(fields[i] for i in CpuBusy.IDLE)
        return sum(fields) - idle, sum(fields)

    def sample(self) -> None:
        self.samples.append((time.monotonic(), *self._read()))

    def start(self, interval_s: float = 0.5) -> "CpuBusy":
        def loop():
            while not self._stop.wait(interval_s):
                self.sample()
        threading.Thread(target=loop, daemon=True).start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self.sample()

    def summary(self, saturated: float = 0.9) -> tuple[float, float]:
        """(mean busy fraction over the window, fraction of the window's wall time in periods at least
        ``saturated`` busy)."""
        (_, b0, n0), (_, b1, n1) = self.samples[0], self.samples[-1]
        mean = (b1 - b0) / (n1 - n0) if n1 > n0 else 0.0
        hot = span = 0.0
        for (ta, ba, na), (tb, bb, nb) in zip(self.samples, self.samples[1:]):
            span += tb - ta
            if nb > na and (bb - ba) / (nb - na) >= saturated:
                hot += tb - ta
        return mean, (hot / span if span > 0 else 0.0)


def _pci_bus_id(torch_index: int) -> str | None:
    from kbenv.sandbox.gpustate import pci_bus_id
    return pci_bus_id(torch_index)


def main(argv: list[str] | None = None) -> int:
    """``python benchmarks/gpubusy.py [--index N] -- CMD ...``: run CMD and print the GPU's busy seconds and busy
    fraction over its whole run (for back-to-back throughput runs, e.g. ``kbenv rollout``)."""
    import argparse
    import signal
    import subprocess
    import sys
    ap = argparse.ArgumentParser(description=main.__doc__)
    ap.add_argument("--index", type=int, default=0, help="NVML device index (default 0)")
    ap.add_argument("--samples", help="write NVML's samples of the run here (JSON), for the busy fraction of a window "
                                      "inside it: phase_split.py --busy, between a rollout's first and last record")
    ap.add_argument("cmd", nargs=argparse.REMAINDER, help="the command, after --")
    args = ap.parse_args(argv)
    cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    if not cmd:
        ap.error("give the command after --")
    busy = GpuBusy.open(args.index, by_pci=False)  # no CUDA context of its own beside the measured run
    cpu = CpuBusy().start()
    t0, t = GpuBusy.now_us(), time.perf_counter()
    child = subprocess.Popen(cmd)
    # a time limit (`timeout L python3 gpubusy.py -- ...`) stops the command, not the figure: the signal goes on to
    # it, and the window it ran is still reported (stop 39's rollouts ran into their limits and printed none)
    signal.signal(signal.SIGTERM, lambda signum, frame: child.send_signal(signal.SIGTERM))
    rc = child.wait()
    wall = time.perf_counter() - t
    cpu.stop()
    mean, hot = cpu.summary()
    print(f"cpubusy: {100 * mean:.1f}% of {os.cpu_count()} CPUs on average; {100 * hot:.1f}% of the wall time in "
          f"half-second periods at least 90% busy", flush=True)
    if busy is None:
        print("gpubusy: NVML unavailable", file=sys.stderr)
        return rc
    b, covered = busy.busy_seconds(t0, GpuBusy.now_us())
    if args.samples:
        with open(args.samples, "w") as f:
            json.dump({"samples": sorted(busy.samples().items())}, f)
    print(f"gpubusy: {b:.1f} s busy of {wall:.1f} s wall ({100 * b / wall:.1f}%; samples cover {covered:.1f} s); "
          f"command exit {rc}", flush=True)
    return rc


if __name__ == "__main__":
    raise SystemExit(main())
