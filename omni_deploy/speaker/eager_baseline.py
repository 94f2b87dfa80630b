"""The seed's approach, kept as a baseline: the unfused 3D-Speaker module run eagerly.

Weights come from the same campplus.onnx. A batch norm the export folded into its conv is put
back as an identity norm whose shift is the conv's bias, so the module does exactly the folded
arithmetic while launching the kernels the unfused module launches.
"""

from __future__ import annotations

import numpy as np
import torch

from omni_deploy.speaker.architecture import inventory
from omni_deploy.speaker.onnx_weights import CampplusWeights, SpeakerModelError
from omni_deploy.speaker.reference_model import CAMPPlus


def _set_norm(norm: torch.nn.Module, scale: np.ndarray, shift: np.ndarray) -> None:
    """Make an eval-mode batch norm compute y = x * scale + shift."""
    assert isinstance(norm, torch.nn.modules.batchnorm._BatchNorm)
    assert norm.running_mean is not None and norm.running_var is not None
    if norm.affine:
        norm.running_mean.zero_()
        norm.running_var.fill_(1.0 - norm.eps)
        norm.weight.copy_(torch.from_numpy(scale))
        norm.bias.copy_(torch.from_numpy(shift))
    else:
        # An affine-free norm only subtracts a mean and divides by a deviation:
        # (x - mean) / sqrt(var + eps) = x * scale + shift for these two.
        norm.running_var.copy_(torch.from_numpy(1.0 / scale.astype(np.float64) ** 2 - norm.eps))
        norm.running_mean.copy_(torch.from_numpy(-shift / scale))


def reference_from_weights(weights: CampplusWeights, device: torch.device | str = "cpu") -> CAMPPlus:
    inv = inventory()
    model = CAMPPlus()
    modules = dict(model.named_modules())
    conv_for_norm = {conv: norm for norm, conv in inv.folded_into.items()}
    with torch.no_grad():
        for scope, conv in weights.convs.items():
            module = modules[scope]
            assert isinstance(module, (torch.nn.Conv1d, torch.nn.Conv2d))
            module.weight.copy_(torch.from_numpy(conv.weight))
            if conv.bias is None:
                continue
            if module.bias is not None:
                module.bias.copy_(torch.from_numpy(conv.bias))
                continue
            norm_scope = conv_for_norm.get(scope)
            if norm_scope is None or norm_scope in weights.affines:
                raise SpeakerModelError(f"{weights.source}: unexpected bias on {scope}")
            # The export folded this norm into the conv: an identity scale with the bias as shift.
            _set_norm(modules[norm_scope], np.ones_like(conv.bias), conv.bias)
        for scope, affine in weights.affines.items():
            _set_norm(modules[scope], affine.scale, affine.shift)
    return model.eval().to(device)
