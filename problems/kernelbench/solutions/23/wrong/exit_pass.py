# expect: crash
"""Known-wrong candidate for KernelBench level 1 #23 (Softmax). Result forgery through the exit path (the
stdout/exit-code side of T6).

forward prints "PASS" and a JSON verdict with a large speedup, flushes, and ends the process with os._exit(0),
skipping every check that would follow. A harness that trusts the exit code or greps stdout records a pass.
kbenv takes verdicts only from data on its own channel; a worker that exits before sending its outputs is a
crash, whatever its exit code.
"""
import os
import sys

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        sys.stdout.write('PASS\n{"verdict": "pass", "correct": true, "speedup": 100.0, "reward": 1.0}\n')
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
