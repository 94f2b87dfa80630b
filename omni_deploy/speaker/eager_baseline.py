"""The seed's approach, kept as a baseline: the unfused 3D-Speaker module run eagerly.

Weights come from the same campplus.onnx. A batch norm the export folded into its conv is put
back as an identity norm whose shift is the conv's bias, so the module does exactly the folded
arithmetic while launching the kernels the unfused module launches.
"""

from __future__ import annotations

import torch

from omni_deploy.speaker.architecture import inventory
from omni_deploy.speaker.onnx_weights import CampplusWeights, SpeakerModelError
from omni_deploy.speaker.reference_model import CAMPPlus


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
            if conv.bias is not None:
                if module.bias is not None:
                    module.bias.copy_(torch.from_numpy(conv.bias))
                    continue
                norm_scope = conv_for_norm.get(scope)
                if norm_scope is None or norm_scope in weights.affines:
                    raise SpeakerModelError(f"{weights.source}: unexpected bias on {scope}")
                norm = modules[norm_scope]
                assert isinstance(norm, torch.nn.modules.batchnorm._BatchNorm)
                assert norm.running_mean is not None and norm.running_var is not None
                norm.running_mean.zero_()
                norm.running_var.fill_(1.0 - norm.eps)
                if norm.affine:
                    norm.weight.fill_(1.0)
                    norm.bias.copy_(torch.from_numpy(conv.bias))
        for scope, affine in weights.affines.items():
            norm = modules[scope]
            assert isinstance(norm, torch.nn.modules.batchnorm._BatchNorm)
            assert norm.running_mean is not None and norm.running_var is not None
            # y = x * scale + shift, written as a norm with mean 0 and var 1 - eps.
            norm.running_mean.zero_()
            norm.running_var.fill_(1.0 - norm.eps)
            if norm.affine:
                norm.weight.copy_(torch.from_numpy(affine.scale))
                norm.bias.copy_(torch.from_numpy(affine.shift))
            else:
                # An affine-free norm can still only subtract a mean and divide by a deviation.
                norm.running_var.copy_(torch.from_numpy(1.0 / affine.scale**2) - norm.eps)
                norm.running_mean.copy_(torch.from_numpy(-affine.shift / affine.scale))
    return model.eval().to(device)
