"""CosyVoice3: the CUDA CAM++ encoder behind the multimodal processor's ONNX Runtime session.

CosyVoice3's processor (vllm-omni 0.30.0 `models/cosyvoice3/cosyvoice3.py`) runs in the API server
process and builds its CAM++ session once per model folder (`_build_runtime_components`, cached
process-wide); each request with a new reference voice then runs `extract_spk_embedding(audio,
session)` on the CPU with one thread. `patch` wraps `_build_runtime_components`: where the rules
give cuda-torch (opt-in: env OMNI_DEPLOY_SPK_PROCESSOR=cuda-torch, since the API server owns no GPU),
the session in the components becomes a guarded facade over omni-deploy's encoder; vllm-omni's own
front end (Kaldi fbank, mean subtraction) and output handling stay. A TensorRT engine vllm-omni
built (COSYVOICE3_TRT with tensorrt installed) is left alone: then there is no session to replace.
"""

from __future__ import annotations

import os
from types import ModuleType
from typing import Any

from omni_deploy.integrations.speaker_rules import COSYVOICE3, PROCESSOR
from omni_deploy.integrations.takeover import take_session, wrap_once


def patch(module: ModuleType) -> None:
    def make(original: Any) -> Any:
        def build_runtime_components(self: Any, model_dir: str, config: Any) -> dict[str, Any]:
            components = original(self, model_dir, config)
            session = components.get("campplus_session") if isinstance(components, dict) else None
            if session is not None and components.get("campplus_trt") is None:
                onnx_path = _onnx_path(model_dir, config, session)
                components["campplus_session"] = take_session(COSYVOICE3, session, onnx_path, {}, PROCESSOR)
            return components

        return build_runtime_components

    wrap_once(module.CosyVoice3MultiModalProcessor, "_build_runtime_components", make)


def _onnx_path(model_dir: str, config: Any, session: Any) -> str:
    """campplus.onnx as vllm-omni loaded it (model_dir may be a hub id it resolved to a snapshot)."""
    loaded = getattr(session, "_model_path", None)  # ONNX Runtime keeps the path it loaded
    if isinstance(loaded, str) and os.path.isfile(loaded):
        return loaded
    return os.path.join(
        model_dir, getattr(config, "campplus_onxx_path", "campplus.onnx")
    )  # vllm-omni's spelling
