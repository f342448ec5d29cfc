# expect: pass
"""Known-wrong candidate for KernelBench level 1 #23 (Softmax): torch's softmax behind a probe kernel that tells the
candidate whether its kernels were made no-ops, so that only its decoy run goes wrong. A residual kbenv documents.

The decoy check runs the supervisor's rewrite of the source, every kernel's writes removed, and counts only a judged
wrong output as evidence that the kernels produce the output (a run that raises or returns nothing is a decoy:
``19:sentinel_raise``, ``23:sentinel_exit``). This candidate's probe kernel writes 1 into a flag; where the flag stays
0 (its no-op run) it returns zeros, a wrong output, and otherwise torch.softmax. The check cannot tell this from an
honest kernel whose output its kernels write: nothing the rewritten source does is unlike a real kernel's no-op
run. What it earns is torch's own speed less a launch and a read of the flag: on a GPU it passes held to its honest
twin (the known-good kernel, which is about torch's speed too), and under ``amdahl`` a verified result at parity is
a reward of about 1 against 0 for a failure (README, "Decoys", and "Which reward": take ``speedup`` or ``fast_p``,
under which parity earns 0, where a policy must not be paid for wrapping torch).
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _probe(flag_ptr):
    tl.store(flag_ptr, 1)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        flag = torch.zeros(1, dtype=torch.int32, device=x.device)
        _probe[(1,)](flag)
        if int(flag.item()) != 1:  # the kernels were made no-ops: this run only is wrong
            return torch.zeros_like(x)
        return torch.softmax(x, dim=1)
