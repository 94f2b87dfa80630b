"""The speaker decision reads the deploy file once (`from_deployment.speaker_inputs`), then decides
from what it read: the same inputs give the same decision with no Deployment at hand."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

from omni_deploy.config.stage_process import StageEnv
from omni_deploy.deployment.model import Deployment
from omni_deploy.integrations.speaker_rules import CPU_ORT, CUDA_TORCH, MODELS
from omni_deploy.speaker_backend import speaker_decision
from omni_deploy.speaker_backend.decision import code2wav_decision
from omni_deploy.speaker_backend.from_deployment import SpeakerInputs, speaker_inputs
from omni_deploy.speaker_backend.host import assumed_host
from omni_deploy.speaker_backend.other_models import model_decision

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "explain"
PACKAGE = ROOT / "omni_deploy" / "speaker_backend"
DEFAULT = ROOT / "deploy" / "minicpmo_4_5_turn.yaml"


def _inputs(path: Path, platform: str = "cuda") -> SpeakerInputs:
    return speaker_inputs(Deployment.load(str(path)), platform)


def test_minicpmo_reads_the_code2wav_extra_and_its_stage() -> None:
    inputs = _inputs(DEFAULT)
    assert inputs.model is None and inputs.platform == "cuda"
    assert inputs.extra is not None and inputs.extra_path.startswith("$.")
    assert inputs.in_file == {} and inputs.ray is None


def test_the_platform_views_stage_env_is_read_for_its_platform_only() -> None:
    on_cuda = _inputs(DATA / "platform_stage_env_trt.yaml")
    assert on_cuda.in_file["MINICPMO_TOKEN2WAV_TRT"].value == "1"
    assert "platform:cuda" in on_cuda.in_file["MINICPMO_TOKEN2WAV_TRT"].origin
    assert _inputs(DATA / "platform_stage_env_trt.yaml", "rocm").in_file == {}


def test_ray_placement_and_the_stages_own_env_are_read() -> None:
    inputs = _inputs(DATA / "ray_stage_env.yaml")
    assert inputs.ray is not None and "ray_stage_env.yaml" in inputs.ray
    assert inputs.in_file["OMNI_DEPLOY_SPK_BACKEND"].value == "cpu-onnxruntime"


def test_another_model_reads_its_connector_extra() -> None:
    inputs = _inputs(DATA / "models" / "ming_tts.yaml")
    assert inputs.model is MODELS["ming_tts"]
    assert inputs.extra_path.startswith("$.connectors.") and inputs.extra_path.endswith(".extra")


def test_the_same_inputs_decide_the_same_without_the_deployment() -> None:
    host = assumed_host("0.30.0")
    deployment = Deployment.load(str(DEFAULT))
    inputs = speaker_inputs(deployment, "cuda")
    through_the_package = speaker_decision(deployment, "cuda", env={}, host=host)
    assert code2wav_decision(inputs, env={}, host=host) == through_the_package
    assert through_the_package.speaker_backend == CUDA_TORCH
    # What the file says, changed by hand: the decision follows the inputs alone.
    asked = {"OMNI_DEPLOY_SPK_BACKEND": StageEnv("cpu-onnxruntime", "by hand")}
    by_hand = code2wav_decision(dataclasses.replace(inputs, in_file=asked), env={}, host=host)
    assert by_hand.speaker_backend == CPU_ORT
    assert any(r.origin == "by hand" for r in by_hand.reasons)
    off_cuda = dataclasses.replace(inputs, platform="rocm")
    assert code2wav_decision(off_cuda, env={}, host=host).speaker_backend == CPU_ORT


def test_the_decision_modules_never_touch_a_deployment() -> None:
    for name in ("decision.py", "other_models.py"):
        tree = ast.parse((PACKAGE / name).read_text(encoding="utf-8"))
        names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
        names |= {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
        imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        imported |= {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
        assert not any(m.startswith("omni_deploy.deployment") for m in imported), name
        assert not {"Deployment", "speaker_inputs", "on", "stages"} & (names | imported), name


@pytest.mark.parametrize("path", [DATA / "unknown_pipeline.yaml", DATA / "other_pipeline.yaml"])
def test_a_pipeline_without_an_embedding_stage_never_builds_a_platform_view(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Its decision is unknown or not-applicable whatever the view: a view that cannot even be built
    # (an error validate reports) must not stop explain from saying so.
    def refuse(self: Deployment, platform: str) -> None:
        raise AssertionError(f"platform view of {platform} built")

    deployment = Deployment.load(str(path))
    monkeypatch.setattr(Deployment, "on", refuse)
    inputs = speaker_inputs(deployment, "cuda")
    assert inputs.in_file == {} and inputs.ray is None


def test_where_the_platform_cannot_apply_the_others_read_the_merged_stages(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from omni_deploy.common.errors import ConfigError

    def refuse(self: Deployment, platform: str) -> None:
        raise ConfigError("this platform section cannot apply", code="E120")

    deployment = Deployment.load(str(DATA / "models" / "ming_tts_ray.yaml"))
    applied = speaker_inputs(deployment, "cuda")
    monkeypatch.setattr(Deployment, "on", refuse)
    merged = speaker_inputs(deployment, "cuda")
    assert applied.ray is not None and merged.ray is None  # Ray placement only from a view
    # The stage's env from the merged file's stages, which keep `runtime.env` as written (only a
    # view normalises it into `env`): the view's reading has it, the merged file's does not.
    assert "OMNI_DEPLOY_SPK_BACKEND" in applied.in_file and merged.in_file == {}
    minicpmo = speaker_inputs(Deployment.load(str(DATA / "stage_env_cpu.yaml")), "cuda")
    assert minicpmo.in_file == {} and minicpmo.ray is None  # MiniCPM-o: nothing without a view


def test_the_processor_models_list_what_each_stages_env_sets() -> None:
    inputs = _inputs(DATA / "models" / "cosyvoice3.yaml")
    assert inputs.model is MODELS["cosyvoice3"] and inputs.in_file == {} and inputs.ray is None
    assert [number for number, _ in inputs.processor_env] == [0, 1]
    decided = model_decision(inputs, env={}, host=assumed_host("0.30.0"))
    assert decided == speaker_decision(Deployment.load(str(DATA / "models" / "cosyvoice3.yaml")), "cuda",
                                       env={}, host=assumed_host("0.30.0"))  # fmt: skip
