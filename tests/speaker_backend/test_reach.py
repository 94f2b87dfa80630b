"""explain --target-version V says what V's own code can do, for every release that ships MiniCPM-o."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from omni_deploy.knowledge.target import facts_data, release_reads
from omni_deploy.knowledge.versions import RELEASES
from tests.support.cli import run_cli

ROOT = Path(__file__).resolve().parents[2]
BUNDLED = str(ROOT / "deploy" / "minicpmo_4_5_turn.yaml")  # named: the checkout holds two deploy files
WITH_MINICPMO = [v for v in RELEASES if "minicpmo_4_5" in facts_data()["versions"][v]["pipelines"]]


def _cuda(capsys: pytest.CaptureFixture[str], version: str) -> dict:  # type: ignore[type-arg]
    result = run_cli(
        capsys,
        "explain",
        BUNDLED,
        "--backend",
        "--platform",
        "cuda",
        "--target-version",
        version,
        "-o",
        "json",
    )
    assert result.code == 0, result.err
    return json.loads(result.out)["platforms"]["cuda"]  # type: ignore[no-any-return]


def test_every_release_with_minicpmo_is_covered() -> None:
    assert WITH_MINICPMO == ["0.22.0", "0.24.0", "0.26.0", "0.28.0", "0.30.0", "0.31.0rc1", "0.32.0rc1"]


@pytest.mark.parametrize("version", WITH_MINICPMO)
def test_explain_claims_only_what_the_release_has(capsys: pytest.CaptureFixture[str], version: str) -> None:
    reads = release_reads(version)
    decision = _cuda(capsys, version)
    switches = {f["backend"] for f in decision["fallbacks"]}
    said = json.dumps(decision)
    if not reads.fact("code2wav_module"):
        # 0.22.0, 0.24.0: MiniCPM-o's vocoder runs in the Talker; there is no Code2Wav stage to hook.
        assert decision["speaker_backend"] == "vllm-omni's own" and not switches
        assert "token2wav_device_spk" not in json.dumps(decision["reasons"])
    elif not reads.fact("spk_embedding_hook"):
        # 0.26.0: step_audio2_token2wav.py has no _forward_spk_embedding for the plugin to replace.
        assert decision["speaker_backend"] == "cpu-onnxruntime" and not switches
        assert "_forward_spk_embedding" in said
    else:
        assert decision["speaker_backend"] == "cuda-torch"
        assert reads.fact("spk_embedding_hook")
    if reads.fact("token2wav_trt"):
        assert "tensorrt" in switches
    else:
        assert "tensorrt" not in switches
        if reads.fact("code2wav_module"):
            assert "read from 0.28.0 on" in said
