"""The speaker decision for the other models the plugin moves to CUDA (CosyVoice3, GLM-TTS,
Ming-TTS), and for stages whose model runs in Ray workers."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from omni_deploy.deployment.model import Deployment
from omni_deploy.speaker_backend import CPU_ORT, CUDA_TORCH, TENSORRT, speaker_decision
from omni_deploy.speaker_backend.host import HostCaps, assumed_host

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "explain"
MODELS = DATA / "models"


def _decide(path: Path, env: dict[str, str] | None = None, host: HostCaps | None = None, platform: str = "cuda"):  # type: ignore[no-untyped-def]  # fmt: skip
    return speaker_decision(
        Deployment.load(str(path)), platform, env=env or {}, host=host or assumed_host("0.30.0")
    )


def _reason(decision, setting_end: str):  # type: ignore[no-untyped-def]
    return next(r for r in decision.reasons if r.setting.endswith(setting_end))


def test_ming_tts_is_on_by_default_with_its_key_in_its_stage_connector() -> None:
    d = _decide(MODELS / "ming_tts.yaml")
    assert d.speaker_backend == CUDA_TORCH and "stage 0" in d.provider and d.matmul_tf32 is True
    reason = _reason(d, "ming_device_spk")
    assert reason.setting == "$.connectors.shm.extra.ming_device_spk" and reason.origin == "default"
    assert [f.backend for f in d.fallbacks] == [CPU_ORT]


def test_ming_tts_off_in_the_file() -> None:
    d = _decide(MODELS / "ming_tts_off.yaml")
    assert d.speaker_backend == CPU_ORT and "ming_tts_off.yaml:5:" in _reason(d, "ming_device_spk").origin


def test_ming_tts_under_ray_decides_with_what_its_workers_see() -> None:
    d = _decide(MODELS / "ming_tts_ray.yaml")
    assert d.speaker_backend == CUDA_TORCH  # the stage env's override does not reach the Ray workers
    (warning,) = [w for w in d.warnings if "Ray workers" in w]
    assert "OMNI_DEPLOY_SPK_BACKEND=cpu-onnxruntime" in warning and "ming_tts_ray.yaml:2:" in warning
    assert "VLLM_RAY_EXTRA_ENV_VARS_TO_COPY=OMNI_DEPLOY_SPK_BACKEND" in warning
    copied = _decide(
        MODELS / "ming_tts_ray.yaml", {"VLLM_RAY_EXTRA_ENV_VARS_TO_COPY": "OMNI_DEPLOY_SPK_BACKEND"}
    )
    assert copied.speaker_backend == CPU_ORT


@pytest.mark.parametrize("name", ["cosyvoice3.yaml", "glm_tts.yaml"])
def test_processors_are_opt_in_through_the_servers_environment(name: str) -> None:
    d = _decide(MODELS / name)
    assert d.speaker_backend == CPU_ORT
    assert "opt-in" in _reason(d, "OMNI_DEPLOY_SPK_PROCESSOR").origin
    on = _decide(MODELS / name, {"OMNI_DEPLOY_SPK_PROCESSOR": "cuda-torch"})
    assert on.speaker_backend == CUDA_TORCH and "API server" in on.provider


def test_a_stage_env_cannot_opt_a_processor_in() -> None:
    d = _decide(MODELS / "glm_tts.yaml")
    assert (
        Deployment.load(str(MODELS / "glm_tts.yaml")).pipeline.source
        == "inferred from the file name glm_tts.yaml"
    )
    assert d.speaker_backend == CPU_ORT
    assert any(
        "stages[1] env sets OMNI_DEPLOY_SPK_PROCESSOR=cuda-torch" in w and "API server" in w
        for w in d.warnings
    )


def test_cosyvoice3s_own_tensorrt_engine_is_left_alone() -> None:
    host = dataclasses.replace(assumed_host("0.30.0"), tensorrt=True)
    d = _decide(MODELS / "cosyvoice3.yaml", {"OMNI_DEPLOY_SPK_PROCESSOR": "cuda-torch"}, host)
    assert d.speaker_backend == TENSORRT and "CosyVoice3's TensorRT" in d.provider
    off = _decide(
        MODELS / "cosyvoice3.yaml", {"OMNI_DEPLOY_SPK_PROCESSOR": "cuda-torch", "COSYVOICE3_TRT": "0"}, host
    )
    assert off.speaker_backend == CUDA_TORCH


def test_glm_tts_with_onnxruntime_gpu_is_left_alone() -> None:
    host = dataclasses.replace(assumed_host("0.30.0"), onnxruntime_gpu=True)
    assert _decide(
        MODELS / "glm_tts.yaml", {"OMNI_DEPLOY_SPK_PROCESSOR": "cuda-torch"}, host
    ).speaker_backend == ("onnxruntime-cuda")


def test_off_cuda_every_model_stays_on_onnx_runtime() -> None:
    for name in ("ming_tts.yaml", "glm_tts.yaml"):
        assert (
            _decide(
                MODELS / name, {"OMNI_DEPLOY_SPK_PROCESSOR": "cuda-torch"}, platform="rocm"
            ).speaker_backend
            == CPU_ORT
        )


def test_the_code2wav_stage_under_ray_ignores_its_env_override() -> None:
    d = _decide(DATA / "ray_stage_env.yaml")
    assert d.speaker_backend == CUDA_TORCH
    assert any("Ray workers" in w and "OMNI_DEPLOY_SPK_BACKEND=cpu-onnxruntime" in w for w in d.warnings)


def test_an_unverified_vllm_omni_warns_and_the_switch_refuses() -> None:
    host = dataclasses.replace(assumed_host("0.30.0"), vllm_omni="0.99.0")
    d = _decide(ROOT / "deploy" / "minicpmo_4_5_turn.yaml", host=host)
    assert d.speaker_backend == CUDA_TORCH and any("0.99.0 is not a release" in w for w in d.warnings)
    refused = _decide(
        ROOT / "deploy" / "minicpmo_4_5_turn.yaml", {"OMNI_DEPLOY_SPK_VERIFIED_ONLY": "1"}, host
    )
    assert refused.speaker_backend == CPU_ORT and any("refuses" in w for w in refused.warnings)
    broken = dataclasses.replace(
        host, plugin_shapes={"minicpmo_4_5": ["MiniCPMO45Code2Wav._build_backend not found"]}
    )
    assert _decide(ROOT / "deploy" / "minicpmo_4_5_turn.yaml", host=broken).speaker_backend == CPU_ORT


@pytest.mark.upstream
@pytest.mark.parametrize(
    ("name", "backend"),
    [("cosyvoice3.yaml", CPU_ORT), ("glm_tts.yaml", CPU_ORT), ("ming_tts.yaml", CUDA_TORCH),
     ("ming_tts_moe.yaml", CUDA_TORCH), ("minicpmo_4_5.yaml", CUDA_TORCH)],
)  # fmt: skip
def test_the_bundled_files_of_each_model(name: str, backend: str) -> None:
    from tests.support.upstream import deploy_dir

    assert _decide(deploy_dir() / name).speaker_backend == backend
    if backend == CPU_ORT:
        assert (
            _decide(deploy_dir() / name, {"OMNI_DEPLOY_SPK_PROCESSOR": "cuda-torch"}).speaker_backend
            == CUDA_TORCH
        )
