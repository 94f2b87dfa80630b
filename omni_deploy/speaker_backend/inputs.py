"""What a deploy file gives one platform's speaker decision, read from the Deployment in one pass.

The decision itself (`decision`, `other_models`) reads nothing of the Deployment: it gets these
inputs, the starting process's environment, the host snapshot and --spk-backend, and is pure.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from omni_deploy.common.errors import OmniDeployError
from omni_deploy.config.nodes import Map, Scalar
from omni_deploy.deployment.model import stage_value
from omni_deploy.integrations.speaker_rules import (
    ENV_BACKEND,
    ENV_PROCESSOR,
    ENV_TF32,
    MINICPMO,
    MODELS,
    PROCESSOR,
    Model,
)
from omni_deploy.knowledge.pipelines import PipelineInfo
from omni_deploy.speaker_backend.stage_env import stage_env
from omni_deploy.speaker_backend.types import StageEnv

if TYPE_CHECKING:
    from omni_deploy.config.platform import PlatformApplied
    from omni_deploy.deployment.model import Deployment

# The variables a stage's environment may set that decide: for the other models' processor (which
# no stage env reaches: a warning each) and for Ming-TTS's embedding stage.
PROCESSOR_ENV = (ENV_PROCESSOR, ENV_TF32)
STAGE_ENV = (ENV_BACKEND, ENV_TF32)


@dataclass(frozen=True)
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
    """Read `deployment`'s part of the decision on `platform`: its platform view where the file
    applies there (validate reports why where it does not: then no stage env or Ray placement for
    MiniCPM-o, and the merged file's stages for the others)."""
    model = MODELS.get(deployment.pipeline.name or "")
    try:
        view: PlatformApplied | None = deployment.on(platform)
    except OmniDeployError:
        view = None
    if model is None or model is MINICPMO:
        known = deployment.pipeline.known
        stage = known.code2wav_stage if known is not None else None
        stages = view.stages if view is not None else []
        extra, path = deployment.code2wav_extra(), deployment.code2wav_extra_path
        return SpeakerInputs(
            platform,
            deployment.pipeline,
            None,
            extra,
            path,
            stage_env(stages, stage),
            ray_stages_of(view).get(stage) if stage is not None else None,
        )
    stages = view.stages if view is not None else deployment.stages()
    extra, path = _connector_extra(deployment, model)
    if model.where == PROCESSOR:
        per_stage = [(_stage_number(s), stage_env([s], _stage_number(s), PROCESSOR_ENV)) for s in stages]
        return SpeakerInputs(platform, deployment.pipeline, model, extra, path, processor_env=per_stage)
    return SpeakerInputs(
        platform,
        deployment.pipeline,
        model,
        extra,
        path,
        stage_env(stages, model.stage, STAGE_ENV),
        ray_stages_of(view).get(model.stage) if model.stage is not None else None,
    )


def _stage_number(stage: Map) -> object:
    sid = stage.get("stage_id")
    return sid.value if isinstance(sid, Scalar) else None


def ray_stages_of(view: PlatformApplied | None) -> dict[int, str]:
    """Stages whose model runs in Ray workers (`distributed_executor_backend: ray`, on the stage or
    pipeline-wide) in a platform view, with where that was set."""
    if view is None:
        return {}
    top = view.config.get("distributed_executor_backend")
    found = {}
    for stage in view.stages:
        sid = stage.get("stage_id")
        node = stage_value(stage, "distributed_executor_backend") or top
        if (
            isinstance(sid, Scalar)
            and isinstance(sid.value, int)
            and isinstance(node, Scalar)
            and node.value == "ray"
        ):
            found[sid.value] = str(node.origin)
    return found


def ray_stages(deployment: Deployment, platform: str) -> dict[int, str]:
    """`ray_stages_of` `deployment`'s view on `platform`; empty where the file cannot apply there."""
    try:
        return ray_stages_of(deployment.on(platform))
    except OmniDeployError:
        return {}


def _connector_extra(deployment: Deployment, model: Model) -> tuple[Map | None, str]:
    """The extra of the connector `model`'s stage uses on its edge (output or input), and its path."""
    stage = deployment.stage(model.stage) if model.stage is not None else None
    side = "output_connectors" if model.connector == "output" else "input_connectors"
    wiring = stage.get(side) if stage is not None else None
    connectors = deployment.connectors()
    if isinstance(wiring, Map) and connectors is not None:
        for _, entry in wiring.entries.items():
            if isinstance(entry.node, Scalar) and isinstance(connectors.get(entry.node.value), Map):
                name = str(entry.node.value)
                connector = connectors.get(name)
                extra = connector.get("extra") if isinstance(connector, Map) else None
                return (extra if isinstance(extra, Map) else None), f"$.connectors.{name}.extra"
    return None, f"$.connectors.<stage {model.stage} {model.connector}>.extra"
