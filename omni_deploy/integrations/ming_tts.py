"""Ming-TTS: the CUDA CAM++ encoder behind the speaker extractor's ONNX Runtime session.

Ming-TTS (vllm-omni 0.30.0) embeds each new reference voice in its stage-0 process, which owns a
GPU: `ming_tts/speaker_extractor.py` builds one `SpeakerEmbeddingExtractor` per model
(`_load_speaker_extractor`), whose `SpkembExtractor` runs campplus.onnx through ONNX Runtime on the
CPU (two threads), one waveform at a time. `patch` wraps `_load_speaker_extractor`: where the rules
give cuda-torch (on by default; `ming_device_spk: false` in that stage's connector extra turns it
off), the extractor's session becomes a guarded facade over omni-deploy's encoder on the stage's
device; vllm-omni's resampling and Kaldi fbank stay.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from omni_deploy.integrations.minicpmo import connector_extra, stage_id
from omni_deploy.integrations.speaker_rules import MING_TTS
from omni_deploy.integrations.takeover import take_session, wrap_once


def patch(module: ModuleType) -> None:
    def make(original: Any) -> Any:
        def load_speaker_extractor(wrapper: Any) -> Any:
            extractor = original(wrapper)
            core = getattr(extractor, "_core", None)
            session = getattr(core, "campplus_session", None)
            if core is not None and session is not None:
                path = getattr(session, "_model_path", None) or "campplus.onnx"
                extra = connector_extra(getattr(wrapper, "vllm_config", None))
                core.campplus_session = take_session(
                    MING_TTS, session, str(path), extra, stage_id(wrapper), device=_device(wrapper)
                )
            return extractor

        return load_speaker_extractor

    wrap_once(module, "_load_speaker_extractor", make)


def _device(wrapper: Any) -> Any:
    """The stage's device: where the model's weights are, else vLLM's device config."""
    parameters = getattr(wrapper, "parameters", None)
    if callable(parameters):
        try:
            return next(iter(parameters())).device
        except (StopIteration, TypeError):
            pass
    return getattr(getattr(getattr(wrapper, "vllm_config", None), "device_config", None), "device", "cpu")
