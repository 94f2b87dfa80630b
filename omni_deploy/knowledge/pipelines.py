"""Which pipeline a deploy file configures, and what omni-deploy knows about it.

About half of vllm-omni's bundled files carry no `pipeline:` key (the server picks the pipeline
from the model's config). We take the merged `pipeline:` when present, else infer it from the
bundled file the chain starts from, else the user's `--pipeline`; otherwise it stays unknown.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from omni_deploy.config.nodes import Map, Scalar
from omni_deploy.integrations.speaker_rules import MODELS


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
# Pipelines told from a bundled file's name without a topology of their own here: those whose
# speaker embedding omni-deploy's plugin moves to CUDA (explain --backend names their path).
INFERRED = frozenset(MODELS)

# The keys of vllm-omni 0.30.0's pipeline registry (OMNI_PIPELINES in
# vllm_omni/config/pipeline_registry.py): the names `pipeline:` and --pipeline can take. A test of
# the upstream tier compares this set with the wheel.
REGISTERED = frozenset(
    {
    "arktts", "audex_s2s", "audex_thinker_only", "audex_tta", "audex_tts", "auk", "aura_omni", "bagel",
    "bagel_single_stage", "bagel_think", "breeze", "cosmos3_omni_deploy", "cosmos3_policy", "cosyvoice3",
    "covo_audio", "dreamzero", "fish_qwen3_omni", "gepard", "glm_image", "glm_tts", "Gr00tN1d7",
    "higgs_audio_v2", "higgs_multimodal_qwen3", "hunyuan_image3_ar", "hunyuan_image3_dit",
    "hunyuan_image_3_moe", "hunyuan_video_15", "indextts2", "indextts2_5", "joyai_vl_interaction", "lance",
    "lingbot_world", "mammoth_moda2", "mammoth_moda2_ar", "mimo_audio", "ming_flash_omni",
    "ming_flash_omni_image", "ming_flash_omni_thinker_only", "ming_flash_omni_tts", "ming_image",
    "ming_tts", "ming_tts_moe", "minicpmo_4_5", "minimax_h3_disaggregated", "minimax_music3",
    "moss_tts_delay", "moss_tts_local", "moss_tts_nano", "moss_tts_realtime", "nemotron_labs_audex",
    "nemotron_labs_voicechat", "nemotron_voicechat", "omnivoice", "personaplex", "pi0", "pi05",
    "qwen2_5_omni", "qwen2_5_omni_thinker_only", "qwen3_omni_moe", "qwen3_omni_moe_thinker_only",
    "qwen3_tts", "step_audio_2", "step_audio_2_asr", "voxcpm2", "voxtral_tts", "wan2_2_ti2v",
    }
)  # fmt: skip


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
    # The longest name a file of the chain starts with: "ming_tts_moe.yaml" is ming_tts_moe, not ming_tts.
    names = sorted({*KNOWN, *INFERRED}, key=len, reverse=True)
    for path in reversed(chain):
        for name in names:
            if path.name.startswith(name):
                return PipelineInfo(name, KNOWN.get(name), f"inferred from the file name {path.name}")
    return PipelineInfo(None, None, "unknown: no pipeline: key, and no known file name in the chain")


def _squash(name: str) -> str:
    return name.lower().replace("-", "").replace("_", "")


def default_deploys(version: str | None = None) -> dict[str, str]:
    """{default deploy file stem: pipeline} of a release's registry (its pipelines'
    default_deploy_config_name, knowledge/facts.py): the file the server loads for that pipeline."""
    from omni_deploy.knowledge.target import facts_data
    from omni_deploy.knowledge.versions import RELEASED

    entries = facts_data()["versions"].get(version or RELEASED) or facts_data()["versions"][RELEASED]
    out: dict[str, str] = {}
    for name, entry in sorted(entries.get("pipelines", {}).items()):
        deploy = entry.get("default_deploy")
        if isinstance(deploy, str) and deploy.endswith(".yaml"):
            out.setdefault(deploy[: -len(".yaml")], name)
    return out


def infer_registered(
    chain: list[Path], registered: frozenset[str] = REGISTERED, version: str | None = None
) -> str | None:
    """The registered pipeline a file name starts with (the longest; the top file first), else None.

    A stand-in for what the server learns from the model (its config's model_type, then the model
    path's name): without the model, the deploy file's name is the best hint there is. A pipeline's
    own default deploy file counts as its name (moss_tts.yaml, and moss_ttsd.yaml after it, is
    moss_tts_delay; audio8_tts.yaml is arktts).
    """
    defaults = {_squash(stem): name for stem, name in default_deploys(version).items() if name in registered}
    for path in chain:
        stem = _squash(path.stem)
        names = {_squash(name): name for name in registered}
        names.update({k: v for k, v in defaults.items() if k not in names})
        matches = [key for key in names if stem.startswith(key)]
        if matches:
            return names[max(matches, key=len)]
    return None
