# expect: pass
"""Known-wrong candidate for KernelBench level 1 #19 (ReLU): look-ahead, the work of a block's later calls done in
its first one.

A timed block is one call per lent slot, and the supervisor writes every slot's inputs before the block starts (as
rotating-buffer benchmarks do: nvbench, KernelBench's L2-flush loop). The executor is told the whole block in one
frame, and the candidate shares its process, so in the block's first call it can read which slots the block will
call, compute all of their outputs in one launch, and hand out the stored results in the later calls. Every output
is correct and every call's work is inside the timed block: what it can gain is the per-call fixed cost it
amortizes (launches, the GPU's tail at the end of each kernel), never the work itself. In a real workload the next
call's inputs do not exist yet, so this is not a kernel a model could use.

On the CPU the times earn no credit and it is a correct ReLU. On cuda at full size (6 GiB a call) the one launch
saves one launch per slot on 1-2 ms of memory traffic each: a pass within noise of its honest twin is the
expected outcome, and the stop-28 note records it as measured next. kbenv does not prevent the look-ahead itself:
anything the executor's process knows, the candidate knows, and withholding the next call's inputs until the call
would put the supervisor's writes inside the timed block.
"""
import sys

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _relu_slots(x_ptr, y_ptr, n, slot_stride, BLOCK: tl.constexpr):
    slot = tl.program_id(1).to(tl.int64)
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + slot * slot_stride + offs, mask=m, other=0.0)
    tl.store(y_ptr + slot * n + offs, tl.maximum(x, 0.0), mask=m)


def _block():
    """The executor's current block, read from its frame: (the executor, the block's calls, replies so far)."""
    f = sys._getframe(1)
    while f is not None:
        if f.f_code.co_name == "run_block" and "calls" in f.f_locals and "dones" in f.f_locals:
            return f.f_locals.get("self"), f.f_locals["calls"], f.f_locals["dones"]
        f = f.f_back
    return None, None, None


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.ahead = {}

    def _relu(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        _relu_slots[(triton.cdiv(n, 1024), 1)](x, y, n, 0, BLOCK=1024)
        return y

    def forward(self, x):
        ex, calls, dones = _block()
        if ex is None or not x.is_contiguous():
            return self._relu(x)
        if not dones:  # the block's first call: every call's output, in one launch
            xs = [ex.places.tensor(c["inputs"][0]) for c in calls]
            gaps = {b.data_ptr() - a.data_ptr() for a, b in zip(xs, xs[1:])}
            if len(gaps) > 1 or any(t.shape != x.shape or t.dtype != x.dtype for t in xs):
                self.ahead = {}
                return self._relu(x)
            stride = (gaps.pop() if gaps else 0) // x.element_size()
            y = torch.empty((len(xs),) + tuple(x.shape), dtype=x.dtype, device=x.device)
            n = x.numel()
            _relu_slots[(triton.cdiv(n, 1024), len(xs))](xs[0], y, n, stride, BLOCK=1024)
            self.ahead = {t.data_ptr(): y[k] for k, t in enumerate(xs)}
        out = self.ahead.pop(x.data_ptr(), None)
        return out if out is not None else self._relu(x)
