"""The vLLM plugin against the real vllm 0.30.0 and vllm-omni 0.30.0 code (their own test tier).

Runs where vllm and vllm-omni are installed (.ci/run builds that virtualenv; the main tier skips
it). MiniCPM-o's real Code2Wav cannot build its backend here (it needs the model's flow and HiFT
weights), so `_build_backend` is replaced by a stand-in that gives the real Code2Wav class a real
`StepAudio2Token2WavCore` whose CAM++ is an ONNX Runtime session configured as vllm-omni configures
it. Everything the plugin touches (the class, the core, `_forward_spk_embedding`) is vllm-omni's.
The CPU stands in for CUDA (OMNI_DEPLOY_SPK_ALLOW_CPU=1). test_code2wav_stage.py runs the real
`_build_backend` in a spawned stage process.
"""

from __future__ import annotations

import importlib.metadata
import logging
import shutil
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

pytest.importorskip("vllm_omni")
pytest.importorskip("vllm")

import onnxruntime
import torch
from vllm_omni.model_executor.models.minicpmo_4_5 import minicpmo_4_5_code2wav as c2w
from vllm_omni.model_executor.models.step_audio2 import step_audio2_token2wav as step

from omni_deploy.integrations import import_hooks, minicpmo, report, takeover, vllm_plugin
from omni_deploy.integrations.guard import GuardedSpeakerModel
from omni_deploy.integrations.speaker_rules import LOGGER_NAME, REPORT_MARK
from omni_deploy.integrations.targets import BY_MODEL, shape_problems
from omni_deploy.speaker.encoder import SpeakerEncoder

pytestmark = pytest.mark.vllm


def _ort_session(path: Path) -> onnxruntime.InferenceSession:
    # As StepAudio2Token2WavCore._ensure_models_loaded builds it in vllm-omni 0.30.0.
    option = onnxruntime.SessionOptions()
    option.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
    option.intra_op_num_threads = 1
    return onnxruntime.InferenceSession(str(path), sess_options=option, providers=["CPUExecutionProvider"])


@pytest.fixture
def model_dir(tmp_path: Path, standin_onnx: Path) -> Path:
    shutil.copy(standin_onnx, tmp_path / "campplus.onnx")
    return tmp_path


def _core(model_dir: Path) -> Any:
    core = step.StepAudio2Token2WavCore(str(model_dir), device="cpu")
    core._spk_model = _ort_session(model_dir / "campplus.onnx")
    core._models_loaded = True  # the rest of the load (flow, HiFT, tokenizer) needs the model's assets
    return core


@pytest.fixture
def plugin(monkeypatch: pytest.MonkeyPatch) -> SimpleNamespace:
    """The Code2Wav class with a stand-in backend builder; restored after the test."""
    state = SimpleNamespace(core=None)

    def build_backend(self: Any) -> None:  # stand-in for building flow/HiFT/CAM++ from the model's assets
        object.__setattr__(self, "backend", SimpleNamespace(_token2wav=SimpleNamespace(_core=state.core)))

    monkeypatch.setattr(c2w.MiniCPMO45Code2Wav, "_build_backend", build_backend)
    monkeypatch.delenv("OMNI_DEPLOY_SPK_BACKEND", raising=False)
    monkeypatch.delenv("MINICPMO_TOKEN2WAV_TRT", raising=False)
    monkeypatch.setenv("OMNI_DEPLOY_SPK_ALLOW_CPU", "1")
    monkeypatch.setattr(report, "_warned", set())
    # A fresh process as far as the plugin knows: no hooks recorded, nothing admitted or patched yet.
    monkeypatch.setattr(import_hooks, "_hooks", {})
    monkeypatch.setattr(takeover, "_admitted", {})
    monkeypatch.delitem(c2w.__dict__, "__omni_deploy_patches__", raising=False)
    return state


@pytest.fixture
def messages() -> list[str]:
    records: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: records.append(record.getMessage())  # type: ignore[method-assign]
    logger = logging.getLogger(LOGGER_NAME)
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    yield records
    logger.removeHandler(handler)


def _code2wav(extra: dict[str, Any] | None = None) -> Any:
    """The real Code2Wav class, carrying only the config vllm-omni's `_extra_config` reads."""
    code2wav = c2w.MiniCPMO45Code2Wav.__new__(c2w.MiniCPMO45Code2Wav)
    model_config = SimpleNamespace(stage_connector_config={"name": "x", "extra": extra or {}}, stage_id=2)
    object.__setattr__(code2wav, "vllm_config", SimpleNamespace(model_config=model_config))
    return code2wav


def _encoder(core: Any) -> SpeakerEncoder | None:
    model = core._spk_model
    return model.encoder if isinstance(model, GuardedSpeakerModel) else None


def _features(frames: int = 300) -> torch.Tensor:
    feats = torch.randn(frames, 80, generator=torch.Generator().manual_seed(frames))
    return feats - feats.mean(0, keepdim=True)


def _normalised(v: torch.Tensor) -> np.ndarray:
    a = v.detach().cpu().numpy().reshape(-1)
    return a / np.linalg.norm(a)


def test_the_entry_point_is_discovered_by_vllm(plugin: SimpleNamespace) -> None:
    import vllm.plugins

    names = [e.name for e in importlib.metadata.entry_points(group="vllm.general_plugins")]
    assert "omni_deploy_campplus" in names
    vllm.plugins.plugins_loaded = False
    vllm.plugins.load_general_plugins()
    assert getattr(c2w.MiniCPMO45Code2Wav._build_backend, "_omni_deploy_campplus", False)


def test_active_plugin_gives_minicpmo_the_encoder_with_the_same_embedding(
    plugin: SimpleNamespace, model_dir: Path, messages: list[str]
) -> None:
    plugin.core = _core(model_dir)
    feat = _features()
    before = plugin.core._forward_spk_embedding(feat)  # vllm-omni's own ONNX Runtime path
    vllm_plugin.register()
    code2wav = _code2wav()
    code2wav._build_backend()
    assert isinstance(_encoder(plugin.core), SpeakerEncoder)
    after = plugin.core._forward_spk_embedding(feat)  # the same vllm-omni method, now through the encoder
    assert tuple(after.shape) == (1, 192) and after.device == plugin.core.device
    assert np.abs(_normalised(after) - _normalised(before)).max() <= 1e-5
    (line,) = [m for m in messages if m.startswith(REPORT_MARK)]
    assert "stage=2 backend=cuda-torch device=cpu" in line and "replaced=onnxruntime-cpu" in line
    assert "decided-by=token2wav_device_spk(default)" in line and "campplus.onnx" in line


def test_the_encoder_falls_back_per_call_then_for_good(
    plugin: SimpleNamespace, model_dir: Path, messages: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    plugin.core = _core(model_dir)
    feat = _features()
    expected = _normalised(plugin.core._forward_spk_embedding(feat))
    vllm_plugin.register()
    _code2wav()._build_backend()
    guard = plugin.core._spk_model
    assert isinstance(guard, GuardedSpeakerModel) and guard.limit == 3

    def broken(feat: torch.Tensor) -> torch.Tensor:
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    monkeypatch.setattr(guard, "encoder", broken)
    for calls in (1, 2):
        out = plugin.core._forward_spk_embedding(feat)  # answered by the ONNX Runtime session kept
        assert np.abs(_normalised(out) - expected).max() <= 1e-6
        assert guard.failures == calls and guard.fallback_calls == calls and not guard.retired
    assert sum("this call falls back" in m for m in messages) == 1  # rate-limited
    plugin.core._forward_spk_embedding(feat)
    assert guard.retired and isinstance(plugin.core._spk_model, onnxruntime.InferenceSession)
    assert sum("switched to ONNX Runtime on the CPU for good" in m for m in messages) == 1
    assert np.abs(_normalised(plugin.core._forward_spk_embedding(feat)) - expected).max() <= 1e-6


def test_a_success_resets_the_consecutive_count(
    plugin: SimpleNamespace, model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OMNI_DEPLOY_SPK_MAX_FAILURES", "2")
    plugin.core = _core(model_dir)
    vllm_plugin.register()
    _code2wav()._build_backend()
    guard = plugin.core._spk_model
    working = guard.encoder
    state = {"fail": True}

    def flaky(feat: torch.Tensor) -> torch.Tensor:
        if state["fail"]:
            raise torch.OutOfMemoryError("CUDA out of memory")
        return working(feat)

    monkeypatch.setattr(guard, "encoder", flaky)
    plugin.core._forward_spk_embedding(_features())
    state["fail"] = False
    plugin.core._forward_spk_embedding(_features())
    state["fail"] = True
    plugin.core._forward_spk_embedding(_features())
    assert guard.failures == 2 and guard.consecutive == 1 and not guard.retired


def test_device_spk_false_in_the_stage_config_keeps_onnx_runtime(
    plugin: SimpleNamespace, model_dir: Path, messages: list[str]
) -> None:
    plugin.core = _core(model_dir)
    vllm_plugin.register()
    _code2wav({"token2wav_device_spk": False})._build_backend()
    assert isinstance(plugin.core._spk_model, onnxruntime.InferenceSession)
    (line,) = [m for m in messages if m.startswith(REPORT_MARK)]
    assert "backend=cpu-onnxruntime" in line and "decided-by=token2wav_device_spk" in line


def test_the_environment_override_beats_the_file(
    plugin: SimpleNamespace, model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OMNI_DEPLOY_SPK_BACKEND", "cpu-onnxruntime")
    plugin.core = _core(model_dir)
    vllm_plugin.register()
    _code2wav({"token2wav_device_spk": True})._build_backend()
    assert isinstance(plugin.core._spk_model, onnxruntime.InferenceSession)


def test_tf32_comes_from_the_stage_config(
    plugin: SimpleNamespace, model_dir: Path, messages: list[str]
) -> None:
    plugin.core = _core(model_dir)
    vllm_plugin.register()
    _code2wav({"token2wav_allow_tf32": False})._build_backend()
    assert _encoder(plugin.core) is not None
    (line,) = [m for m in messages if m.startswith(REPORT_MARK)]
    assert "tf32=off:token2wav_allow_tf32 " in line


def test_tensorrt_selected_is_left_alone(plugin: SimpleNamespace, model_dir: Path) -> None:
    plugin.core = _core(model_dir)
    trt = lambda feat: torch.zeros(1, 192)  # noqa: E731 - what enable_trt_spk_embedding installs is a callable
    plugin.core._spk_model = trt
    vllm_plugin.register()
    _code2wav()._build_backend()
    assert plugin.core._spk_model is trt


def test_a_step_audio2_core_is_untouched(plugin: SimpleNamespace, model_dir: Path) -> None:
    plugin.core = _core(model_dir)
    other = _core(model_dir)  # Step-Audio2 builds its own core; nothing routes it through MiniCPM-o
    vllm_plugin.register()
    _code2wav()._build_backend()
    assert isinstance(_encoder(plugin.core), SpeakerEncoder)
    assert isinstance(other._spk_model, onnxruntime.InferenceSession)


def test_a_broken_onnx_file_keeps_onnx_runtime_with_a_warning(
    plugin: SimpleNamespace, model_dir: Path, messages: list[str]
) -> None:
    plugin.core = _core(model_dir)  # the session loaded the good file
    data = (model_dir / "campplus.onnx").read_bytes()
    (model_dir / "campplus.onnx").write_bytes(data[: len(data) // 3])
    vllm_plugin.register()
    _code2wav()._build_backend()
    assert isinstance(plugin.core._spk_model, onnxruntime.InferenceSession)
    assert any("cannot load" in m and "keeping ONNX Runtime on the CPU" in m for m in messages)


def test_cuda_is_required_unless_forced(
    plugin: SimpleNamespace, model_dir: Path, monkeypatch: pytest.MonkeyPatch, messages: list[str]
) -> None:
    monkeypatch.delenv("OMNI_DEPLOY_SPK_ALLOW_CPU")
    monkeypatch.setenv("OMNI_DEPLOY_SPK_BACKEND", "cuda-torch")  # asked for by name: a warning
    plugin.core = _core(model_dir)
    vllm_plugin.register()
    _code2wav()._build_backend()
    assert isinstance(plugin.core._spk_model, onnxruntime.InferenceSession)
    assert any("not CUDA" in m for m in messages)


def test_installing_twice_is_harmless(plugin: SimpleNamespace) -> None:
    vllm_plugin.register()
    first = c2w.MiniCPMO45Code2Wav._build_backend
    vllm_plugin.register()
    assert c2w.MiniCPMO45Code2Wav._build_backend is first
    assert not getattr(first.__wrapped__, "_omni_deploy_campplus", False)


def test_stands_aside_when_vllm_omni_reads_device_spk(
    plugin: SimpleNamespace, model_dir: Path, monkeypatch: pytest.MonkeyPatch, messages: list[str]
) -> None:
    monkeypatch.setattr(minicpmo, "reads_device_spk_itself", lambda module: True)
    plugin.core = _core(model_dir)
    vllm_plugin.register()
    vllm_plugin.register()
    _code2wav()._build_backend()
    assert isinstance(plugin.core._spk_model, onnxruntime.InferenceSession)
    assert sum("stands aside" in m for m in messages) == 1
    (line,) = [m for m in messages if m.startswith(REPORT_MARK)]
    assert "decided-by=vllm-omni" in line


def test_an_incompatible_vllm_omni_is_refused(
    plugin: SimpleNamespace, monkeypatch: pytest.MonkeyPatch, messages: list[str]
) -> None:
    monkeypatch.setattr(c2w.MiniCPMO45Code2Wav, "_build_backend", lambda self, extra: None)
    vllm_plugin.register()
    assert any("incompatible vllm-omni" in m for m in messages)
    assert not getattr(c2w.MiniCPMO45Code2Wav._build_backend, "_omni_deploy_campplus", False)


def test_the_real_classes_pass_the_compatibility_check() -> None:
    assert minicpmo.build_backend_problem(c2w.MiniCPMO45Code2Wav) is None
    assert shape_problems(BY_MODEL["minicpmo_4_5"], takeover.module_source) == []
    assert minicpmo.reads_device_spk_itself(c2w) is False


def test_an_encoder_that_fails_its_warm_up_keeps_onnx_runtime(
    plugin: SimpleNamespace, model_dir: Path, messages: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import omni_deploy.speaker

    # Loads, but answers zeros: caught by the warm-up embedding before any request is served.
    monkeypatch.setattr(omni_deploy.speaker, "load_encoder", lambda *a, **k: lambda feat: torch.zeros(1, 192))
    plugin.core = _core(model_dir)
    vllm_plugin.register()
    _code2wav()._build_backend()
    assert isinstance(plugin.core._spk_model, onnxruntime.InferenceSession)
    assert any("failed its warm-up" in m and "norm 0" in m for m in messages)
    (line,) = [m for m in messages if m.startswith(REPORT_MARK)]
    assert "backend=cpu-onnxruntime" in line and "decided-by=fallback:_encoder_warm-up_failed" in line
