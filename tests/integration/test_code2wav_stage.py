"""The plugin in a Code2Wav stage process started the way vllm-omni 0.30.0 starts one.

Each case spawns a fresh interpreter (multiprocessing spawn, as vllm-omni forces for its stages),
which loads vLLM's general plugins through the real `load_general_plugins` (entry points, the
VLLM_PLUGINS allowlist) and runs the real `MiniCPMO45Code2Wav.load_weights -> _build_backend ->
forward` on stand-in token2wav assets built here (see code2wav_standin.py). The only omni-deploy
variable set is OMNI_DEPLOY_SPK_ALLOW_CPU=1, which lets the CPU stand in for CUDA: the backend comes
from the stage's connector extra, as under a plain `vllm serve --deploy-config F`.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("vllm_omni")
pytest.importorskip("vllm")
pytest.importorskip("s3tokenizer")

from tests.integration import code2wav_standin

pytestmark = pytest.mark.vllm

REPORT = "omni-deploy CAM++ report:"
STAGE_TIMEOUT_S = 300
CLEAN_ENV: dict[str, str | None] = {
    "OMNI_DEPLOY_SPK_BACKEND": None,
    "OMNI_DEPLOY_SPK_TF32": None,
    "MINICPMO_TOKEN2WAV_TRT": None,
    "VLLM_PLUGINS": None,
    "OMNI_DEPLOY_SPK_ALLOW_CPU": "1",
}


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory, standin_onnx: Path) -> Path:
    return code2wav_standin.build_model_dir(tmp_path_factory.mktemp("minicpmo") / "model", standin_onnx)


@pytest.fixture
def stage(model_dir: Path, tmp_path: Path) -> Iterator[Callable[..., dict[str, Any]]]:
    """Runs one Code2Wav stage process; the process is stopped at teardown whatever happened."""
    started: list[Any] = []

    def run(extra: dict[str, Any] | None = None, fault: str = "", **env: str | None) -> dict[str, Any]:
        result = tmp_path / f"stage-{len(started)}.json"
        context = multiprocessing.get_context("spawn")
        process = context.Process(
            target=code2wav_standin.run_stage,
            args=(str(model_dir), {"ref_audio_max_seconds": 2.0, **(extra or {})}, CLEAN_ENV | env, fault,
                  str(result)),
        )  # fmt: skip
        started.append(process)
        process.start()
        process.join(STAGE_TIMEOUT_S)
        assert process.exitcode == 0, f"stage process exit code {process.exitcode}"
        return json.loads(result.read_text())

    yield run
    for process in started:
        if process.is_alive():
            process.kill()
            process.join(10)


def _report(outcome: dict[str, Any]) -> str:
    lines = [line for line in outcome["log"] if REPORT in line]
    assert len(lines) == 1, outcome["log"]
    assert lines[0].startswith("INFO vllm.")  # under the logger tree vLLM configures
    return lines[0]


def _served(outcome: dict[str, Any]) -> None:
    """The request went through: an embedding was computed and audio came out."""
    assert outcome["error"] is None
    assert outcome["embeddings"] == 1 and outcome["audio_samples"] > 0 and outcome["finite"]


def test_default_stage_gets_the_encoder_without_any_omni_deploy_variable(stage: Callable[..., Any]) -> None:
    outcome = stage()
    _served(outcome)
    assert outcome["speaker_model"] == "GuardedSpeakerModel"
    assert outcome["cosine"] >= 0.9999
    line = _report(outcome)
    assert "stage=2 backend=cuda-torch" in line and "replaced=onnxruntime-cpu" in line
    assert "tf32=on" in line and "/assets/token2wav/campplus.onnx" in line


def test_device_spk_false_keeps_onnx_runtime(stage: Callable[..., Any]) -> None:
    outcome = stage({"token2wav_device_spk": False})
    _served(outcome)
    assert outcome["speaker_model"] == "InferenceSession"
    assert "backend=cpu-onnxruntime" in _report(outcome)


def test_tensorrt_is_left_untouched(stage: Callable[..., Any]) -> None:
    outcome = stage({"token2wav_trt": True}, fault="tensorrt")
    _served(outcome)
    assert outcome["speaker_model"] == "CampplusTRTStandIn"
    assert "backend=tensorrt" in _report(outcome)


def test_the_environment_override_picks_onnx_runtime(stage: Callable[..., Any]) -> None:
    outcome = stage(OMNI_DEPLOY_SPK_BACKEND="cpu-onnxruntime")
    _served(outcome)
    assert outcome["speaker_model"] == "InferenceSession"
    assert "decided-by=env_OMNI_DEPLOY_SPK_BACKEND" in _report(outcome)


def test_an_encoder_that_raises_falls_back_and_the_batch_goes_on(stage: Callable[..., Any]) -> None:
    outcome = stage(fault="encoder-raises")
    _served(outcome)
    assert outcome["fallback_calls"] == 1
    assert outcome["cosine"] >= 0.9999  # the embedding came, from the ONNX Runtime session kept
    assert any(line.startswith("WARNING vllm.") and "falls back" in line for line in outcome["log"])


def test_an_allowlist_without_the_plugin_leaves_the_stage_on_onnx_runtime(stage: Callable[..., Any]) -> None:
    outcome = stage(VLLM_PLUGINS="vllm_omni_register_models")
    _served(outcome)
    assert outcome["speaker_model"] == "InferenceSession"
    assert not any(REPORT in line for line in outcome["log"])  # silence: what serve warns about
    # ... and explain --probe, run in the same environment with the same allowlist, says so.
    env = {**os.environ, "VLLM_PLUGINS": "vllm_omni_register_models"}
    env["PATH"] = os.pathsep.join((os.path.dirname(sys.executable), env.get("PATH", "")))
    probe = subprocess.run(
        [sys.executable, "-m", "omni_deploy", "explain", "--backend", "--probe", "--platform", "cuda"],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert probe.returncode == 0, probe.stderr
    assert "allowlist without omni_deploy_campplus" in probe.stdout
    assert "cuda: cpu-onnxruntime" in probe.stdout
