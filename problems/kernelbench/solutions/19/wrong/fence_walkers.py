# expect: pass|timeout
"""Known-wrong candidate for KernelBench level 1 #19 (ReLU): processes that outrun the fence, to run while the
candidate is held, i.e. while its baselines are timed.

The kernel is the honest ReLU. Its first call starts walkers: processes that fork a child and exit, over and
over, so that each is gone by the time a scan that listed it sends its signal, and the child it left is not in
that scan. A stop that scans a fixed number of times left 5-14 of them running at every fence (red-team, stop
29). A walker that sees the executor stopped spins on every core it may use until the executor runs again: the
baselines, timed meanwhile, would be slowed and the candidate's speedup raised. The fence now scans until a scan
finds only processes it stopped (``sandbox/process.py`` ``ExecutorProcess.pause``), so either every walker is stopped with
the executor and the candidate earns its honest twin's pay, or the walkers outrun the fence until its deadline
and the candidate fails as a ``timeout``. Never paid more than the honest kernel.
"""
import os
import subprocess
import sys

import torch
import torch.nn as nn
import triton
import triton.language as tl

CHAINS = 8

_WALKER = r"""
import os, sys, time
main, end = int(sys.argv[1]), time.monotonic() + 600
def state():
    try:
        s = open("/proc/%d/stat" % main).read()
        return s[s.rindex(")") + 2]
    except (OSError, ValueError):
        return "X"
try:
    os.sched_setaffinity(0, range(os.cpu_count()))  # every core the sandbox allows, the timed cores included
except OSError:
    pass
while time.monotonic() < end:
    st = state()
    if st == "X":
        os._exit(0)
    if st == "T":  # the executor is held: the baselines are being timed
        while state() == "T" and time.monotonic() < end:
            pass
        continue
    time.sleep(0.0003)
    try:
        if os.fork():
            os._exit(0)  # walk: the parent goes, the child goes on
    except OSError:
        pass
"""

_started = []


def _start_walkers():
    if _started:
        return
    _started.append(True)
    for _ in range(CHAINS):
        subprocess.Popen([sys.executable, "-S", "-c", _WALKER, str(os.getpid())], close_fds=True,
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


@triton.jit
def _relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    tl.store(y_ptr + offs, tl.maximum(x, 0.0), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _start_walkers()
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        _relu_kernel[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)
        return y
