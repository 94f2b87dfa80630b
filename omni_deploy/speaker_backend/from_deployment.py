"""What a deploy file gives one platform's speaker decision, read from the Deployment in one pass.

The decision itself (`decision`, `other_models`) reads nothing of the Deployment: it gets these
inputs, the starting process's environment, the host snapshot and --spk-backend, and is pure.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from omni_deploy.config.nodes import Map, Scalar
from omni_deploy.config.stage_process import StageEnv, ray_stages, stage_env
from omni_deploy.integrations.speaker_rules import (
    DECISION_ENV,
    ENV_BACKEND,
    ENV_PROCESSOR,
    ENV_TF32,
    MINICPMO,
    MODELS,
    PROCESSOR,
    Model,
)
from omni_deploy.knowledge.pipelines import PipelineInfo

if TYPE_CHECKING:
    from omni_deploy.deployment.model import Deployment

# The variables a stage's environment may set that decide: for the other models' processor (which
# no stage env reaches: a warning each) and for Ming-TTS's embedding stage.
PROCESSOR_ENV = (ENV_PROCESSOR, ENV_TF32)
STAGE_ENV = (ENV_BACKEND, ENV_TF32)


@dataclass(frozen=True, kw_only=True)
class SpeakerInputs:
    """The deploy file's part of one platform's speaker decision.

    For MiniCPM-o 4.5 (`model` None) the switches are the Code2Wav extra's keys and `in_file` what
    the Code2Wav stage's env sets; for another model of `speaker_rules.MODELS` they are the extra
    of its stage's connector and that stage's env. `ray` is where the file puts that stage's model
    in Ray workers (None: it does not); `processor_env` lists, per stage, what each stage's env sets
    of the variables only the API server's environment can decide (CosyVoice3, GLM-TTS).
    """

    platform: str
    pipeline: PipelineInfo
    model: Model | None
    extra: Map | None
    extra_path: str
    in_file: dict[str, StageEnv] = field(default_factory=dict)
    ray: str | None = None
    processor_env: list[tuple[object, dict[str, StageEnv]]] = field(default_factory=list)


def speaker_inputs(deployment: Deployment, platform: str) -> SpeakerInputs:
    """Read `deployment`'s part of the decision on `platform`: the switches from the merged file,
    the stage's env and Ray placement from its platform view where the file applies there
    (validate reports why where it does not: then none for MiniCPM-o, and the merged file's stages
    for the others). A pipeline with no embedding stage (unknown, or one that keeps its own speaker
    path) never has its platform view built."""
    pipeline = deployment.pipeline
    model = MODELS.get(pipeline.name or "")
    model = None if model is MINICPMO else model
    if model is None:
        stage = pipeline.known.code2wav_stage if pipeline.known is not None else None
        names: tuple[str, ...] = DECISION_ENV
        extra, path = deployment.code2wav_extra(), deployment.code2wav_extra_path
    else:
        stage, names = model.stage, STAGE_ENV
        extra, path = deployment.connector_extra(model.stage, model.connector)
    view = deployment.on_or_none(platform) if model is not None or stage is not None else None
    stages = view.stages if view is not None else ([] if model is None else deployment.stages())
    # CosyVoice3's and GLM-TTS's processor runs in the API server: no stage's env or Ray placement
    # is its own; what each stage's env sets is listed, to be warned about.
    processor = model is not None and model.where == PROCESSOR
    per_stage = (
        [(_stage_number(s), stage_env([s], _stage_number(s), PROCESSOR_ENV)) for s in stages]
        if processor
        else []
    )
    return SpeakerInputs(
        platform=platform,
        pipeline=pipeline,
        model=model,
        extra=extra,
        extra_path=path,
        in_file={} if processor else stage_env(stages, stage, names),
        ray=ray_stages(view).get(stage) if stage is not None and not processor else None,
        processor_env=per_stage,
    )


def _stage_number(stage: Map) -> object:
    sid = stage.get("stage_id")
    return sid.value if isinstance(sid, Scalar) else None
