"""The vocabulary `omni-deploy serve`, explain and the vLLM plugin share: backend names and the
environment variables of the speaker path.

Every name is defined once, in `omni_deploy.speaker_rules` (the rule table the plugin applies in the
server, standard library only); this module re-exports them under the names the CLI side uses and
adds the CLI's --spk-backend parsing.
"""

from __future__ import annotations

from omni_deploy.speaker_rules import BACKENDS, CPU_ORT, CUDA_TORCH, TENSORRT, Backend
from omni_deploy.speaker_rules import ENV_BACKEND as SPK_BACKEND
from omni_deploy.speaker_rules import ENV_TF32 as SPK_TF32
from omni_deploy.speaker_rules import ENV_TRT as VLLM_OMNI_TRT

__all__ = [
    "BACKENDS",
    "CPU_ORT",
    "CUDA_TORCH",
    "SPK_BACKEND",
    "SPK_TF32",
    "TENSORRT",
    "VLLM_OMNI_TRT",
    "Backend",
    "backend_choice",
]


def backend_choice(name: str) -> Backend | None:
    """A --spk-backend value: "auto" -> None (what the deploy file says), else the backend named."""
    for backend in BACKENDS:
        if backend == name:
            return backend
    if name == "auto":
        return None
    raise ValueError(f"unknown speaker backend {name!r}; one of auto, {', '.join(BACKENDS)}")
