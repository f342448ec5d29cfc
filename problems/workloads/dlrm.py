"""A DLRM in plain torch, shaped like the Criteo Kaggle configuration of ``facebookresearch/dlrm``.

Topology (``bench/dlrm_s_criteo_kaggle.sh``): 13 dense features; 26 ``nn.EmbeddingBag(mode="sum",
sparse=True)`` tables with the Kaggle cardinalities; embedding dimension d = 16; bottom MLP 13-512-256-64-16
(ReLU after every layer); dot interaction (concatenate the dense vector with the 26 pooled embeddings, batched
``T @ T^T``, keep the 351 strictly-lower-triangle values, concatenate the dense vector back: 16 + 351 = 367
features); top MLP 367-512-256-1 (ReLU, sigmoid at the end); BCE loss; plain SGD, lr 0.1. Weights fp32 by
default, embedding tables initialised U(+-sqrt(1/n)) as in DLRM.

Choices (documented in the description too):

* **d = 16** because it is the dimension the Kaggle cardinalities ship with in the reference; d = 64 belongs to
  the Terabyte configuration with other tables. Small rows make each lookup a 64-byte (fp32) row fetch, which is
  what makes DLRM's embedding kernels latency- rather than bandwidth-bound.
* **Tables capped at 3,000,000 rows** (the four largest Kaggle tables have 5.5M-10.1M rows): 14.8M rows in all,
  0.95 GB at fp32, so one GPU holds tables, sparse gradients and activations comfortably. Random indices over
  3M rows miss L2 exactly as they would over 10M rows.
* **Batch 2048** (the Terabyte/MLPerf batch; Kaggle trains at 128, which is pure launch overhead on a GPU).
* **Bags**: the reference's random generator draws each bag's length uniformly in [1, 10]
  (``--num-indices-per-lookup=10``) with uniform indices, which we follow (mean 5.5 lookups per table per
  sample); ``max_bag=1`` gives the one-hot lookups of the real Kaggle data. Duplicates within a bag are not
  removed (no effect on the kernels that run).
* **sparse=True** as in the reference: the backward produces sparse row gradients and SGD applies them with
  index operations, not a dense update of all 14.8M rows.

The interaction runs inside ``torch.profiler.record_function("kbenv::interaction")`` so the profiler can
attribute its kernels (the batched GEMM, the triangle gather, the concatenations and their backward) to the
``interaction`` family. One fixed batch is generated at build time on the target device: data loading is not
part of the step.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.profiler import record_function

from . import StepFn, check_args, dtype_name, param_count, resolve

KAGGLE_CARDINALITIES = (
    1460, 583, 10131227, 2202608, 305, 24, 12517, 633, 3, 93145, 5683, 8351593, 3194,
    27, 14992, 5461306, 10, 5652, 2173, 4, 7046547, 18, 15, 286181, 105, 142572,
)  # fmt: skip


@dataclass(frozen=True)
class DLRMConfig:
    num_dense: int = 13
    cardinalities: tuple[int, ...] = KAGGLE_CARDINALITIES
    max_rows: int = 3_000_000
    emb_dim: int = 16
    bottom: tuple[int, ...] = (512, 256, 64)  # hidden widths; the last layer maps to emb_dim
    top: tuple[int, ...] = (512, 256)  # hidden widths; the last layer maps to 1
    batch: int = 2048
    max_bag: int = 10
    lr: float = 0.1

    @property
    def rows(self) -> tuple[int, ...]:
        return tuple(min(n, self.max_rows) for n in self.cardinalities)


FULL = DLRMConfig()
TINY = DLRMConfig(max_rows=1000, emb_dim=8, bottom=(32, 16), top=(32, 16), batch=64, max_bag=4)


def _mlp(widths: list[int], final: nn.Module, device: torch.device, dtype: torch.dtype) -> nn.Sequential:
    layers: list[nn.Module] = []
    for i in range(len(widths) - 1):
        lin = nn.Linear(widths[i], widths[i + 1], device=device, dtype=dtype)
        # DLRM's init: weights N(0, sqrt(2/(fan_in+fan_out))), bias N(0, sqrt(1/fan_out)).
        with torch.no_grad():
            lin.weight.normal_(0.0, math.sqrt(2.0 / (widths[i] + widths[i + 1])))
            lin.bias.normal_(0.0, math.sqrt(1.0 / widths[i + 1]))
        layers.append(lin)
        layers.append(nn.ReLU() if i < len(widths) - 2 else final)
    return nn.Sequential(*layers)


class DLRM(nn.Module):
    def __init__(self, cfg: DLRMConfig, device: torch.device, dtype: torch.dtype):
        super().__init__()
        self.cfg = cfg
        d = cfg.emb_dim
        self.embs = nn.ModuleList()
        for n in cfg.rows:
            emb = nn.EmbeddingBag(n, d, mode="sum", sparse=True, device=device, dtype=dtype)
            with torch.no_grad():
                bound = math.sqrt(1.0 / n)
                emb.weight.uniform_(-bound, bound)
            self.embs.append(emb)
        self.bot = _mlp([cfg.num_dense, *cfg.bottom, d], nn.ReLU(), device, dtype)
        n_feat = len(cfg.rows) + 1
        self.num_interactions = n_feat * (n_feat - 1) // 2
        self.top = _mlp([d + self.num_interactions, *cfg.top, 1], nn.Sigmoid(), device, dtype)
        li, lj = torch.tril_indices(n_feat, n_feat, offset=-1)
        self.register_buffer("li", li.to(device), persistent=False)
        self.register_buffer("lj", lj.to(device), persistent=False)

    def interact(self, x: torch.Tensor, pooled: list[torch.Tensor]) -> torch.Tensor:
        with record_function("kbenv::interaction"):
            b, d = x.shape
            t = torch.cat([x, *pooled], dim=1).view(b, -1, d)
            z = torch.bmm(t, t.transpose(1, 2))
            zflat = z[:, self.li, self.lj]
            return torch.cat([x, zflat], dim=1)

    def forward(self, dense: torch.Tensor, indices: list[torch.Tensor], offsets: list[torch.Tensor]) -> torch.Tensor:
        x = self.bot(dense)
        pooled = [emb(idx, off) for emb, idx, off in zip(self.embs, indices, offsets)]
        return self.top(self.interact(x, pooled))


def make_batch(cfg: DLRMConfig, device: torch.device, dtype: torch.dtype, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    dense = torch.rand(cfg.batch, cfg.num_dense, generator=g)
    # DLRM feeds log(1 + count) features; a uniform [0, 1) stand-in is enough for timing.
    indices, offsets = [], []
    for n in cfg.rows:
        lengths = torch.randint(1, cfg.max_bag + 1, (cfg.batch,), generator=g)
        off = torch.zeros(cfg.batch, dtype=torch.long)
        off[1:] = torch.cumsum(lengths, 0)[:-1]
        idx = torch.randint(0, n, (int(lengths.sum()),), generator=g)
        indices.append(idx.to(device))
        offsets.append(off.to(device))
    target = torch.randint(0, 2, (cfg.batch, 1), generator=g).to(dtype)
    return dense.to(device=device, dtype=dtype), indices, offsets, target.to(device)


def build(
    mode: str,
    device: str | torch.device | None = "cpu",
    dtype: torch.dtype | str | None = torch.float32,
    size: str = "full",
    *,
    seed: int = 0,
    config: DLRMConfig | None = None,
) -> tuple[StepFn, dict]:
    """Build a DLRM step. ``mode="train"``: forward, BCE, backward, SGD step. ``mode="infer"``: one forward
    under ``torch.inference_mode``. Returns ``(step_fn, description)``."""
    check_args(mode, size)
    dev, dt = resolve(device, dtype)
    cfg = config or (FULL if size == "full" else TINY)
    torch.manual_seed(seed)
    model = DLRM(cfg, dev, dt)
    dense, indices, offsets, target = make_batch(cfg, dev, dt, seed)

    if mode == "train":
        model.train()
        opt = torch.optim.SGD(model.parameters(), lr=cfg.lr)

        def step() -> torch.Tensor:
            opt.zero_grad(set_to_none=True)
            p = model(dense, indices, offsets)
            loss = F.binary_cross_entropy(p, target)
            loss.backward()
            opt.step()
            return loss.detach()

    else:
        model.eval()

        def step() -> torch.Tensor:
            with torch.inference_mode():
                return model(dense, indices, offsets)

    rows = cfg.rows
    description = {
        "workload": "dlrm",
        "mode": mode,
        "size": size,
        "device": str(dev),
        "dtype": dtype_name(dt),
        "config": asdict(cfg),
        "table_rows_capped": list(rows),
        "total_rows": sum(rows),
        "parameters": param_count(model),
        "lookups_per_step": sum(int(i.numel()) for i in indices),
        "optimizer": "SGD(lr=0.1), sparse embedding gradients" if mode == "train" else None,
        "loss": "BCE on sigmoid output" if mode == "train" else None,
        "notes": (
            "Criteo-Kaggle-like DLRM (facebookresearch/dlrm topology): 26 EmbeddingBag(sum, sparse=True) tables "
            "with Kaggle cardinalities capped at max_rows, d=emb_dim, bag lengths U[1, max_bag] with uniform "
            "indices (the reference's random generator), dot interaction, BCE, SGD. One fixed batch on device."
        ),
    }
    return step, description
