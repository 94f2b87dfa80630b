"""Which way to the S3 tokens gives vllm-omni's own tokens under the stage's precision policy.

Reference preparation runs under the stage's matmul policy, `token2wav_allow_tf32` (true, the
default: TF32 matmuls; false: strict FP32), as in the seed's feature; cuDNN's TF32 flag for
convolutions is the process's (torch leaves it on). The tokens must equal, bit for bit, those of
vllm-omni 0.30.0's per-voice path (its CPU log-mel, then `quantize` of one voice) run under the
same policy. They are discrete, and TF32 rounds each operand to 10 mantissa bits: a one-ulp change
of an input, or another kernel for another shape, moves the S3 tokenizer's values by up to about
1e-3 (H200, docs/benchmarks.md). Hence, on CUDA:

- own-shapes (TF32 matmuls, the default policy): vllm-omni's CPU log-mel of each voice (bit for
  bit its input) and every operation of the S3 tokenizer at the shape vllm-omni's per-voice call
  gives it (the same kernels), all voices queued back to back in one pass with one wait. No batch
  of the transformer reproduces TF32 products, so none is tried.
- host (strict FP32, cuDNN TF32 on): the same log-mel and each voice's convolutions at its own
  shape (cuDNN picks the same algorithm), the transformer batched in FP32 (values within 4.8e-6).
- device (strict FP32, cuDNN TF32 off; and the CPU under either policy, which has no TF32): the
  all-GPU front end: the device's own log-mel and batched convolutions, all in FP32 (<= 8.7e-6).
The batched routes recheck voices whose values lie near a rounding boundary, batched, at their own
shapes (prepare.py). `OMNI_DEPLOY_REFPREP_S3=device|host|own-shapes|per-voice` forces a way; one
that is not exact under the policy in force then gives tokens that can differ from vllm-omni's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch

DEVICE, HOST, OWN_SHAPES, PER_VOICE = "device", "host", "own-shapes", "per-voice"
ROUTES = (DEVICE, HOST, OWN_SHAPES, PER_VOICE)
ENV_S3 = "OMNI_DEPLOY_REFPREP_S3"


@dataclass(frozen=True)
class Route:
    s3: str  # DEVICE, HOST, OWN_SHAPES or PER_VOICE
    why: str


def exact_routes(device_type: str, allow_tf32: bool, cudnn_tf32: bool) -> tuple[str, ...]:
    """The routes whose tokens equal vllm-omni's per-voice path under this policy, fastest first."""
    if device_type != "cuda":
        return (DEVICE, HOST, OWN_SHAPES, PER_VOICE)  # no TF32 on the CPU: FP32 either way
    if allow_tf32:
        return (OWN_SHAPES, PER_VOICE)
    if cudnn_tf32:
        return (HOST, OWN_SHAPES, PER_VOICE)
    return (DEVICE, HOST, OWN_SHAPES, PER_VOICE)


def choose_route(device: torch.device, allow_tf32: bool, env: Mapping[str, str]) -> Route:
    forced = env.get(ENV_S3, "").strip()
    if forced in ROUTES:
        return Route(forced, f"env {ENV_S3}")
    cudnn_tf32 = bool(torch.backends.cudnn.allow_tf32)
    route = exact_routes(device.type, allow_tf32, cudnn_tf32)[0]
    if device.type != "cuda":
        return Route(route, "the CPU: FP32 under either policy")
    if allow_tf32:
        return Route(route, "token2wav_allow_tf32 true: TF32 matmuls round by shape")
    if cudnn_tf32:
        return Route(route, "token2wav_allow_tf32 false, cuDNN TF32 on (the process's): FP32 matmuls")
    return Route(route, "token2wav_allow_tf32 false, cuDNN TF32 off: FP32 throughout")
