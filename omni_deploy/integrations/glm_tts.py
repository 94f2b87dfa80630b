"""GLM-TTS: the CUDA CAM++ encoder behind the voice-clone processor's ONNX Runtime session.

GLM-TTS's processor (vllm-omni 0.30.0 `models/glm_tts/glm_tts.py`) runs in the API server process;
`load_voice_clone_frontend` (`voice_clone.py`) loads its CAM++ session (CPU, or CUDA with
onnxruntime-gpu), and each new reference voice runs `extract_spk_embedding(wav, sr, session)`.
`patch` wraps the processor module's `load_voice_clone_frontend`: where the rules give cuda-torch
(opt-in: env OMNI_DEPLOY_SPK_PROCESSOR=cuda-torch) and the session runs on the CPU, the session it
returns becomes a guarded facade over omni-deploy's encoder. The processor keeps it and hands it
back as its cache, so it is decided once.
"""

from __future__ import annotations

import os
from types import ModuleType
from typing import Any

from omni_deploy.integrations.speaker_rules import GLM_TTS, PROCESSOR
from omni_deploy.integrations.takeover import take_session, wrap_once


def patch(module: ModuleType) -> None:
    def make(original: Any) -> Any:
        def load_voice_clone_frontend(model_root: str, model_device: Any, *args: Any, **kwargs: Any) -> Any:
            speech_tokenizer, session = original(model_root, model_device, *args, **kwargs)
            path = (
                getattr(session, "_model_path", None)
                or kwargs.get("campplus_path")
                or os.path.join(model_root, "frontend", "campplus.onnx")
            )
            return speech_tokenizer, take_session(GLM_TTS, session, str(path), {}, PROCESSOR)

        return load_voice_clone_frontend

    wrap_once(module, "load_voice_clone_frontend", make)
