"""Plain-torch workloads whose measured GPU-time profiles weight kbenv's reward (Amdahl's law).

Each workload module has ``build(mode, device, dtype, size="full") -> (step_fn, description)``:

* ``mode="train"``: ``step_fn()`` runs one training step (forward, loss, backward, optimizer step);
* ``mode="infer"``: ``step_fn()`` runs one forward pass under ``torch.inference_mode()``;
* ``size="full"`` is sized for one GPU; ``size="tiny"`` keeps the topology but is small enough for CPU tests;
* ``description`` is a JSON-serialisable dict of the configuration actually built.

Step functions keep their inputs on the device (data loading is not part of a step) and return the loss (train)
or the output (infer) without synchronising.
"""

from __future__ import annotations

from typing import Any, Callable

import torch

MODES = ("train", "infer")
SIZES = ("full", "tiny")

StepFn = Callable[[], Any]


def check_args(mode: str, size: str) -> None:
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if size not in SIZES:
        raise ValueError(f"size must be one of {SIZES}, got {size!r}")


def resolve(device: str | torch.device | None, dtype: torch.dtype | str | None) -> tuple[torch.device, torch.dtype]:
    """Normalise ``device`` (default cpu) and ``dtype`` (a torch.dtype or its name, default float32)."""
    dev = torch.device(device if device is not None else "cpu")
    if dtype is None:
        dt = torch.float32
    elif isinstance(dtype, str):
        dt = getattr(torch, dtype.removeprefix("torch."), None)
        if not isinstance(dt, torch.dtype):
            raise ValueError(f"not a torch dtype: {dtype!r}")
    else:
        dt = dtype
    return dev, dt


def param_count(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


# The registry is imported after the helpers above, which the workload modules use.
from . import dlrm, gpt, resnet50  # noqa: E402

WORKLOADS: dict[str, Callable[..., tuple[StepFn, dict]]] = {
    "dlrm": dlrm.build,
    "resnet50": resnet50.build,
    "gpt": gpt.build,
}

# dtype each workload is profiled in by default (benchmarks/profile_workloads.py): DLRM's reference trains in
# fp32; the CNN and the transformer are run in bf16 as they would be on an H100/H200-class GPU.
DEFAULT_DTYPES: dict[str, torch.dtype] = {
    "dlrm": torch.float32,
    "resnet50": torch.bfloat16,
    "gpt": torch.bfloat16,
}

__all__ = ["WORKLOADS", "DEFAULT_DTYPES", "MODES", "SIZES", "check_args", "resolve"]
