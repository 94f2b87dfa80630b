"""The CAM++ layer inventory: which convs and batch norms exist, their shapes, and which batch
norms an exporter may fold into the conv before them. Derived from the reference module, so it
cannot drift from it."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from omni_deploy.speaker.reference_model import BLOCKS


@dataclass(frozen=True)
class Inventory:
    conv_shapes: dict[str, tuple[int, ...]]
    affine_sizes: dict[str, int]
    folded_into: dict[str, str]  # batch-norm scope -> the conv scope it may be folded into


def _post_conv_pairs() -> dict[str, str]:
    pairs = {"head.bn1": "head.conv1", "head.bn2": "head.conv2"}
    for layer in (1, 2):
        for index in (0, 1):
            base = f"head.layer{layer}.{index}"
            pairs[f"{base}.bn1"] = f"{base}.conv1"
            pairs[f"{base}.bn2"] = f"{base}.conv2"
            pairs[f"{base}.shortcut.1"] = f"{base}.shortcut.0"
    pairs["xvector.tdnn.nonlinear.batchnorm"] = "xvector.tdnn.linear"
    for block, (layers, _) in enumerate(BLOCKS, start=1):
        for i in range(1, layers + 1):
            scope = f"xvector.block{block}.tdnnd{i}"
            pairs[f"{scope}.nonlinear2.batchnorm"] = f"{scope}.linear1"
    # transit3's output feeds only out_nonlinear, so exporters fold that norm into transit3.
    pairs["xvector.out_nonlinear.batchnorm"] = f"xvector.transit{len(BLOCKS)}.linear"
    pairs["xvector.dense.nonlinear.batchnorm"] = "xvector.dense.linear"
    return pairs


@cache
def inventory() -> Inventory:
    import torch

    from omni_deploy.speaker.reference_model import CAMPPlus

    with torch.device("meta"):
        model = CAMPPlus()
    convs: dict[str, tuple[int, ...]] = {}
    affines: dict[str, int] = {}
    for name, module in model.named_modules():
        if isinstance(module, (torch.nn.Conv1d, torch.nn.Conv2d)):
            convs[name] = tuple(module.weight.shape)
        elif isinstance(module, (torch.nn.BatchNorm1d, torch.nn.BatchNorm2d)):
            affines[name] = module.num_features
    return Inventory(convs, affines, _post_conv_pairs())
