"""The speaker-embedding backend decision: the deploy file's part read once, then a pure decision per platform, with the host snapshot it takes and what the server reported.

The package's one entry point: callers import what they use from here, not from its modules.
`speaker_decision` reads the deploy file's part (`from_deployment.speaker_inputs`) and picks the decision
by pipeline: MiniCPM-o 4.5's Code2Wav (`decision`), or the component that embeds for CosyVoice3,
GLM-TTS and Ming-TTS (`other_models`); neither reads the Deployment.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from omni_deploy.integrations.speaker_rules import CPU_ORT, CUDA_TORCH, TENSORRT, Backend
from omni_deploy.speaker_backend.decision import code2wav_decision
from omni_deploy.speaker_backend.from_deployment import SpeakerInputs, speaker_inputs
from omni_deploy.speaker_backend.host import (
    VENDOR_TOOLS,
    HostCaps,
    assumed_host,
    detect_platform,
    last_server_reports,
    probe_host,
)
from omni_deploy.speaker_backend.other_models import model_decision
from omni_deploy.speaker_backend.reach import at_release
from omni_deploy.speaker_backend.refprep import Preparation, reference_preparation, with_prefetch
from omni_deploy.speaker_backend.release_own import (
    NPU_TORCH,
    OwnBehaviour,
    code2wav_own,
    on_release_device,
    with_release_tf32,
)
from omni_deploy.speaker_backend.server_report import read_report, summary_lines
from omni_deploy.speaker_backend.types import NOT_APPLICABLE, UNKNOWN, Fallback, Reason, SpeakerDecision

if TYPE_CHECKING:
    from omni_deploy.deployment.model import Deployment

__all__ = [
    "CPU_ORT",
    "CUDA_TORCH",
    "NOT_APPLICABLE",
    "NPU_TORCH",
    "TENSORRT",
    "UNKNOWN",
    "VENDOR_TOOLS",
    "Fallback",
    "HostCaps",
    "OwnBehaviour",
    "Preparation",
    "Reason",
    "SpeakerDecision",
    "SpeakerInputs",
    "assumed_host",
    "at_release",
    "code2wav_own",
    "detect_platform",
    "last_server_reports",
    "on_release_device",
    "probe_host",
    "read_report",
    "reference_preparation",
    "speaker_decision",
    "speaker_inputs",
    "summary_lines",
    "with_prefetch",
    "with_release_tf32",
]


def speaker_decision(
    deployment: Deployment,
    platform: str,
    *,
    env: dict[str, str],
    host: HostCaps,
    override: Backend | None = None,
) -> SpeakerDecision:
    """The effective speaker backend on `platform`, and why: of MiniCPM-o 4.5's Code2Wav stage, or,
    for CosyVoice3, GLM-TTS and Ming-TTS, of the component that embeds.

    `env` is the environment of the process that starts the server (the pod's for k8s), `host` what
    the serving host provides, `override` serve's --spk-backend.
    """
    inputs = speaker_inputs(deployment, platform)
    if inputs.model is None:
        return code2wav_decision(inputs, env=env, host=host, override=override)
    return model_decision(inputs, env=env, host=host, override=override)
