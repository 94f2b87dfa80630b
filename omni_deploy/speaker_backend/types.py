"""The speaker-backend decision's vocabulary: what was decided, the reasons for it, the switches
to another backend."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from omni_deploy.integrations.speaker_rules import Backend

NOT_APPLICABLE, UNKNOWN = "not-applicable", "unknown"


@dataclass(frozen=True)
class Reason:
    setting: str
    value: Any
    origin: str  # file:line:col (layer), "env NAME", "default", "--spk-backend", "host"


@dataclass(frozen=True)
class Fallback:
    backend: Backend
    how: str


@dataclass
class SpeakerDecision:
    platform: str
    speaker_backend: str
    provider: str
    weights_dtype: str | None = None
    inputs_dtype: str | None = None
    matmul_tf32: bool | None = None
    cudnn_tf32: str | None = None
    reasons: list[Reason] = field(default_factory=list)
    fallbacks: list[Fallback] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out.pop("platform")
        return out
