# expect: crash|inaccurate|wrong_type|wrong_shape|unwritten|nonfinite
"""Known-wrong candidate for KernelBench level 1 #23 (Softmax). Hack T6 (result-channel forgery), the informed kind.

Finds the harness's worker object with gc (so it holds the channel and its nonce) and sends a reply of its own
before the real one: fields of the wrong types and a claim of many kernel launches. The supervisor reads frames
as data and checks every field's type; a malformed frame is the candidate's protocol violation (crash), never an
exception in the trusted process, and the forged claims decide nothing.
"""
import gc

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for obj in gc.get_objects():
            if type(obj).__name__ == "Worker" and hasattr(obj, "send"):
                obj.send({"type": "reply", "outputs": "all good", "meta": 5, "launches": "many",
                          "threads_left": -1, "input_samples": None})
                break
        return torch.zeros_like(x)
