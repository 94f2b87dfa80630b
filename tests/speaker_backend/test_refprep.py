"""How the Code2Wav stage prepares new reference voices (speaker_backend/refprep.py), as explain says it."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from omni_deploy.deployment.model import Deployment
from omni_deploy.speaker_backend import Reason, speaker_decision
from omni_deploy.speaker_backend.host import assumed_host
from omni_deploy.speaker_backend.refprep import BATCHED, PER_VOICE, reference_preparation, tokens_under
from tests.support.cli import run_cli

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "explain"
DEFAULT = ROOT / "deploy" / "minicpmo_4_5_turn.yaml"


def _prep(path: Path, platform: str = "cuda"):  # type: ignore[no-untyped-def]
    deployment = Deployment.load(str(path))
    decision = speaker_decision(deployment, platform, env={}, host=assumed_host("0.30.0"))
    return deployment, decision, reference_preparation(deployment, decision)


def test_batched_by_default_where_the_plugin_runs_campplus_on_cuda() -> None:
    _, _, prep = _prep(DEFAULT)
    assert prep is not None
    assert (prep.mode, prep.decided_by, prep.value, prep.origin) == (
        BATCHED, "token2wav_device_prepare (default)", True, "default"
    )  # fmt: skip
    assert prep.setting.endswith(".extra.token2wav_device_prepare") and prep.warnings == ()


@pytest.mark.parametrize("platform", ["rocm", "npu", "xpu", "musa"])
def test_per_voice_off_cuda(platform: str) -> None:
    _, _, prep = _prep(DEFAULT, platform)
    assert prep is not None and (prep.mode, prep.decided_by) == (PER_VOICE, "speaker backend cpu-onnxruntime")


def test_the_files_setting_and_its_origin() -> None:
    _, _, prep = _prep(DATA / "device_prepare_off.yaml")
    assert prep is not None and (prep.mode, prep.decided_by, prep.value) == (
        PER_VOICE, "token2wav_device_prepare", False
    )  # fmt: skip
    assert prep.origin.endswith("device_prepare_off.yaml:5:33 (overlay)")


def test_true_without_the_cuda_campplus_path_is_said_not_to_apply() -> None:
    _, _, prep = _prep(DATA / "device_prepare_without_cuda_campplus.yaml")
    assert prep is not None and prep.mode == PER_VOICE
    (warning,) = prep.warnings
    assert "cannot apply" in warning and "token2wav_device_spk" in warning


def test_a_vllm_omni_that_provides_cuda_itself_keeps_its_own_preparation() -> None:
    deployment, decision, _ = _prep(DEFAULT)
    own = replace(
        decision, reasons=[r if r.setting != "provider" else Reason("provider", "vllm-omni", "host") for r in decision.reasons]
    )  # fmt: skip
    prep = reference_preparation(deployment, own)
    assert prep is not None and prep.mode == PER_VOICE and "vllm-omni" in prep.decided_by


def test_other_pipelines_have_none() -> None:
    assert _prep(DATA / "other_pipeline.yaml")[2] is None


def test_explain_shows_it(capsys: pytest.CaptureFixture[str]) -> None:
    text = run_cli(
        capsys, "explain", "--backend", str(DATA / "device_prepare_off.yaml"), "--target-version", "0.30.0"
    )
    assert text.code == 0, text.err
    assert "reference preparation: per voice (vllm-omni's own); token2wav_device_prepare" in text.out
    result = run_cli(capsys, "explain", "--backend", str(DEFAULT), "--target-version", "0.30.0", "-o", "json")
    platforms = json.loads(result.out)["platforms"]
    assert platforms["cuda"]["reference_preparation"]["mode"] == BATCHED
    assert platforms["rocm"]["reference_preparation"]["mode"] == PER_VOICE


def test_the_line_says_what_the_matmul_policy_means_for_tokens() -> None:
    """token2wav_allow_tf32 (default true) decides the batched pass's S3 tokens: vllm-omni's
    per-voice tokens under TF32 matmuls, or in strict FP32; per voice, nothing is said."""
    _, decision, prep = _prep(DEFAULT)
    assert prep is not None and decision.matmul_tf32 is True
    assert "with TF32 matmuls (token2wav_allow_tf32 true" in prep.tokens and prep.tokens in prep.line()
    assert "strict FP32 (token2wav_allow_tf32 false)" in tokens_under(False)
    assert tokens_under(None) == ""
    _, _, cpu = _prep(DEFAULT, "cpu")
    assert cpu is not None and cpu.mode == PER_VOICE and cpu.tokens == ""
