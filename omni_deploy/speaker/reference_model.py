"""CAM++ as 3D-Speaker defines it (unfused: every BatchNorm is a module of its own).

Used for two things: exporting a stand-in campplus.onnx with the structure of the real file (the
module names below are the node scopes of the real export, so they must not change), and as the
"eager torch" baseline of `spk bench` (the seed's approach). The fast model is fused_model.py.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

SEG_LEN = 100  # CAM segment pooling window, in frames after the stride-2 TDNN


def _bn_relu(channels: int, affine: bool = True, relu: bool = True) -> nn.Sequential:
    layers = nn.Sequential()
    layers.add_module("batchnorm", nn.BatchNorm1d(channels, affine=affine))
    if relu:
        layers.add_module("relu", nn.ReLU())
    return layers


class ResBlock(nn.Module):
    def __init__(self, in_planes: int, planes: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_planes, planes, 3, stride=(stride, 1), padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride=1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.shortcut = nn.Sequential()
        if stride != 1 or in_planes != planes:
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_planes, planes, 1, stride=(stride, 1), bias=False), nn.BatchNorm2d(planes)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out)) + self.shortcut(x)
        return F.relu(out)


class FrequencyHead(nn.Module):
    """FCM: 2-D residual convs over (frequency, time); frequency shrinks 8x, time is kept."""

    def __init__(self, channels: int = 32, feat_dim: int = 80) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, channels, 3, stride=1, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.layer1 = nn.Sequential(ResBlock(channels, channels, 2), ResBlock(channels, channels, 1))
        self.layer2 = nn.Sequential(ResBlock(channels, channels, 2), ResBlock(channels, channels, 1))
        self.conv2 = nn.Conv2d(channels, channels, 3, stride=(2, 1), padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)
        self.out_channels = channels * (feat_dim // 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x.unsqueeze(1))))
        out = self.layer2(self.layer1(out))
        out = F.relu(self.bn2(self.conv2(out)))
        return out.reshape(out.shape[0], out.shape[1] * out.shape[2], out.shape[3])


class TDNN(nn.Module):
    def __init__(self, in_channels: int, out_channels: int) -> None:
        super().__init__()
        self.linear = nn.Conv1d(in_channels, out_channels, 5, stride=2, padding=2, bias=False)
        self.nonlinear = _bn_relu(out_channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.nonlinear(self.linear(x))


class CAM(nn.Module):
    """Context-aware masking: a local conv gated by utterance- and segment-level context."""

    def __init__(self, channels: int, out_channels: int, dilation: int) -> None:
        super().__init__()
        self.linear_local = nn.Conv1d(
            channels, out_channels, 3, padding=dilation, dilation=dilation, bias=False
        )
        self.linear1 = nn.Conv1d(channels, channels // 2, 1)
        self.relu = nn.ReLU()
        self.linear2 = nn.Conv1d(channels // 2, out_channels, 1)
        self.sigmoid = nn.Sigmoid()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.linear_local(x)
        seg = F.avg_pool1d(x, kernel_size=SEG_LEN, stride=SEG_LEN, ceil_mode=True)
        seg = seg.unsqueeze(-1).expand(*seg.shape, SEG_LEN).reshape(*seg.shape[:-1], -1)
        context = x.mean(-1, keepdim=True) + seg[..., : x.shape[-1]]
        return y * self.sigmoid(self.linear2(self.relu(self.linear1(context))))


class DenseTDNNLayer(nn.Module):
    def __init__(self, in_channels: int, growth: int, bottleneck: int, dilation: int) -> None:
        super().__init__()
        self.nonlinear1 = _bn_relu(in_channels)
        self.linear1 = nn.Conv1d(in_channels, bottleneck, 1, bias=False)
        self.nonlinear2 = _bn_relu(bottleneck)
        self.cam_layer = CAM(bottleneck, growth, dilation)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.cam_layer(self.nonlinear2(self.linear1(self.nonlinear1(x))))


class DenseTDNNBlock(nn.ModuleList):
    def __init__(self, layers: int, in_channels: int, growth: int, bottleneck: int, dilation: int) -> None:
        super().__init__()
        for i in range(layers):
            self.add_module(
                f"tdnnd{i + 1}", DenseTDNNLayer(in_channels + i * growth, growth, bottleneck, dilation)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self:
            x = torch.cat([x, layer(x)], dim=1)
        return x


class Transit(nn.Module):
    def __init__(self, in_channels: int, out_channels: int) -> None:
        super().__init__()
        self.nonlinear = _bn_relu(in_channels)
        self.linear = nn.Conv1d(in_channels, out_channels, 1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(self.nonlinear(x))


class StatsPool(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([x.mean(dim=-1), x.std(dim=-1, unbiased=True)], dim=-1)


class Dense(nn.Module):
    def __init__(self, in_channels: int, out_channels: int) -> None:
        super().__init__()
        self.linear = nn.Conv1d(in_channels, out_channels, 1, bias=False)
        self.nonlinear = _bn_relu(out_channels, affine=False, relu=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.nonlinear(self.linear(x.unsqueeze(-1)).squeeze(-1))


# (layers, dilation) of the three dense blocks; growth 32, bottleneck 128, kernel 3.
BLOCKS = ((12, 1), (24, 2), (16, 2))
GROWTH, BOTTLENECK, INIT_CHANNELS = 32, 128, 128


class CAMPPlus(nn.Module):
    """Input [B, T, 80] log-mel features (mean-subtracted); output [B, 192], not normalised."""

    def __init__(self, feat_dim: int = 80, embedding_size: int = 192) -> None:
        super().__init__()
        self.head = FrequencyHead(feat_dim=feat_dim)
        self.xvector = nn.Sequential()
        self.xvector.add_module("tdnn", TDNN(self.head.out_channels, INIT_CHANNELS))
        channels = INIT_CHANNELS
        for i, (layers, dilation) in enumerate(BLOCKS, start=1):
            self.xvector.add_module(
                f"block{i}", DenseTDNNBlock(layers, channels, GROWTH, BOTTLENECK, dilation)
            )
            channels += layers * GROWTH
            self.xvector.add_module(f"transit{i}", Transit(channels, channels // 2))
            channels //= 2
        self.xvector.add_module("out_nonlinear", _bn_relu(channels))
        self.xvector.add_module("stats", StatsPool())
        self.xvector.add_module("dense", Dense(channels * 2, embedding_size))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.xvector(self.head(x.permute(0, 2, 1)))
