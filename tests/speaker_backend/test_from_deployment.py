"""The speaker decision reads the deploy file once (`from_deployment.speaker_inputs`), then decides
from what it read: the same inputs give the same decision with no Deployment at hand."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

from omni_deploy.config.stage_process import StageEnv
from omni_deploy.deployment.model import Deployment
from omni_deploy.integrations.speaker_rules import CPU_ORT, CUDA_TORCH, MODELS
from omni_deploy.speaker_backend import speaker_decision
from omni_deploy.speaker_backend.decision import code2wav_decision
from omni_deploy.speaker_backend.from_deployment import SpeakerInputs, speaker_inputs
from omni_deploy.speaker_backend.host import assumed_host

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
        imported = {
            n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module is not None
        }
        assert "Deployment" not in names and "omni_deploy.deployment.model" not in imported, name
