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
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

vllm_omni = pytest.importorskip("vllm_omni")
pytest.importorskip("vllm")
pytest.importorskip("s3tokenizer")

from omni_deploy.integrations.speaker_rules import VERIFIED_VLLM_OMNI  # noqa: E402
from tests.integration import code2wav_standin  # noqa: E402

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


# These cases are about the per-voice CAM++ path and its guard: vllm-omni's own
# _forward_spk_embedding, which the stand-in spies on and injects faults behind. Issue 26's batched
# reference preparation (on by default with the CUDA path) bypasses that call, so it is switched off
# here; tests/integration/test_refprep_hook.py covers the batched pass in a stage.
# vllm-omni 0.32 also prepares its default prompt at the first forward to capture its graphs
# (`cfm_graph_precapture`, on by default): off here, so that each case's one embedding is its
# request's (0.30.0 reads no such key).
PER_VOICE: dict[str, Any] = {
    "ref_audio_max_seconds": 2.0,
    "token2wav_device_prepare": False,
    "cfm_graph_precapture": False,
}


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory, standin_onnx: Path) -> Path:
    return code2wav_standin.build_model_dir(tmp_path_factory.mktemp("minicpmo") / "model", standin_onnx)


@pytest.fixture
def stage(model_dir: Path, tmp_path: Path) -> Iterator[Callable[..., dict[str, Any]]]:
    """Runs one Code2Wav stage process; the process is stopped at teardown whatever happened."""
    started: list[Any] = []

    def run(
        extra: dict[str, Any] | None = None,
        fault: str = "",
        requests: int = 1,
        vllm_omni_version: str | None = None,
        dtype: str = "bfloat16",
        **env: str | None,
    ) -> dict[str, Any]:
        result = tmp_path / f"stage-{len(started)}.json"
        context = multiprocessing.get_context("spawn")
        process = context.Process(
            target=code2wav_standin.run_stage,
            args=(str(model_dir), {**PER_VOICE, **(extra or {})}, CLEAN_ENV | env, fault,
                  str(result), requests, vllm_omni_version, dtype),
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


@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_the_stage_takes_over_in_every_loader_dtype(stage: Callable[..., Any], dtype: str) -> None:
    """bf16 is every other case here; float16 and float32 are what a stage's `dtype` may set."""
    outcome = stage(dtype=dtype, requests=2)
    assert all(r["error"] is None and r["finite"] and r["audio_samples"] > 0 for r in outcome["requests"])
    assert outcome["speaker_model"] == outcome["speaker_model_after"] == "GuardedSpeakerModel", outcome["log"]
    line = _report(outcome)
    assert "backend=cuda-torch" in line and "fallback" not in line, line
    assert outcome["fallback_calls"] == 0 and outcome["cosine"] >= 0.9999


def _report(outcome: dict[str, Any]) -> str:
    lines = [line for line in outcome["log"] if REPORT in line]
    assert len(lines) == 1, outcome["log"]
    assert lines[0].startswith("INFO vllm.")  # under the logger tree vLLM configures
    return lines[0]


def _on_onnx_runtime(outcome: dict[str, Any]) -> None:
    """vllm-omni's own CPU session answered: built at load (0.30.0), or left empty at load and built
    at the first request (0.32: `spk_model`)."""
    assert outcome["speaker_model"] in ("InferenceSession", "NoneType"), outcome["speaker_model"]
    assert outcome["speaker_model_after"] == "InferenceSession", outcome["log"]


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
    _on_onnx_runtime(outcome)
    assert "backend=cpu-onnxruntime" in _report(outcome)


def test_tensorrt_is_left_untouched(stage: Callable[..., Any]) -> None:
    outcome = stage({"token2wav_trt": True}, fault="tensorrt")
    _served(outcome)
    assert outcome["speaker_model"] == "CampplusTRTStandIn"
    assert "backend=tensorrt" in _report(outcome)


def test_the_environment_override_picks_onnx_runtime(stage: Callable[..., Any]) -> None:
    outcome = stage(OMNI_DEPLOY_SPK_BACKEND="cpu-onnxruntime")
    _served(outcome)
    _on_onnx_runtime(outcome)
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
    _on_onnx_runtime(outcome)
    assert not any(REPORT in line for line in outcome["log"])  # silence: what serve warns about
    # ... and explain --probe, run in the same environment with the same allowlist, says so.
    probe = _probe(VLLM_PLUGINS="vllm_omni_register_models")
    assert "allowlist without omni_deploy_campplus" in probe
    assert "cuda: cpu-onnxruntime" in probe


def _probe(**env: str) -> str:
    """`explain --backend --probe` in this environment, with `env` on top; its output."""
    environ = {**os.environ, **env}
    environ["PATH"] = os.pathsep.join((os.path.dirname(sys.executable), environ.get("PATH", "")))
    # Outside any project, so that explain without FILE takes the bundled profile (in this
    # repository's root it would find two deploy files and ask for one).
    with tempfile.TemporaryDirectory() as outside:
        probe = subprocess.run(
            [sys.executable, "-m", "omni_deploy", "explain", "--backend", "--probe", "--platform", "cuda"],
            capture_output=True, text=True, env=environ, timeout=120, cwd=outside,
        )  # fmt: skip
    assert probe.returncode == 0, probe.stderr
    return probe.stdout


@pytest.mark.parametrize("fault", sorted(code2wav_standin.BAD_EMBEDDINGS))
def test_a_bad_embedding_is_answered_by_onnx_runtime_and_never_cached(
    stage: Callable[..., Any], fault: str
) -> None:
    # Three requests with one voice: vllm-omni prepares the voice once and serves the other two from
    # its cache, so whatever the first call returned is what all three get.
    outcome = stage(fault=fault, requests=3)
    assert all(r["error"] is None and r["audio_samples"] > 0 and r["finite"] for r in outcome["requests"])
    assert outcome["embeddings"] == 1 and outcome["cached_voices"] == 1
    assert outcome["fallback_calls"] == 1  # the encoder's answer was refused once, ONNX Runtime gave it
    assert outcome["cosine"] >= 0.9999 and outcome["cache_cosine"] >= 0.9999
    (warning,) = [line for line in outcome["log"] if "this call falls back" in line]
    assert warning.startswith("WARNING vllm.") and "EmbeddingRejected" in warning
    words = {"nan": "non-finite", "inf": "non-finite", "zeros": "norm 0", "shape": "shape [1, 191]",
             "dtype": "dtype bfloat16"}  # fmt: skip
    assert words[fault] in warning


def _report_files(directory: Path) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted(directory.glob("*.json"))]


def test_the_report_file_confirms_the_backend_when_logging_hides_info(
    stage: Callable[..., Any], tmp_path: Path
) -> None:
    from omni_deploy.speaker_backend.server_report import read_report, summary_lines

    reports = tmp_path / "speaker"
    outcome = stage(OMNI_DEPLOY_SPK_REPORT_DIR=str(reports), VLLM_LOGGING_LEVEL="WARNING")
    _served(outcome)
    assert outcome["speaker_model"] == "GuardedSpeakerModel"
    assert not any(REPORT in line for line in outcome["log"])  # INFO is not logged at WARNING
    (record,) = _report_files(reports)
    assert record["stage"] == "2" and record["backend"] == "cuda-torch" and record["model"] == "minicpmo_4_5"
    assert record["vllm_omni"] == vllm_omni.__version__ and record["replaced"] == "onnxruntime-cpu"
    # What serve makes of it: the backend, confirmed without a line of the log.
    summary = summary_lines(read_report([], reports), "cuda-torch")
    assert summary[0][0] == "info" and "stage 2: cuda-torch" in summary[0][1]


def test_an_unverified_vllm_omni_is_patched_with_one_warning_naming_it(stage: Callable[..., Any]) -> None:
    outcome = stage(vllm_omni_version="0.99.0")
    _served(outcome)
    assert outcome["speaker_model"] == "GuardedSpeakerModel"
    line = _report(outcome)
    assert "backend=cuda-torch" in line and "vllm-omni=0.99.0" in line
    (warning,) = [x for x in outcome["log"] if "0.99.0" in x and x.startswith("WARNING")]
    assert f"not a release the plugin is verified against ({', '.join(VERIFIED_VLLM_OMNI)})" in warning


def test_the_verified_only_switch_refuses_an_unverified_vllm_omni(stage: Callable[..., Any]) -> None:
    outcome = stage(vllm_omni_version="0.99.0", OMNI_DEPLOY_SPK_VERIFIED_ONLY="1")
    _served(outcome)
    _on_onnx_runtime(outcome)
    line = _report(outcome)
    assert "backend=cpu-onnxruntime" in line and "vllm-omni=0.99.0" in line and "refused" in line


def test_an_allowlist_entry_with_a_space_is_skipped_as_vllm_skips_it(stage: Callable[..., Any]) -> None:
    allowlist = "vllm_omni_register_models, omni_deploy_campplus"
    outcome = stage(VLLM_PLUGINS=allowlist)
    _served(outcome)
    _on_onnx_runtime(outcome)  # vLLM compared " omni_deploy_campplus"
    assert not any(REPORT in line for line in outcome["log"])
    probe = _probe(VLLM_PLUGINS=allowlist)
    assert "cuda: cpu-onnxruntime" in probe
    assert "fix: VLLM_PLUGINS=vllm_omni_register_models,omni_deploy_campplus" in probe
