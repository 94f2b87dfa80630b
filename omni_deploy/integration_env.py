"""The environment contract between `omni-deploy serve` and the vLLM plugin in the server.

Kept in a module of its own with no imports, so the plugin, serve and explain agree on it.
"""

from __future__ import annotations

# cuda-torch | cpu-onnxruntime | tensorrt. Unset: the plugin stays inert.
SPK_BACKEND = "OMNI_DEPLOY_SPK_BACKEND"
# 1 | 0: matmul TF32 for CAM++ on CUDA (token2wav_allow_tf32).
SPK_TF32 = "OMNI_DEPLOY_SPK_TF32"
# vllm-omni's own switch for TensorRT in MiniCPM-o's Code2Wav.
VLLM_OMNI_TRT = "MINICPMO_TOKEN2WAV_TRT"

BACKENDS = ("cuda-torch", "cpu-onnxruntime", "tensorrt")
