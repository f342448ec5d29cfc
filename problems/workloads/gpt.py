"""A GPT-2-small-style decoder in plain torch, sized for one GPU.

12 layers, d_model 768, 12 heads, MLP 4x with tanh-GELU, pre-LayerNorm, learned positions, a fused QKV
projection, causal ``F.scaled_dot_product_attention`` (PyTorch picks the backend: cuDNN or flash on Hopper),
no dropout, the LM head tied to the token embedding; vocabulary 50,304 (GPT-2's 50,257 padded to a multiple of
64, as nanoGPT does); 124M parameters. Batch 8 x sequence 1024.

* ``mode="train"``: next-token cross-entropy, backward, gradient clipping to norm 1.0 and AdamW (lr 6e-4,
  betas (0.9, 0.95), weight decay 0.1; PyTorch's default ``foreach`` implementation). Clipping and the optimizer
  step run inside ``record_function("kbenv::optimizer")``.
* ``mode="infer"``: one full-sequence forward (a prefill of 8 x 1024 tokens, logits for every position) under
  ``torch.inference_mode``. Autoregressive decoding with a KV cache is not modelled.

``size="tiny"``: 2 layers, d_model 64, 4 heads, vocabulary 256, batch 2 x sequence 32.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.profiler import record_function

from . import StepFn, check_args, dtype_name, param_count, resolve


@dataclass(frozen=True)
class GPTConfig:
    n_layer: int = 12
    n_head: int = 12
    d_model: int = 768
    vocab: int = 50304
    seq: int = 1024
    batch: int = 8
    lr: float = 6e-4
    weight_decay: float = 0.1
    grad_clip: float = 1.0


FULL = GPTConfig()
TINY = GPTConfig(n_layer=2, n_head=4, d_model=64, vocab=256, seq=32, batch=2)


class Block(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        d = cfg.d_model
        self.n_head = cfg.n_head
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc = nn.Linear(d, 4 * d)
        self.fc_out = nn.Linear(4 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        h = self.n_head
        q = q.view(b, t, h, d // h).transpose(1, 2)
        k = k.view(b, t, h, d // h).transpose(1, 2)
        v = v.view(b, t, h, d // h).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
        return x + self.fc_out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.wte = nn.Embedding(cfg.vocab, cfg.d_model)
        self.wpe = nn.Embedding(cfg.seq, cfg.d_model)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(cfg.d_model)
        self.lm_head = nn.Linear(cfg.d_model, cfg.vocab, bias=False)
        self.lm_head.weight = self.wte.weight  # weight tying
        for name, p in self.named_parameters():
            if p.dim() >= 2:
                std = 0.02 / (2 * cfg.n_layer) ** 0.5 if name.endswith(("proj.weight", "fc_out.weight")) else 0.02
                nn.init.normal_(p, 0.0, std)
            elif name.endswith("bias"):
                nn.init.zeros_(p)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(tokens.shape[1], device=tokens.device)
        x = self.wte(tokens) + self.wpe(pos)
        for block in self.blocks:
            x = block(x)
        return self.lm_head(self.ln_f(x))


def build(
    mode: str,
    device: str | torch.device | None = "cpu",
    dtype: torch.dtype | str | None = torch.float32,
    size: str = "full",
    *,
    seed: int = 0,
    config: GPTConfig | None = None,
) -> tuple[StepFn, dict]:
    """Build a GPT step. ``mode="train"``: forward, cross-entropy, backward, clip, AdamW step. ``mode="infer"``:
    one full-sequence forward under ``torch.inference_mode``. Returns ``(step_fn, description)``."""
    check_args(mode, size)
    dev, dt = resolve(device, dtype)
    cfg = config or (FULL if size == "full" else TINY)
    torch.manual_seed(seed)
    model = GPT(cfg).to(device=dev, dtype=dt)
    model.lm_head.weight = model.wte.weight  # keep the tie whatever .to() did (the meta device breaks it)
    g = torch.Generator().manual_seed(seed)
    data = torch.randint(0, cfg.vocab, (cfg.batch, cfg.seq + 1), generator=g).to(dev)
    tokens, targets = data[:, :-1].contiguous(), data[:, 1:].contiguous()

    if mode == "train":
        model.train()
        decay = [p for p in model.parameters() if p.dim() >= 2]
        no_decay = [p for p in model.parameters() if p.dim() < 2]
        opt = torch.optim.AdamW(
            [{"params": decay, "weight_decay": cfg.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
            lr=cfg.lr,
            betas=(0.9, 0.95),
        )

        def step() -> torch.Tensor:
            opt.zero_grad(set_to_none=True)
            logits = model(tokens)
            loss = F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))
            loss.backward()
            with record_function("kbenv::optimizer"):
                torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
                opt.step()
            return loss.detach()

    else:
        model.eval()

        def step() -> torch.Tensor:
            with torch.inference_mode():
                return model(tokens)

    description = {
        "workload": "gpt",
        "mode": mode,
        "size": size,
        "device": str(dev),
        "dtype": dtype_name(dt),
        "config": asdict(cfg),
        "parameters": param_count(model),
        "attention": "F.scaled_dot_product_attention(is_causal=True), default backend selection",
        "optimizer": "AdamW(lr=6e-4, betas=(0.9, 0.95), wd=0.1) + clip_grad_norm_(1.0)" if mode == "train" else None,
        "loss": "next-token cross-entropy" if mode == "train" else None,
        "notes": (
            "GPT-2-small-style decoder (pre-LN, tied LM head). infer = one full-sequence forward (prefill), "
            "not autoregressive decoding."
        ),
    }
    return step, description
