"""The speaker decision as the target release can carry it out: what its code has, not 0.30.0's story.

The launch spec decides the backend from the file, the platform and the host as vllm-omni 0.30.0
and omni-deploy's plugin would. An older release may lack what that decision relies on; each
release's code says so (knowledge/facts.py, upstream_facts.json):

- no MiniCPM-o Code2Wav stage (0.22.0, 0.24.0: the vocoder runs inside the Talker; 0.20.0 has no
  MiniCPM-o at all): the plugin has nothing to hook, no Code2Wav key is read;
- a token2wav core without `_forward_spk_embedding` (0.26.0): the plugin cannot replace CAM++, which
  stays vllm-omni's own ONNX Runtime session on the CPU;
- no `token2wav_trt` / `MINICPMO_TOKEN2WAV_TRT` reader (before 0.28.0): the TensorRT switch does nothing.

Pure: takes the decision and the target's reads, returns the decision that is true for the target.
"""

from __future__ import annotations

from dataclasses import replace

from omni_deploy.integrations.speaker_rules import CPU_ORT, CUDA_TORCH, TENSORRT
from omni_deploy.knowledge.target import TargetReads
from omni_deploy.speaker_backend.types import Reason, SpeakerDecision

RELEASE_OWN = "vllm-omni's own"


def at_release(decision: SpeakerDecision, reads: TargetReads) -> SpeakerDecision:
    """`decision`, corrected for what `reads`' release can do."""
    version = reads.version
    if not reads.facts:
        return decision  # no code of the target to tell: the decision stands (I314 says so in validate)
    if not reads.fact("code2wav_module"):
        since = "0.26.0"
        return replace(
            decision,
            speaker_backend=RELEASE_OWN,
            provider=f"vllm-omni {version} (no MiniCPM-o Code2Wav stage before {since})",
            weights_dtype=None, inputs_dtype=None, matmul_tf32=None, cudnn_tf32=None,
            reasons=[Reason("Code2Wav stage (MiniCPMO45Code2Wav)", None, f"absent from vllm-omni {version}'s code")],
            fallbacks=[],
            warnings=[f"vllm-omni {version} has no Code2Wav stage: omni-deploy's plugin has nothing to hook and no "
                      "Code2Wav option (token2wav_device_spk, token2wav_trt, ...) is read; CAM++ runs as that "
                      "release's own code runs it"],
        )  # fmt: skip
    fallbacks = list(decision.fallbacks)
    warnings = list(decision.warnings)
    if not reads.fact("token2wav_trt"):
        fallbacks = [f for f in fallbacks if f.backend != TENSORRT]
        warnings.append(
            f"vllm-omni {version} reads neither token2wav_trt nor MINICPMO_TOKEN2WAV_TRT (read from 0.28.0 on): "
            "no TensorRT switch"
        )
    if not reads.fact("spk_embedding_hook") and decision.speaker_backend in (CUDA_TORCH, TENSORRT):
        hook = "its token2wav core has no _forward_spk_embedding (step_audio2_token2wav.py)"
        return replace(
            decision,
            speaker_backend=CPU_ORT,
            provider=f"vllm-omni {version} (ONNX Runtime on the CPU; the plugin cannot hook it)",
            weights_dtype="fp32", inputs_dtype="fp32", matmul_tf32=None, cudnn_tf32=None,
            reasons=[*(r for r in decision.reasons if r.setting == "platform"),
                     Reason("plugin hook", False, f"vllm-omni {version}: {hook}")],
            fallbacks=[],  # the CPU session is the only backend this release has
            warnings=[*warnings, f"omni-deploy's plugin cannot put CAM++ on the GPU with vllm-omni {version}: {hook}; "
                      "CAM++ stays vllm-omni's own campplus.onnx session on the CPU"],
        )  # fmt: skip
    return replace(decision, fallbacks=fallbacks, warnings=warnings)
