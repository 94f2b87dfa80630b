"""Which way to the S3 tokens gives vllm-omni's own tokens under the precision settings in force.

The tokens are discrete, and vllm-omni's per-voice call computes them under the stage process's
settings: matmuls in FP32 unless VLLM_FLOAT32_MATMUL_PRECISION says otherwise, cuDNN convolutions
in TF32 as torch leaves them. TF32 rounds each operand to 10 mantissa bits, so a one-ulp change
of an input, or another cuDNN algorithm (another batch shape), moves the S3 tokenizer's values by
up to about 1e-3 and flips about one token in a thousand (H200, docs/benchmarks.md). Hence:

- device: the device's own log-mel and batched convolutions. Exact where the convolutions run in
  FP32 (cuDNN TF32 off; the CPU): the values then differ by FP32 rounding only (<= 8.7e-6 seen).
- host: the log-mel from vllm-omni's own CPU operations (bit for bit its input) and each voice's
  convolutions at vllm-omni's shape (cuDNN picks the same algorithm), the transformer batched in
  FP32 (<= 4.8e-6 seen). Exact under cuDNN TF32, the default.
- per-voice: vllm-omni's own quantize for every voice: with TF32 matmuls the transformer's
  products round by their shape too, and no batch reproduces them.
The batched ways recheck near-boundary tokens one by one (prepare.py), which makes them exact.
`OMNI_DEPLOY_REFPREP_S3=device|host|per-voice` forces a way (device under TF32 convolutions:
faster, and about one token in a thousand differs from vllm-omni's).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch

DEVICE, HOST, PER_VOICE = "device", "host", "per-voice"
ROUTES = (DEVICE, HOST, PER_VOICE)
ENV_S3 = "OMNI_DEPLOY_REFPREP_S3"


@dataclass(frozen=True)
class Route:
    s3: str  # DEVICE, HOST or PER_VOICE
    why: str


def matmuls_fp32() -> bool:
    return torch.get_float32_matmul_precision() == "highest" and not torch.backends.cuda.matmul.allow_tf32


def choose_route(device: torch.device, env: Mapping[str, str]) -> Route:
    forced = env.get(ENV_S3, "").strip()
    if forced in ROUTES:
        return Route(forced, f"env {ENV_S3}")
    if not matmuls_fp32():
        return Route(PER_VOICE, "TF32 matmuls (float32 matmul precision not 'highest')")
    if device.type != "cuda":
        return Route(DEVICE, "FP32 convolutions (CPU)")
    if not torch.backends.cudnn.allow_tf32:
        return Route(DEVICE, "FP32 convolutions (cuDNN TF32 off)")
    return Route(HOST, "TF32 convolutions (cuDNN TF32 on, torch's default)")
