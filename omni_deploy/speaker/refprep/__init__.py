"""Reference preparation for MiniCPM-o 4.5 Code2Wav, batched across the voices of one call.

What vllm-omni 0.30.0's `StepAudio2Token2WavCore._prepare_prompt` does for one new reference voice
(resample to 16 and 24 kHz, the S3 tokenizer's log-mel and `quantize`, Kaldi fbank and CAM++, the
flow's 24 kHz mel), done here for many voices in one pass on the stage's device. Stands alone like
the rest of `omni_deploy.speaker`: torch, torchaudio, numpy and the s3tokenizer package, nothing
from the config side. Heavy imports happen in the modules below, not at package import.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from omni_deploy.speaker.refprep.prepare import PreparedVoice, ReferencePreparer, Voice

__all__ = ["PreparedVoice", "ReferencePreparer", "Voice"]


def __getattr__(name: str) -> object:
    if name in __all__:
        from omni_deploy.speaker.refprep import prepare

        return getattr(prepare, name)
    raise AttributeError(name)
