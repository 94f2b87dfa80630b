"""The speaker-backend decision table, over every rule."""

from __future__ import annotations

from pathlib import Path

import pytest

from omni_deploy.deployment.model import Deployment
from omni_deploy.speaker_backend import (
    CPU_ORT,
    CUDA_TORCH,
    NOT_APPLICABLE,
    TENSORRT,
    UNKNOWN,
    speaker_decision,
)
from omni_deploy.speaker_backend.host import HostCaps, assumed_host

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "explain"
DEFAULT = ROOT / "deploy" / "minicpmo_4_5_turn.yaml"


def _decide(path: Path, platform: str = "cuda", env: dict[str, str] | None = None, host: HostCaps | None = None,
            override: str | None = None):  # type: ignore[no-untyped-def]  # fmt: skip
    deployment = Deployment.load(str(path))
    return speaker_decision(deployment, platform, env=env or {}, host=host or assumed_host("0.30.0"),
                            override=override)  # type: ignore[arg-type]  # fmt: skip


def _reason(decision, setting_end: str):  # type: ignore[no-untyped-def]
    return next(r for r in decision.reasons if r.setting.endswith(setting_end))


def test_default_is_cuda_torch_on_cuda_with_defaults_as_origins() -> None:
    d = _decide(DEFAULT)
    assert (d.speaker_backend, d.weights_dtype, d.inputs_dtype, d.matmul_tf32) == (
        CUDA_TORCH,
        "fp32",
        "fp32",
        True,
    )
    assert "plugin" in d.provider
    assert _reason(d, "token2wav_device_spk").origin == "default"
    assert {f.backend for f in d.fallbacks} == {CPU_ORT, TENSORRT}


@pytest.mark.parametrize("platform", ["rocm", "npu", "xpu", "musa"])
def test_other_platforms_use_onnx_runtime_on_the_cpu(platform: str) -> None:
    assert _decide(DEFAULT, platform).speaker_backend == CPU_ORT


def test_device_spk_false_selects_the_cpu_fallback_with_its_origin() -> None:
    d = _decide(DATA / "device_spk_off.yaml")
    assert d.speaker_backend == CPU_ORT
    assert _reason(d, "token2wav_device_spk").origin.endswith("device_spk_off.yaml:5:29 (overlay)")


def test_trt_true_selects_tensorrt() -> None:
    d = _decide(DATA / "trt_on.yaml")
    assert d.speaker_backend == TENSORRT
    assert _reason(d, "token2wav_trt").origin.endswith("trt_on.yaml:5:22 (overlay)")


def test_env_trt_selects_tensorrt() -> None:
    d = _decide(DEFAULT, env={"MINICPMO_TOKEN2WAV_TRT": "1"})
    assert d.speaker_backend == TENSORRT
    assert _reason(d, "MINICPMO_TOKEN2WAV_TRT").origin == "env MINICPMO_TOKEN2WAV_TRT"


def test_tf32_off_changes_the_matmul_policy_only() -> None:
    d = _decide(DATA / "tf32_off.yaml")
    assert d.speaker_backend == CUDA_TORCH and d.matmul_tf32 is False
    assert _reason(d, "token2wav_allow_tf32").origin.endswith("tf32_off.yaml:5:29 (overlay)")
    assert "on by default" in (d.cudnn_tf32 or "")


def test_switches_have_no_effect_off_cuda_and_say_so() -> None:
    d = _decide(DATA / "trt_on.yaml", "rocm")
    assert d.speaker_backend == CPU_ORT
    assert any("no effect on rocm" in w for w in d.warnings)


def test_override_wins_and_is_a_reason() -> None:
    d = _decide(DEFAULT, override=CPU_ORT)
    assert d.speaker_backend == CPU_ORT and _reason(d, "--spk-backend").value == CPU_ORT


def test_newer_vllm_omni_provides_the_path_itself() -> None:
    # A host whose installed vllm-omni's code reads token2wav_device_spk (none released does).
    host = HostCaps(probed=True, vllm_omni="0.32.0", vllm_omni_reads_device_spk=True)
    d = _decide(DEFAULT, host=host)
    assert d.speaker_backend == CUDA_TORCH and d.provider.startswith("vllm-omni")


def test_main_without_its_code_is_not_claimed_to_read_the_key() -> None:
    d = _decide(DEFAULT, host=assumed_host("main"))
    assert d.speaker_backend == CUDA_TORCH and d.provider.startswith("omni-deploy vLLM plugin")


def test_without_the_plugin_or_torch_the_cpu_path_runs() -> None:
    host = HostCaps(probed=True, torch=False, plugin_registered=False, vllm_omni="0.30.0")
    d = _decide(DEFAULT, host=host)
    assert d.speaker_backend == CPU_ORT
    assert any("torch" in w and "plugin" in w for w in d.warnings)


def test_other_pipeline_is_not_applicable_and_unknown_stays_unknown() -> None:
    assert _decide(DATA / "other_pipeline.yaml").speaker_backend == NOT_APPLICABLE
    assert _decide(DATA / "unknown_pipeline.yaml").speaker_backend == UNKNOWN


def test_the_environment_override_wins_over_the_file() -> None:
    d = _decide(DEFAULT, env={"OMNI_DEPLOY_SPK_BACKEND": "cpu-onnxruntime"})
    assert d.speaker_backend == CPU_ORT
    assert _reason(d, "OMNI_DEPLOY_SPK_BACKEND").origin == "env OMNI_DEPLOY_SPK_BACKEND"


def test_a_stage_runtime_env_in_the_file_is_seen_with_its_origin() -> None:
    d = _decide(DATA / "stage_env_cpu.yaml")
    assert d.speaker_backend == CPU_ORT
    assert _reason(d, "OMNI_DEPLOY_SPK_BACKEND").origin.endswith(
        "stage_env_cpu.yaml:6:34 (overlay) (stages[2] env)"
    )
    assert any("the Code2Wav stage's env sets OMNI_DEPLOY_SPK_BACKEND" in w for w in d.warnings)
    # The stage's own environment wins over the process's, as vllm-omni applies it at spawn.
    assert (
        _decide(DATA / "stage_env_cpu.yaml", env={"OMNI_DEPLOY_SPK_BACKEND": "cuda-torch"}).speaker_backend
        == CPU_ORT
    )


def test_a_platform_section_stage_env_is_seen() -> None:
    d = _decide(DATA / "platform_stage_env_trt.yaml")
    assert d.speaker_backend == TENSORRT and _reason(d, "MINICPMO_TOKEN2WAV_TRT").value == "1"
    assert _decide(DATA / "platform_stage_env_trt.yaml", "rocm").speaker_backend == CPU_ORT


def test_tf32_from_the_environment() -> None:
    d = _decide(DEFAULT, env={"OMNI_DEPLOY_SPK_TF32": "0"})
    assert d.speaker_backend == CUDA_TORCH and d.matmul_tf32 is False


def test_the_resolver_and_the_plugin_share_one_rule_table() -> None:
    from omni_deploy.integrations.speaker_rules import DEFAULTS, choose

    for extra, env, backend in [
        ({}, {}, CUDA_TORCH),
        ({"token2wav_device_spk": False}, {}, CPU_ORT),
        ({"token2wav_trt": True, "token2wav_device_spk": True}, {}, TENSORRT),
        ({}, {"MINICPMO_TOKEN2WAV_TRT": "1", "OMNI_DEPLOY_SPK_BACKEND": "cuda-torch"}, TENSORRT),
        ({"token2wav_device_spk": True}, {"OMNI_DEPLOY_SPK_BACKEND": "cpu-onnxruntime"}, CPU_ORT),
        ({"token2wav_device_spk": False}, {"OMNI_DEPLOY_SPK_BACKEND": "cuda-torch"}, CUDA_TORCH),
    ]:
        assert choose(extra, env, on_cuda=True).backend == backend
    assert choose({}, {}, on_cuda=False).backend == CPU_ORT
    assert DEFAULTS == {"token2wav_trt": False, "token2wav_device_spk": True, "token2wav_allow_tf32": True}
    problems = choose(
        {"token2wav_device_spk": "maybe"}, {"OMNI_DEPLOY_SPK_BACKEND": "gpu"}, on_cuda=True
    ).problems
    assert len(problems) == 2
