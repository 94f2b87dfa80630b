"""Which pipeline a deploy file configures, and what omni-deploy knows about it.

About half of vllm-omni's bundled files carry no `pipeline:` key (the server picks the pipeline
from the model's config). We take the merged `pipeline:` when present, else infer it from the
bundled file the chain starts from, else the user's `--pipeline`; otherwise it stays unknown.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from omni_deploy.config.nodes import Map, Scalar


@dataclass(frozen=True)
class Pipeline:
    name: str
    stages: dict[int, str] = field(default_factory=dict)  # stage_id -> role
    code2wav_stage: int | None = None
    talker_stage: int | None = None


MINICPMO_4_5 = Pipeline(
    "minicpmo_4_5", {0: "Thinker", 1: "Talker", 2: "Code2Wav"}, code2wav_stage=2, talker_stage=1
)
KNOWN = {MINICPMO_4_5.name: MINICPMO_4_5}


@dataclass(frozen=True)
class PipelineInfo:
    name: str | None
    known: Pipeline | None
    source: str  # how we know: "pipeline: at FILE:LINE", "inferred from ...", "--pipeline", "unknown"

    @property
    def is_minicpmo(self) -> bool:
        return self.known is MINICPMO_4_5


def identify(config: Map, chain: list[Path], override: str | None = None) -> PipelineInfo:
    if override:
        return PipelineInfo(override, KNOWN.get(override), "--pipeline")
    node = config.get("pipeline")
    if isinstance(node, Scalar) and isinstance(node.value, str) and node.value:
        return PipelineInfo(node.value, KNOWN.get(node.value), f"pipeline: at {node.origin.location}")
    for path in reversed(chain):
        for name, pipeline in KNOWN.items():
            if path.name.startswith(name):
                return PipelineInfo(name, pipeline, f"inferred from the file name {path.name}")
    return PipelineInfo(None, None, "unknown: no pipeline: key, and no known file name in the chain")
