"""Run in a subprocess with TRITON_INTERPRET=1: the whole CAM++ forward through the Triton kernels
(with the torch front end and with the Triton one) against the torch path, for references of
different lengths and NaN in the padded frames, from padded and from packed input.

    triton_model_check.py CAMPPLUS_ONNX
"""

from __future__ import annotations

import sys

import torch

from omni_deploy.speaker.fused_model import FusedCampplus
from omni_deploy.speaker.onnx_weights import read_weights


def main() -> int:
    torch.backends.cuda.matmul.allow_tf32 = False
    weights = read_weights(sys.argv[1])
    reference = FusedCampplus(weights, "cpu", "torch")
    fused = {front: FusedCampplus(weights, "cpu", "triton", front) for front in ("torch", "triton")}
    g = torch.Generator().manual_seed(1)
    feats = torch.randn(2, 400, 80, generator=g)
    lengths = torch.tensor([400, 237])  # 200 and 119 frames after the TDNN: a partial segment
    feats[1, 300:] = float("nan")
    with torch.no_grad():
        expected = reference(feats, lengths)
        for front, model in fused.items():
            got = model(feats, lengths)
            diff = (expected - got).abs().max().item()
            scale = expected.abs().max().item()
            print(f"front end {front}: max |diff| {diff:.3e} of {scale:.3e}")
            assert torch.isfinite(got).all()
            assert diff <= 1e-5 * max(scale, 1.0), diff
            # Packed back to back, as the encoder's graphs take them (item 1 first, then item 0).
            packed = torch.cat([feats[1, :237], feats[0]])
            from_packed = model.forward_packed(packed, torch.tensor([237, 0]), lengths, 400)
            assert torch.allclose(from_packed, got, atol=1e-6 * max(scale, 1.0)), front
    print("triton model matches torch")
    return 0


if __name__ == "__main__":
    sys.exit(main())
