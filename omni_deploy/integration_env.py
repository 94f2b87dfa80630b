"""The environment contract between `omni-deploy serve` and the vLLM plugin in the server.

Kept in a module of its own with no imports, so the plugin, serve and explain agree on it.
"""

from __future__ import annotations

from typing import Literal

# cuda-torch | cpu-onnxruntime | tensorrt. Unset: the plugin stays inert.
SPK_BACKEND = "OMNI_DEPLOY_SPK_BACKEND"
# 1 | 0: matmul TF32 for CAM++ on CUDA (token2wav_allow_tf32).
SPK_TF32 = "OMNI_DEPLOY_SPK_TF32"
# vllm-omni's own switch for TensorRT in MiniCPM-o's Code2Wav.
VLLM_OMNI_TRT = "MINICPMO_TOKEN2WAV_TRT"

# The speaker-embedding backends, named once: serve's --spk-backend, explain, the plugin, resolve.
Backend = Literal["cuda-torch", "cpu-onnxruntime", "tensorrt"]
CUDA_TORCH: Backend = "cuda-torch"
CPU_ORT: Backend = "cpu-onnxruntime"
TENSORRT: Backend = "tensorrt"
BACKENDS: tuple[Backend, ...] = (CUDA_TORCH, CPU_ORT, TENSORRT)


def backend_choice(name: str) -> Backend | None:
    """A --spk-backend value: "auto" -> None (what the deploy file says), else the backend named."""
    for backend in BACKENDS:
        if backend == name:
            return backend
    if name == "auto":
        return None
    raise ValueError(f"unknown speaker backend {name!r}; one of auto, {', '.join(BACKENDS)}")
