"""Every model the plugin patches, built the way vLLM 0.30.0 builds a stage's model, in bf16, fp16
and float32 loader contexts (vllm_loading.py: vLLM's own BaseModelLoader.load_model), and called
the way vLLM's runner calls it (inference mode, several requests per call, input ids on the stage's
device, references as CPU tensors). The plugin must take over in every context: a fallback fails.

MiniCPM-o's Code2Wav is vllm-omni 0.30.0's real class on stand-in token2wav assets
(code2wav_standin.py); its take-over runs inside `load_weights`, so under the loader's default dtype
(the bf16 case reproduces "Input type (c10::BFloat16) and bias type (float) should be the same",
issue 29). CosyVoice3's processor, GLM-TTS's frontend and Ming-TTS's extractor load their CAM++
session outside a model loader in 0.30.0 (the API server; Ming's first request); here each runs
under the loader's context all the same, the worst a future release could do. The CPU stands in for
CUDA (OMNI_DEPLOY_SPK_ALLOW_CPU=1); MiniCPM-o's spawned-stage cases are in
test_code2wav_stage.py, the other three models' at the end of this file (speech_stage.py).
"""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("vllm_omni")
pytest.importorskip("vllm")
pytest.importorskip("s3tokenizer")

import s3tokenizer
import torch
from vllm.utils.torch_utils import set_default_torch_dtype
from vllm_omni.model_executor.models.minicpmo_4_5 import minicpmo_4_5_code2wav as c2w

from omni_deploy.integrations import import_hooks, refprep, report, takeover, vllm_plugin
from omni_deploy.integrations.guard import GuardedSpeakerModel, SessionFacade
from omni_deploy.integrations.speaker_rules import LOGGER_NAME, REPORT_MARK
from omni_deploy.speaker.inputs import synthetic_one
from tests.integration import code2wav_standin, vllm_loading
from tests.integration.test_other_models import (  # noqa: F401  (plugin, glm_dir: fixtures used below)
    _cosine,
    _cosyvoice3_components,
    _glm_session,
    _ming_embed,
    _ming_reference,
    _ming_wrapper,
    _ort,
    _records,
    _voice,
    glm_dir,
    plugin,
)

pytestmark = pytest.mark.vllm

DTYPES = list(vllm_loading.DTYPES)
RATES = (16000, 24000, 48000)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory, standin_onnx: Path) -> Path:
    return code2wav_standin.build_model_dir(tmp_path_factory.mktemp("loader") / "model", standin_onnx)


@pytest.fixture
def plugin_lines(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The plugin registered as in a fresh stage process (restored afterwards); its log lines."""
    for name in ("OMNI_DEPLOY_SPK_BACKEND", "MINICPMO_TOKEN2WAV_TRT", "OMNI_DEPLOY_SPK_REPORT_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OMNI_DEPLOY_SPK_ALLOW_CPU", "1")
    monkeypatch.setattr(report, "_warned", set())
    monkeypatch.setattr(import_hooks, "_hooks", {})
    monkeypatch.setattr(takeover, "_admitted", {})
    monkeypatch.delitem(c2w.__dict__, "__omni_deploy_patches__", raising=False)
    monkeypatch.setattr(c2w.MiniCPMO45Code2Wav, "_build_backend", c2w.MiniCPMO45Code2Wav._build_backend)
    monkeypatch.setattr(s3tokenizer, "load_model", code2wav_standin._small_s3_tokenizer)
    lines: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: lines.append(record.getMessage())  # type: ignore[method-assign]
    logger = logging.getLogger(LOGGER_NAME)
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        vllm_plugin.register()
        yield lines
    finally:
        logger.removeHandler(handler)


# vllm-omni 0.32 prepares its default prompt at the first forward to capture its graphs
# (`cfm_graph_precapture`, on by default; 0.30.0 reads no such key): off, so that the passes each
# test counts are its requests' voices.
STAGE_EXTRA = {"ref_audio_max_seconds": 2.0, "cfm_graph_precapture": False}


def load_code2wav(model_dir: Path, dtype: str, extra: dict[str, Any] | None = None) -> Any:
    config = vllm_loading.stage_config(
        vllm_loading.DTYPES[dtype], model=str(model_dir), revision=None, stage_id=2,
        stage_connector_config={"name": "SharedMemoryConnector",
                                "extra": {**STAGE_EXTRA, **(extra or {})}},
    )  # fmt: skip
    return vllm_loading.load_as_vllm(
        lambda vllm_config: c2w.MiniCPMO45Code2Wav(vllm_config=vllm_config), config
    )


def voices(epoch: int) -> list[tuple[torch.Tensor, int]]:
    return [
        (
            torch.from_numpy(
                synthetic_one(1.0 + 0.3 * i, seed=70 + i + 100 * epoch, sample_rate=rate).waveform
            ),
            rate,
        )
        for i, rate in enumerate(RATES)
    ]


def test_the_loader_helper_runs_vllms_own_load_model(model_dir: Path) -> None:
    """No plugin: what vLLM's loader leaves behind is vllm-omni's own stage, bf16 restored after."""
    seen: list[torch.dtype] = []
    original = c2w.MiniCPMO45Code2Wav.load_weights

    def spy(self: Any, weights: Any) -> Any:
        seen.append(torch.get_default_dtype())
        return original(self, weights)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(c2w.MiniCPMO45Code2Wav, "load_weights", spy)
        patch.setattr(s3tokenizer, "load_model", code2wav_standin._small_s3_tokenizer)
        before = torch.get_default_dtype()
        load_code2wav(model_dir, "bfloat16")
    assert seen == [torch.bfloat16] and torch.get_default_dtype() == before


@pytest.mark.parametrize("dtype", DTYPES)
def test_code2wav_takes_over_in_every_loader_dtype(
    model_dir: Path, plugin_lines: list[str], dtype: str
) -> None:
    code2wav = load_code2wav(model_dir, dtype)
    (line,) = [m for m in plugin_lines if m.startswith(REPORT_MARK)]
    assert "backend=cuda-torch" in line and "fallback" not in line and " prepare=batched " in line + " ", (
        plugin_lines
    )
    core = code2wav.backend._token2wav._core
    guard = core._spk_model
    assert isinstance(guard, GuardedSpeakerModel)
    state = code2wav._omni_deploy_refprep
    assert isinstance(state, refprep.HookState)
    audio = vllm_loading.runner_forward(code2wav, voices(0), "new")
    assert len(audio) == len(RATES) and all(a.numel() > 0 and bool(torch.isfinite(a).all()) for a in audio)
    assert state.passes == 1 and state.voices == len(RATES) and state.failures == 0
    vllm_loading.runner_forward(code2wav, voices(0), "again")  # the same voices: cached, no pass
    assert state.passes == 1 and guard.failures == 0 and not guard.retired


@pytest.mark.parametrize("dtype", DTYPES)
def test_code2wav_per_voice_path_in_every_loader_dtype(
    model_dir: Path, plugin_lines: list[str], dtype: str
) -> None:
    """token2wav_device_prepare: false: vllm-omni's own per-voice preparation calls the guarded
    encoder at request time, under inference mode."""
    code2wav = load_code2wav(model_dir, dtype, {"token2wav_device_prepare": False})
    (line,) = [m for m in plugin_lines if m.startswith(REPORT_MARK)]
    assert "backend=cuda-torch" in line and "prepare=per-voice(token2wav_device_prepare)" in line
    guard = code2wav.backend._token2wav._core._spk_model
    audio = vllm_loading.runner_forward(code2wav, voices(1), "per-voice")
    assert all(bool(torch.isfinite(a).all()) for a in audio)
    assert guard.calls == len(RATES) and guard.failures == 0


def _layout(code2wav: Any) -> dict[str, Any]:
    """What a take-over could leave behind on a stage: each object's instance attributes (name and
    type), the methods forward calls as they resolve, and every module's forward hooks."""
    backend = code2wav.backend
    objects = {"code2wav": code2wav, "backend": backend, "token2wav": backend._token2wav,
               "core": backend._token2wav._core}  # fmt: skip
    layout: dict[str, Any] = {
        name: sorted((key, type(value).__name__) for key, value in vars(obj).items())
        for name, obj in objects.items()
    }
    layout["methods"] = {
        "_parse_item": code2wav._parse_item.__func__,
        "prepare_prompt": backend.prepare_prompt.__func__,
        "_spk_model": type(objects["core"]._spk_model),
    }
    layout["hooks"] = sorted(
        (name, len(module._forward_hooks), len(module._forward_pre_hooks))
        for name, module in code2wav.named_modules()
    )
    return layout


needs_prefetch = pytest.mark.skipif(
    not hasattr(c2w.MiniCPMO45Code2Wav, "run_idle_prefetch"),
    reason="this vllm-omni's Code2Wav prepares references only in its forward (no prefetch before 0.32)",
)


def _prewarm(request_id: str, ref: torch.Tensor, rate: int) -> Any:
    from vllm_omni.core.sched.output import OmniRequestPrewarm

    return OmniRequestPrewarm(request_id=request_id, payload={"ref_audio": ref.float(), "ref_audio_sr": rate})


@needs_prefetch
@pytest.mark.parametrize("dtype", DTYPES)
def test_references_prefetched_together_are_one_pass_and_the_forward_prepares_nothing(
    model_dir: Path, plugin_lines: list[str], dtype: str
) -> None:
    """vllm-omni 0.32's prefetch at request arrival, as its runner drives it (`on_requests_added`,
    then `run_idle_prefetch` on an idle step, under inference mode): three references waiting
    (token2wav_ref_prefetch_max_waiters: 3) are prepared in one batched pass, with the tokens and
    mels vllm-omni's own per-voice preparation gives; the requests' forward then prepares nothing."""
    code2wav = load_code2wav(model_dir, dtype, {"token2wav_ref_prefetch_max_waiters": 3})
    (line,) = [m for m in plugin_lines if m.startswith(REPORT_MARK)]
    assert "backend=cuda-torch" in line and "layout=lazy-session+prefetch" in line, line
    assert " prefetch=batched" in line and " prepare=batched " in line, line
    state = code2wav._omni_deploy_refprep
    refs = voices(3)
    code2wav.on_requests_added([_prewarm(f"pre-{i}", ref, rate) for i, (ref, rate) in enumerate(refs)])
    assert len(code2wav._prefetch_queue) == len(refs)
    with vllm_loading.as_runner():
        assert code2wav.run_idle_prefetch() is True
    assert not code2wav._prefetch_queue and len(code2wav._prefetch_pins) == len(refs)
    assert state.passes == 1 and state.voices == len(refs) and state.prefetched == len(refs)
    backend = code2wav.backend
    for key, mine in list(backend._prompt_features.items()):
        backend._prompt_features.pop(key)
        with vllm_loading.as_runner():
            theirs = type(backend).prepare_prompt(backend, *key)  # vllm-omni's own, per voice
        assert torch.equal(mine.speech_tokens, theirs.speech_tokens), key
        torch.testing.assert_close(mine.mels, theirs.mels, rtol=1e-5, atol=2e-5)
        backend._prompt_features[key] = mine
    audio = vllm_loading.runner_forward(code2wav, refs, "pre")
    assert all(a.numel() > 0 and bool(torch.isfinite(a).all()) for a in audio)
    assert state.passes == 1 and state.voices == len(refs)  # nothing prepared in the forward


@needs_prefetch
def test_a_lone_prefetched_reference_is_prepared_before_its_forward(
    model_dir: Path, plugin_lines: list[str]
) -> None:
    """The default waiter limit (1): the idle step's phase prepares the one reference through the
    plugin's pass; its forward finds it ready."""
    code2wav = load_code2wav(model_dir, "bfloat16")
    state = code2wav._omni_deploy_refprep
    (ref, rate) = voices(4)[0]
    code2wav.on_requests_added([_prewarm("lone-0", ref, rate)])
    with vllm_loading.as_runner():
        assert code2wav.run_idle_prefetch() is True
    assert state.passes == 1 and state.prefetched == 1
    vllm_loading.runner_forward(code2wav, [(ref, rate)], "lone")
    assert state.passes == 1


@needs_prefetch
def test_prefetch_off_in_the_file_is_reported_as_off(model_dir: Path, plugin_lines: list[str]) -> None:
    load_code2wav(model_dir, "bfloat16", {"token2wav_ref_prefetch": False})
    (line,) = [m for m in plugin_lines if m.startswith(REPORT_MARK)]
    assert " prefetch=off" in line and "backend=cuda-torch" in line, line


def test_a_cuda_error_in_the_warm_up_leaves_the_stage_as_vllm_omni_built_it(
    model_dir: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A STAND-IN fault: the CPU cannot raise a real CUDA error, so the stage warm-up is replaced by
    one that reports what a real one reported on the H200 ("CUDA error: an illegal memory access",
    issue 29) with `cuda_error=True`. The take-over must then undo everything it did: the stage's
    instance attributes, the methods its forward calls, its module hooks and its speaker session are
    those of a stage vllm-omni built with no plugin at all, the refprep hook removed; the report names
    the CUDA error (not an ordinary fallback) and the next forward works on ONNX Runtime."""
    import onnxruntime

    from omni_deploy.integrations import warmup

    with monkeypatch.context() as plain:  # no plugin registered yet: vllm-omni's own stage
        plain.setattr(s3tokenizer, "load_model", code2wav_standin._small_s3_tokenizer)
        expected = _layout(load_code2wav(model_dir, "bfloat16"))
    # vllm-omni's own CPU session: built at load (0.30.0), or built at first use (0.32: empty slot).
    assert expected["methods"]["_spk_model"] in (onnxruntime.InferenceSession, type(None))

    attached: list[Any] = []
    real_attach = refprep.attach

    def spy(code2wav: Any, *args: Any, **kwargs: Any) -> Any:
        attached.append(code2wav)
        return real_attach(code2wav, *args, **kwargs)

    def stand_in(*args: Any, **kwargs: Any) -> warmup.StageWarmUp:
        return warmup.StageWarmUp(problem="stand-in: RuntimeError: CUDA error: an illegal memory access",
                                  cuda_error=True)  # fmt: skip

    plugin_lines: list[str] = request.getfixturevalue("plugin_lines")
    monkeypatch.setattr(refprep, "attach", spy)
    monkeypatch.setattr("omni_deploy.integrations.minicpmo.warm_stage", stand_in)
    code2wav = load_code2wav(model_dir, "bfloat16")
    assert attached == [code2wav]  # the hook was installed before the warm-up ...
    assert _layout(code2wav) == expected  # ... and everything the take-over did is undone
    assert "_parse_item" not in vars(code2wav) and "prepare_prompt" not in vars(code2wav.backend)
    assert "_run_prefetch_phase" not in vars(code2wav)
    assert not hasattr(code2wav, "_omni_deploy_refprep")
    (line,) = [m for m in plugin_lines if m.startswith(REPORT_MARK)]
    assert (
        "backend=cpu-onnxruntime" in line and "decided-by=fallback:_CUDA_error_in_the_stage_warm-up" in line
    )
    assert any("a CUDA error" in m and "CUDA context may be unusable" in m for m in plugin_lines)
    audio = vllm_loading.runner_forward(code2wav, voices(2), "after")
    assert all(bool(torch.isfinite(a).all()) for a in audio)
    after = _layout(code2wav)
    if expected["methods"]["_spk_model"] is type(None):  # 0.32 built its session at the first embedding
        assert after["methods"]["_spk_model"] is onnxruntime.InferenceSession
        after["methods"]["_spk_model"] = type(None)
        after["core"] = sorted(
            (key, "NoneType" if key == "_spk_model" else kind) for key, kind in after["core"]
        )
    assert after == expected  # the forward did not bring a hook back


# --- the other models, their CAM++ loaded under the loader's context ---------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
def test_cosyvoice3_processor_under_the_loader_context(
    plugin: Path,  # noqa: F811 (the fixture imported above)
    standin_onnx: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    dtype: str,
) -> None:
    from vllm_omni.model_executor.models.cosyvoice3 import cosyvoice3

    shutil.copy(standin_onnx, tmp_path / "campplus.onnx")
    monkeypatch.setenv("OMNI_DEPLOY_SPK_PROCESSOR", "cuda-torch")
    with set_default_torch_dtype(vllm_loading.DTYPES[dtype]), torch.device("cpu"):
        facade = _cosyvoice3_components(tmp_path, monkeypatch)["campplus_session"]
    assert isinstance(facade, SessionFacade)
    (record,) = _records(plugin)
    assert record["backend"] == "cuda-torch", record
    audio = (_voice(), 24000)
    # vllm-omni's own front end; it makes its embedding tensor in the default dtype, so the ONNX
    # Runtime reference runs in the same context.
    with set_default_torch_dtype(vllm_loading.DTYPES[dtype]), vllm_loading.as_runner():
        ours = cosyvoice3.extract_spk_embedding(audio, facade, "cpu")
        theirs = cosyvoice3.extract_spk_embedding(audio, _ort(tmp_path / "campplus.onnx"), "cpu")
    assert tuple(ours.shape) == (1, 192) and _cosine(ours.float(), theirs.float()) >= 0.9999
    assert facade.guard.failures == 0


@pytest.mark.parametrize("dtype", DTYPES)
def test_glm_tts_frontend_under_the_loader_context(
    plugin: Path,  # noqa: F811 (the fixture imported above)
    glm_dir: Path,  # noqa: F811
    dtype: str,
) -> None:
    with set_default_torch_dtype(vllm_loading.DTYPES[dtype]), torch.device("cpu"):
        session = _glm_session(glm_dir)
    assert isinstance(session, SessionFacade)
    feats = torch.randn(
        2, 120, 80, generator=torch.Generator(device="cpu").manual_seed(5), dtype=torch.float32
    )
    with set_default_torch_dtype(vllm_loading.DTYPES[dtype]), vllm_loading.as_runner():
        (out,) = session.run(None, {"input": feats.numpy()})
    assert out.shape == (2, 192) and session.guard.failures == 0
    (record,) = _records(plugin)
    assert record["backend"] == "cuda-torch", record


@pytest.mark.parametrize("dtype", DTYPES)
def test_ming_tts_extractor_under_the_loader_context(
    plugin: Path,  # noqa: F811 (the fixture imported above)
    standin_onnx: Path,
    tmp_path: Path,
    dtype: str,
) -> None:
    shutil.copy(standin_onnx, tmp_path / "campplus.onnx")
    wrapper = _ming_wrapper(tmp_path, {})
    voice = _voice(2.0)
    # vllm-omni's own extractor makes some tensors in the default dtype: its ONNX Runtime reference
    # runs in the same context.
    with set_default_torch_dtype(vllm_loading.DTYPES[dtype]), torch.device("cpu"), vllm_loading.as_runner():
        got = _ming_embed(wrapper, voice)
        expected = _ming_reference(tmp_path, voice)
    assert isinstance(wrapper._speaker_extractor._core.campplus_session, SessionFacade)
    assert _cosine(got.float(), expected.float()) >= 0.9999
    (record,) = _records(plugin)
    assert record["backend"] == "cuda-torch", record


# --- the other models in a spawned stage process (speech_stage.py), bf16 as a stage's default -------

SPEECH_ENV: dict[str, str | None] = {
    "OMNI_DEPLOY_SPK_BACKEND": None,
    "COSYVOICE3_TRT": None,
    "VLLM_PLUGINS": None,
    "OMNI_DEPLOY_SPK_PROCESSOR": None,
    "OMNI_DEPLOY_SPK_ALLOW_CPU": "1",
}
# CosyVoice3's processor and GLM-TTS's frontend are opt-in; Ming-TTS's extractor is on by default.
OPT_IN = {"cosyvoice3", "glm_tts"}


@pytest.fixture
def spawned(tmp_path: Path, standin_onnx: Path) -> Iterator[Any]:
    """Runs one model's process (multiprocessing spawn, as vllm-omni starts its stages); the process
    is stopped at teardown whatever happened."""
    import multiprocessing

    from tests.integration import speech_stage

    started: list[Any] = []

    def run(model: str) -> dict[str, Any]:
        folder = tmp_path / model
        (folder / "frontend").mkdir(parents=True)
        for target in (folder / "campplus.onnx", folder / "frontend" / "campplus.onnx"):
            shutil.copy(standin_onnx, target)
        result = tmp_path / f"{model}.json"
        env = {**SPEECH_ENV, "OMNI_DEPLOY_SPK_REPORT_DIR": str(tmp_path / "speaker")}
        if model in OPT_IN:
            env["OMNI_DEPLOY_SPK_PROCESSOR"] = "cuda-torch"
        process = multiprocessing.get_context("spawn").Process(
            target=speech_stage.run_model, args=(model, str(folder), env, str(result), "bfloat16")
        )
        started.append(process)
        process.start()
        process.join(300)
        assert process.exitcode == 0, f"{model} process exit code {process.exitcode}"
        outcome: dict[str, Any] = json.loads(result.read_text())
        outcome["records"] = _records(tmp_path / "speaker")
        return outcome

    yield run
    for process in started:
        if process.is_alive():
            process.kill()
            process.join(10)


@pytest.mark.parametrize("model", ["cosyvoice3", "glm_tts", "ming_tts"])
def test_the_other_models_take_over_in_a_spawned_bf16_process(spawned: Any, model: str) -> None:
    """The plugin loaded by vLLM's own load_general_plugins in a fresh spawned interpreter, the CAM++
    session built under the bf16 loader context: the plugin's session, no fallback, and the
    embedding ONNX Runtime gives in the same context."""
    outcome = spawned(model)
    assert outcome["session"] == "SessionFacade", outcome["log"]
    (record,) = outcome["records"]
    assert record["backend"] == "cuda-torch" and "fallback" not in json.dumps(record), record
    reports = [line for line in outcome["log"] if REPORT_MARK in line]
    assert reports and all("backend=cuda-torch" in line and "fallback" not in line for line in reports)
    assert outcome["fallback_calls"] == 0 and outcome["failures"] == 0 and outcome["guard_calls"] >= 1
    assert outcome["finite"] and outcome["dims"] == 192 and outcome["cosine"] >= 0.9999, outcome
    assert outcome["default_dtype"] == "torch.float32"  # the loader's context was left behind
