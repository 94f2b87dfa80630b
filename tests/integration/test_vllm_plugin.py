"""The vLLM plugin against the real vllm 0.30.0 and vllm-omni 0.30.0 code (their own test tier).

Runs where vllm and vllm-omni are installed (.ci/run builds that virtualenv; the main tier skips
it). MiniCPM-o's real Code2Wav cannot build its backend here (it needs the model's flow and HiFT
weights), so `_build_backend` is replaced by a stand-in that gives the real Code2Wav class a real
`StepAudio2Token2WavCore` whose CAM++ is an ONNX Runtime session configured as vllm-omni configures
it. Everything the plugin touches (the class, the core, `_forward_spk_embedding`) is vllm-omni's.
The CPU stands in for CUDA (OMNI_DEPLOY_SPK_ALLOW_CPU=1).
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

from omni_deploy.integrations import vllm_plugin
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
    monkeypatch.setenv("OMNI_DEPLOY_SPK_BACKEND", "cuda-torch")
    monkeypatch.setenv("OMNI_DEPLOY_SPK_ALLOW_CPU", "1")
    monkeypatch.setattr(vllm_plugin, "_warned", set())
    return state


@pytest.fixture
def messages() -> list[str]:
    records: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: records.append(record.getMessage())  # type: ignore[method-assign]
    logger = logging.getLogger("omni_deploy.vllm_plugin")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    yield records
    logger.removeHandler(handler)


def _code2wav() -> Any:
    return c2w.MiniCPMO45Code2Wav.__new__(c2w.MiniCPMO45Code2Wav)


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
    assert isinstance(plugin.core._spk_model, SpeakerEncoder)
    after = plugin.core._forward_spk_embedding(feat)  # the same vllm-omni method, now through the encoder
    assert tuple(after.shape) == (1, 192) and after.device == plugin.core.device
    assert np.abs(_normalised(after) - _normalised(before)).max() <= 1e-5
    assert any("speaker embedding runs in torch on cpu" in m for m in messages)


def test_inactive_plugin_changes_nothing(
    plugin: SimpleNamespace, model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OMNI_DEPLOY_SPK_BACKEND")
    plugin.core = _core(model_dir)
    vllm_plugin.register()
    assert not getattr(c2w.MiniCPMO45Code2Wav._build_backend, "_omni_deploy_campplus", False)
    _code2wav()._build_backend()
    assert isinstance(plugin.core._spk_model, onnxruntime.InferenceSession)


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
    assert isinstance(plugin.core._spk_model, SpeakerEncoder)
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
    plugin: SimpleNamespace, monkeypatch: pytest.MonkeyPatch, messages: list[str]
) -> None:
    monkeypatch.setattr(vllm_plugin, "reads_device_spk_itself", lambda module: True)
    vllm_plugin.register()
    vllm_plugin.register()
    assert not getattr(c2w.MiniCPMO45Code2Wav._build_backend, "_omni_deploy_campplus", False)
    assert sum("standing aside" in m for m in messages) == 1


def test_an_incompatible_vllm_omni_is_refused(
    plugin: SimpleNamespace, monkeypatch: pytest.MonkeyPatch, messages: list[str]
) -> None:
    monkeypatch.setattr(c2w.MiniCPMO45Code2Wav, "_build_backend", lambda self, extra: None)
    vllm_plugin.register()
    assert any("incompatible vllm-omni" in m for m in messages)
    assert not getattr(c2w.MiniCPMO45Code2Wav._build_backend, "_omni_deploy_campplus", False)


def test_the_real_classes_pass_the_compatibility_check() -> None:
    assert vllm_plugin.compatibility_problem(c2w.MiniCPMO45Code2Wav, step.StepAudio2Token2WavCore) is None
    assert vllm_plugin.reads_device_spk_itself(c2w) is False
