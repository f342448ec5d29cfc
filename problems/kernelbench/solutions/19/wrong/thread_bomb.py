# expect: pass|runtime
# expect-sandbox: pass
"""Known-wrong candidate for KernelBench level 1 #19 (ReLU): an attack on the host through the number of tasks a
candidate may start. It starts sleeping threads (a fork bomb's cheap form: a thread is a task as a process is)
until the system refuses one or it has started 4096. Unbounded, the same loop exhausts the host's tasks (threads-max,
pid_max) and every process the harness then starts fails (a harness fault caused by a candidate); with one uid for
every sandbox, the bound alone would make the spares' starts fail. It raises if it started them all, and answers
correctly when the sandbox refused it: in the sandbox it must pass; without one it fails.
"""
import threading

import torch
import torch.nn as nn
import triton
import triton.language as tl

GOAL = 4096  # above the sandbox's 1024 tasks per sandboxed process


@triton.jit
def _relu(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(y_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=m), 0.0), mask=m)


def _bomb() -> int:
    stop = threading.Event()
    threading.stack_size(64 << 10)
    started = []
    try:
        for _ in range(GOAL):
            t = threading.Thread(target=stop.wait, daemon=True)
            try:
                t.start()
            except RuntimeError:  # "can't start new thread": the task limit
                break
            started.append(t)
    finally:
        stop.set()
        threading.stack_size(0)
        for t in started:
            t.join()
    return len(started)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.started = _bomb()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.started >= GOAL:
            raise RuntimeError(f"started {self.started} threads: nothing bounded this process's tasks")
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        _relu[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)
        return y
