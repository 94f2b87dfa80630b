"""speaker_rules: the rules the plugin applies and explain mirrors, for every model, and the mirrors
of vLLM's and vllm-omni's own reading of the environment (the vllm tier checks them against
vLLM's code: tests/integration/test_environment_parity.py), and their one answer to "does this
vllm-omni read token2wav_device_spk itself?", which the plugin (on the imported module) and
`explain --probe` (on the installed file) both take."""

from __future__ import annotations

from pathlib import Path

import pytest

from omni_deploy.integrations.speaker_rules import (
    CODE2WAV_MODULE,
    COSYVOICE3,
    CPU_ORT,
    CUDA_TORCH,
    GLM_TTS,
    MING_TTS,
    TENSORRT,
    Model,
    allowlist,
    allowlist_drops_plugin,
    allowlist_fix,
    allowlist_near_miss,
    choose,
    choose_for,
    ray_copies,
    ray_fix,
    ray_view,
    reads_device_spk,
    report_line_logged,
    version_verdict,
)
from omni_deploy.speaker_backend import host
from tests.support import upstream


@pytest.mark.parametrize(
    ("value", "drops"),
    [
        (None, False),
        ("omni_deploy_campplus", False),
        ("vllm_omni_register_models,omni_deploy_campplus", False),
        ("vllm_omni_register_models, omni_deploy_campplus", True),  # vLLM strips nothing
        ("omni_deploy_campplus ", True),
        ("", True),  # set but empty: nothing is allowed
        ("vllm_omni_register_models", True),
    ],
)
def test_the_allowlist_is_read_as_vllm_reads_it(value: str | None, drops: bool) -> None:
    assert allowlist_drops_plugin(value) is drops


def test_the_allowlist_fix_keeps_what_was_meant() -> None:
    value = "vllm_omni_register_models, omni_deploy_campplus"
    assert allowlist(value) == ["vllm_omni_register_models", " omni_deploy_campplus"]
    assert allowlist_near_miss(value) == " omni_deploy_campplus"
    assert allowlist_fix(value) == "vllm_omni_register_models,omni_deploy_campplus"
    assert allowlist_fix("vllm_omni_register_models") == "vllm_omni_register_models,omni_deploy_campplus"
    assert allowlist_near_miss("vllm_omni_register_models") is None


def test_ray_copies_what_vllm_copies_and_nothing_else() -> None:
    env = {"OMNI_DEPLOY_SPK_BACKEND": "cpu-onnxruntime", "VLLM_PLUGINS": "x", "HF_TOKEN": "t"}
    assert ray_view(env) == {"VLLM_PLUGINS": "x", "HF_TOKEN": "t"}
    assert ray_copies("OMNI_DEPLOY_SPK_BACKEND", {"VLLM_RAY_EXTRA_ENV_VAR_PREFIXES_TO_COPY": "OMNI_DEPLOY_ "})
    assert ray_copies(
        "MINICPMO_TOKEN2WAV_TRT", {"VLLM_RAY_EXTRA_ENV_VARS_TO_COPY": "A, MINICPMO_TOKEN2WAV_TRT"}
    )
    assert ray_copies("PYTHONHASHSEED", {})
    assert not ray_copies("VLLM_PLUGINS", {}, frozenset({"VLLM_PLUGINS"}))  # the non-carry-over file
    assert ray_fix(["OMNI_DEPLOY_SPK_BACKEND"], {"VLLM_RAY_EXTRA_ENV_VARS_TO_COPY": "B"}) == (
        "VLLM_RAY_EXTRA_ENV_VARS_TO_COPY=B,OMNI_DEPLOY_SPK_BACKEND"
    )


@pytest.mark.parametrize(
    ("env", "logged"),
    [
        ({}, True),
        ({"VLLM_LOGGING_LEVEL": "debug"}, True),
        ({"VLLM_LOGGING_LEVEL": "WARNING"}, False),
        ({"VLLM_LOGGING_LEVEL": "error"}, False),
        ({"VLLM_CONFIGURE_LOGGING": "0"}, False),
        ({"VLLM_CONFIGURE_LOGGING": "no"}, None),  # vLLM's int() fails on it
        ({"VLLM_LOGGING_LEVEL": "LOUD"}, None),
        ({"VLLM_LOGGING_CONFIG_PATH": "/etc/log.json"}, None),
    ],
)
def test_whether_the_report_line_reaches_the_log(env: dict[str, str], logged: bool | None) -> None:
    assert report_line_logged(env)[0] is logged


def test_versions() -> None:
    assert version_verdict("0.30.0", {}) == (True, None)
    allowed, note = version_verdict("0.99.0", {})
    assert allowed and note is not None and "0.99.0" in note and "0.30.0" in note
    allowed, note = version_verdict("0.99.0", {"OMNI_DEPLOY_SPK_VERIFIED_ONLY": "1"})
    assert not allowed and note is not None and "refuses" in note
    assert version_verdict(None, {})[0]


def test_token2wav_trt_is_read_with_python_truth_as_vllm_omni_reads_it() -> None:
    choice = choose({"token2wav_trt": "false"}, {}, on_cuda=True)
    assert choice.backend == TENSORRT and any("bool('false') = True" in p for p in choice.problems)
    assert choose({"token2wav_trt": 0}, {}, on_cuda=True).backend == CUDA_TORCH
    assert choose({}, {"MINICPMO_TOKEN2WAV_TRT": "true"}, on_cuda=True).backend == CUDA_TORCH  # only "1"


def test_ming_tts_is_on_by_default_in_its_stage() -> None:
    assert choose_for(MING_TTS, {}, {}, on_cuda=True).backend == CUDA_TORCH
    off = choose_for(MING_TTS, {"ming_device_spk": False}, {}, on_cuda=True)
    assert off.backend == CPU_ORT and off.decided_by == "ming_device_spk"
    assert (
        choose_for(MING_TTS, {}, {"OMNI_DEPLOY_SPK_BACKEND": "cpu-onnxruntime"}, on_cuda=True).backend
        == CPU_ORT
    )
    assert choose_for(MING_TTS, {}, {}, on_cuda=False).backend == CPU_ORT
    assert choose_for(MING_TTS, {"ming_device_spk": "perhaps"}, {}, on_cuda=True).problems


@pytest.mark.parametrize("model", [COSYVOICE3, GLM_TTS])
def test_processors_are_opt_in(model: Model) -> None:
    assert choose_for(model, {}, {}, on_cuda=True).backend == CPU_ORT
    # The stage switch does not reach a processor: it would open a CUDA context in the API server.
    assert choose_for(model, {}, {"OMNI_DEPLOY_SPK_BACKEND": "cuda-torch"}, on_cuda=True).backend == CPU_ORT
    on = choose_for(model, {}, {"OMNI_DEPLOY_SPK_PROCESSOR": "cuda-torch"}, on_cuda=True)
    assert on.backend == CUDA_TORCH and on.decided_by == "env OMNI_DEPLOY_SPK_PROCESSOR"
    assert choose_for(model, {}, {"OMNI_DEPLOY_SPK_PROCESSOR": "gpu"}, on_cuda=True).problems


READS = 'def _extra(self):\n    return self.extra.get("token2wav_device_spk", True)\n'
MENTIONS = '"""token2wav_device_spk: not read here."""\n# token2wav_device_spk is for the plugin\nx = 1\n'


def test_a_read_counts_and_a_mention_does_not() -> None:
    assert reads_device_spk(READS)
    assert not reads_device_spk(MENTIONS)
    assert not reads_device_spk("def broken(:\n")


@pytest.mark.upstream
def test_no_release_reads_it() -> None:
    module = upstream.wheel_root().joinpath(*CODE2WAV_MODULE.split(".")).with_suffix(".py")
    assert not reads_device_spk(module.read_text(encoding="utf-8"))


def test_the_probe_reads_the_installed_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = tmp_path / "vllm_omni"
    module = tmp_path.joinpath(*CODE2WAV_MODULE.split(".")).with_suffix(".py")
    module.parent.mkdir(parents=True)
    monkeypatch.setattr(host, "installed_vllm_omni_dir", lambda: package)
    module.write_text(MENTIONS)
    assert host.vllm_omni_reads_device_spk() is False
    module.write_text(READS)
    assert host.vllm_omni_reads_device_spk() is True
