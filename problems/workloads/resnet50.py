"""ResNet-50 in plain ``torch.nn`` (He et al. 2016, the "v1.5" variant: stride on the 3x3 convolution).

Stem: 7x7/2 conv 64, BatchNorm, ReLU, 3x3/2 max-pool. Four stages of bottleneck blocks ([3, 4, 6, 3] blocks;
widths 64, 128, 256, 512; expansion 4), each block 1x1 -> 3x3 -> 1x1 convolutions with BatchNorm and ReLU and a
projection shortcut (1x1 conv + BatchNorm) where the shape changes. Global average pool, 1000-way linear.
25.6M parameters. Training step: cross-entropy on random labels, SGD (lr 0.1, momentum 0.9, weight decay 1e-4,
the torchvision recipe). Images are NCHW (PyTorch's default memory format), batch 128 at 224x224.

``size="tiny"``: the same topology with base width 8, 32x32 images, batch 2, 10 classes.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from . import StepFn, check_args, dtype_name, param_count, resolve


@dataclass(frozen=True)
class ResNetConfig:
    layers: tuple[int, ...] = (3, 4, 6, 3)
    base_width: int = 64
    image: int = 224
    batch: int = 128
    num_classes: int = 1000
    lr: float = 0.1
    momentum: float = 0.9
    weight_decay: float = 1e-4


FULL = ResNetConfig()
TINY = ResNetConfig(base_width=8, image=32, batch=2, num_classes=10)


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, in_ch: int, width: int, stride: int):
        super().__init__()
        out_ch = width * self.expansion
        self.conv1 = nn.Conv2d(in_ch, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, out_ch, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(out_ch)
        self.downsample: nn.Module | None = None
        if stride != 1 or in_ch != out_ch:
            self.downsample = nn.Sequential(
                nn.Conv2d(in_ch, out_ch, 1, stride=stride, bias=False), nn.BatchNorm2d(out_ch)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = F.relu(self.bn1(self.conv1(x)), inplace=True)
        out = F.relu(self.bn2(self.conv2(out)), inplace=True)
        out = self.bn3(self.conv3(out))
        return F.relu(out + identity, inplace=True)


class ResNet50(nn.Module):
    def __init__(self, cfg: ResNetConfig):
        super().__init__()
        w = cfg.base_width
        self.conv1 = nn.Conv2d(3, w, 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(w)
        self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        stages = []
        in_ch = w
        for i, blocks in enumerate(cfg.layers):
            width = w * (2**i)
            stride = 1 if i == 0 else 2
            layer = []
            for b in range(blocks):
                layer.append(Bottleneck(in_ch, width, stride if b == 0 else 1))
                in_ch = width * Bottleneck.expansion
            stages.append(nn.Sequential(*layer))
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.fc = nn.Linear(in_ch, cfg.num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(F.relu(self.bn1(self.conv1(x)), inplace=True))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        x = F.adaptive_avg_pool2d(x, 1).flatten(1)
        return self.fc(x)


def build(
    mode: str,
    device: str | torch.device | None = "cpu",
    dtype: torch.dtype | str | None = torch.float32,
    size: str = "full",
    *,
    seed: int = 0,
    config: ResNetConfig | None = None,
) -> tuple[StepFn, dict]:
    """Build a ResNet-50 step. ``mode="train"``: forward, cross-entropy, backward, SGD step. ``mode="infer"``:
    one forward (BatchNorm in eval mode) under ``torch.inference_mode``. Returns ``(step_fn, description)``."""
    check_args(mode, size)
    dev, dt = resolve(device, dtype)
    cfg = config or (FULL if size == "full" else TINY)
    torch.manual_seed(seed)
    model = ResNet50(cfg).to(device=dev, dtype=dt)
    g = torch.Generator().manual_seed(seed)
    images = torch.randn(cfg.batch, 3, cfg.image, cfg.image, generator=g).to(device=dev, dtype=dt)
    labels = torch.randint(0, cfg.num_classes, (cfg.batch,), generator=g).to(dev)

    if mode == "train":
        model.train()
        opt = torch.optim.SGD(model.parameters(), lr=cfg.lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay)

        def step() -> torch.Tensor:
            opt.zero_grad(set_to_none=True)
            loss = F.cross_entropy(model(images), labels)
            loss.backward()
            opt.step()
            return loss.detach()

    else:
        model.eval()

        def step() -> torch.Tensor:
            with torch.inference_mode():
                return model(images)

    description = {
        "workload": "resnet50",
        "mode": mode,
        "size": size,
        "device": str(dev),
        "dtype": dtype_name(dt),
        "config": asdict(cfg),
        "parameters": param_count(model),
        "memory_format": "NCHW (contiguous)",
        "optimizer": "SGD(lr=0.1, momentum=0.9, weight_decay=1e-4)" if mode == "train" else None,
        "loss": "cross-entropy, random labels" if mode == "train" else None,
        "notes": "ResNet-50 v1.5 in plain torch.nn, eager mode, cudnn.benchmark left at its default.",
    }
    return step, description
