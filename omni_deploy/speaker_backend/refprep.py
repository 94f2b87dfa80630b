"""How MiniCPM-o 4.5's Code2Wav prepares new reference voices, and why: in one batched pass on the
stage's GPU (omni-deploy's plugin, `token2wav_device_prepare`) or one by one (vllm-omni's own
`_prepare_prompt`).

The rule is `omni_deploy.integrations.speaker_rules.choose_prepare`, the function the plugin applies in the
stage; this module feeds it the deploy file's setting and the speaker decision as carried out
(speaker_backend/decision.py, then speaker_backend/reach.py for the target release): the batched pass embeds through
the plugin's CUDA CAM++ encoder, so it runs only where the plugin provides that path.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Any

from omni_deploy.config.nodes import Scalar, child_path, to_plain
from omni_deploy.integrations.speaker_rules import CUDA_TORCH, KEY_DEVICE_PREPARE, choose_prepare
from omni_deploy.knowledge.keys import by_place

if TYPE_CHECKING:
    from omni_deploy.deployment.model import Deployment
    from omni_deploy.speaker_backend.types import SpeakerDecision

BATCHED, PER_VOICE = "batched", "per-voice"


@dataclass(frozen=True)
class Preparation:
    mode: str  # BATCHED or PER_VOICE
    decided_by: str  # "token2wav_device_prepare (default)", "speaker backend cpu-onnxruntime", ...
    setting: str  # the key's path in the file
    value: Any
    origin: str  # file:line:col (layer), or "default"
    warnings: tuple[str, ...] = ()
    tokens: str = ""  # what the precision policy (token2wav_allow_tf32) means for the S3 tokens
    prefetch: str = ""  # how the release's prefetch at request arrival (0.32) is prepared, where it runs

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["warnings"] = list(self.warnings)
        return out

    def line(self) -> str:
        what = (
            "batched on the stage's GPU (omni-deploy's plugin)"
            if self.mode == BATCHED
            else "per voice (vllm-omni's own)"
        )
        line = f"reference preparation: {what}; {self.decided_by}"
        line = f"{line}; {self.tokens}" if self.tokens else line
        return f"{line}; {self.prefetch}" if self.prefetch else line


def with_prefetch(preparation: Preparation | None, prefetch_on: bool) -> Preparation | None:
    """`preparation` saying where the release's own prefetch at request arrival goes (it is on):
    through the plugin's batched pass when that pass runs (integrations/refprep.plug_prefetch),
    else vllm-omni's per-voice path."""
    if preparation is None or not prefetch_on:
        return preparation
    note = (
        "references prefetched at request arrival go through the same pass (several waiting: one pass)"
        if preparation.mode == BATCHED
        else "references prefetched at request arrival are prepared by vllm-omni one by one"
    )
    return replace(preparation, prefetch=note)


def reference_preparation(deployment: Deployment, decision: SpeakerDecision) -> Preparation | None:
    """How the Code2Wav stage prepares new voices under `decision`; None where the pipeline has no
    MiniCPM-o Code2Wav (or is unknown)."""
    if not deployment.pipeline.is_minicpmo:
        return None
    extra = deployment.code2wav_extra()
    path = child_path(deployment.code2wav_extra_path, KEY_DEVICE_PREPARE)
    node = extra.get(KEY_DEVICE_PREPARE) if extra is not None else None
    if isinstance(node, Scalar):
        value, origin, plain = to_plain(node), str(node.origin), {KEY_DEVICE_PREPARE: to_plain(node)}
    else:
        value, origin, plain = by_place("code2wav")[KEY_DEVICE_PREPARE].default, "default", {}
    backend, backend_by = decision.speaker_backend, _backend_by(decision)
    if backend == CUDA_TORCH and _provider(decision) != "omni-deploy plugin":
        # vllm-omni provides the CUDA path itself: the plugin stands aside, and its pass with it.
        backend, backend_by = f"{CUDA_TORCH} by vllm-omni", "the plugin stands aside"
    choice = choose_prepare(plain, backend, backend_by)
    tokens = tokens_under(decision.matmul_tf32) if choice.batched else ""
    return Preparation(
        BATCHED if choice.batched else PER_VOICE,
        choice.decided_by,
        path,
        value,
        origin,
        choice.problems,
        tokens,
    )


def tokens_under(matmul_tf32: bool | None) -> str:
    """What the stage's matmul policy means for the batched pass's S3 tokens (the pass runs under
    token2wav_allow_tf32 and equals vllm-omni's per-voice tokens computed under the same policy)."""
    if matmul_tf32 is None:
        return ""
    if matmul_tf32:
        return (
            "S3 tokens as vllm-omni's per-voice path gives them with TF32 matmuls (token2wav_allow_tf32 true; "
            "a few in a thousand differ from strict FP32's)"
        )
    return "S3 tokens as vllm-omni's per-voice path gives them in strict FP32 (token2wav_allow_tf32 false)"


def _provider(decision: SpeakerDecision) -> Any:
    return next((r.value for r in decision.reasons if r.setting == "provider"), None)


def _backend_by(decision: SpeakerDecision) -> str:
    settings = [
        r.setting.rsplit(".", 1)[-1] for r in decision.reasons if r.setting not in ("platform", "provider")
    ]
    return ", ".join(settings) or decision.provider
