"""The CUDA CAM++ path for CosyVoice3, GLM-TTS and Ming-TTS, through vllm-omni 0.30.0's own code.

Each case runs vllm-omni's real function that loads the model's CAM++ session
(`CosyVoice3MultiModalProcessor._build_runtime_components`, GLM-TTS's `load_voice_clone_frontend`,
Ming-TTS's `_load_speaker_extractor` via `_resolve_speaker_embeddings`) after the plugin's hooks,
then vllm-omni's real embedding function on a reference voice, and compares the embedding with the
one vllm-omni's ONNX Runtime session gives. Stand-ins: campplus.onnx (real structure, random
weights), CosyVoice3's text tokenizer and GLM-TTS's WhisperVQ speech tokenizer (not on the speaker
path), and Ming's model wrapper (the attributes its extractor reads). The CPU stands in for CUDA
(OMNI_DEPLOY_SPK_ALLOW_CPU=1).
"""

from __future__ import annotations

import json
import shutil
import threading
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import numpy as np
import pytest

pytest.importorskip("vllm_omni")
pytest.importorskip("vllm")

import onnxruntime
import torch
from vllm_omni.model_executor.models.cosyvoice3 import cosyvoice3
from vllm_omni.model_executor.models.glm_tts import glm_tts
from vllm_omni.model_executor.models.ming_tts import speaker_extractor as ming

from omni_deploy.integrations import import_hooks, report, takeover, vllm_plugin
from omni_deploy.integrations.guard import GuardedSpeakerModel, SessionFacade

pytestmark = pytest.mark.vllm

PATCHED: list[tuple[Any, str]] = [
    (cosyvoice3.CosyVoice3MultiModalProcessor, "_build_runtime_components"),
    (glm_tts, "load_voice_clone_frontend"),
    (ming, "_load_speaker_extractor"),
]


@pytest.fixture
def plugin(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A fresh process as far as the plugin knows, patched by `register()`; restored afterwards.
    Returns the report directory."""
    for owner, name in PATCHED:
        monkeypatch.setattr(owner, name, getattr(owner, name))  # restored at teardown
    for module in (cosyvoice3, glm_tts, ming):
        monkeypatch.delitem(module.__dict__, "__omni_deploy_patches__", raising=False)
    monkeypatch.setattr(import_hooks, "_hooks", {})
    monkeypatch.setattr(takeover, "_admitted", {})
    monkeypatch.setattr(takeover, "_guards", {})
    monkeypatch.setattr(report, "_warned", set())
    for name in ("OMNI_DEPLOY_SPK_BACKEND", "OMNI_DEPLOY_SPK_PROCESSOR", "COSYVOICE3_TRT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OMNI_DEPLOY_SPK_ALLOW_CPU", "1")
    monkeypatch.setenv("OMNI_DEPLOY_SPK_REPORT_DIR", str(tmp_path / "speaker"))
    vllm_plugin.register()
    return tmp_path / "speaker"


def _voice(seconds: float = 1.5, sample_rate: int = 24000, seed: int = 4) -> np.ndarray:
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * sample_rate)) / sample_rate
    return (0.3 * np.sin(2 * np.pi * 170 * t) + 0.05 * rng.standard_normal(t.shape)).astype(np.float32)


def _cosine(a: Any, b: Any) -> float:
    x = np.asarray(a, dtype=np.float64).reshape(-1)
    y = np.asarray(b, dtype=np.float64).reshape(-1)
    return float(x @ y / (np.linalg.norm(x) * np.linalg.norm(y)))


def _ort(path: Path) -> onnxruntime.InferenceSession:
    return onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])


def _records(directory: Path) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted(directory.glob("*.json"))]


# --- CosyVoice3: the multimodal processor in the API server (opt-in) ---------------------------------


def _cosyvoice3_components(model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    # The text tokenizer is not on the speaker path: a stand-in.
    monkeypatch.setattr(cosyvoice3, "get_qwen_tokenizer", lambda **kwargs: "tokenizer stand-in")
    config = SimpleNamespace(
        qwen_pretrain_path="tokenizer", skip_special_tokens=True, version="cosyvoice3",
        campplus_onxx_path="campplus.onnx", feat_extractor={},
    )  # fmt: skip
    processor = cosyvoice3.CosyVoice3MultiModalProcessor.__new__(cosyvoice3.CosyVoice3MultiModalProcessor)
    return processor._build_runtime_components(str(model_dir), config)


def test_cosyvoice3_stays_on_onnx_runtime_unless_opted_in(
    plugin: Path, standin_onnx: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shutil.copy(standin_onnx, tmp_path / "campplus.onnx")
    monkeypatch.setenv("COSYVOICE3_TRT", "0")  # so that vllm-omni itself does not ask for CUDA either
    monkeypatch.setattr(torch.cuda, "is_available", _no_cuda_call)  # opt-in: CUDA is not even asked
    components = _cosyvoice3_components(tmp_path, monkeypatch)
    assert isinstance(components["campplus_session"], onnxruntime.InferenceSession)
    (record,) = _records(plugin)
    assert record["model"] == "cosyvoice3" and record["stage"] == "processor"
    assert (
        record["backend"] == "cpu-onnxruntime"
        and record["why"] == "env OMNI_DEPLOY_SPK_PROCESSOR (unset: opt-in)"
    )


def _no_cuda_call() -> bool:
    raise AssertionError("the processor asked for CUDA without being opted in")


def test_cosyvoice3_opted_in_gets_the_encoder_with_onnx_runtime_parity(
    plugin: Path, standin_onnx: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shutil.copy(standin_onnx, tmp_path / "campplus.onnx")
    monkeypatch.setenv("OMNI_DEPLOY_SPK_PROCESSOR", "cuda-torch")
    components = _cosyvoice3_components(tmp_path, monkeypatch)
    facade = components["campplus_session"]
    assert isinstance(facade, SessionFacade) and components["campplus_trt"] is None
    audio = (_voice(), 24000)  # as the processor hands it on: (waveform, sample rate)
    ours = cosyvoice3.extract_spk_embedding(audio, facade, "cpu")  # vllm-omni's own front end
    theirs = cosyvoice3.extract_spk_embedding(audio, _ort(tmp_path / "campplus.onnx"), "cpu")
    assert tuple(ours.shape) == (1, 192) and _cosine(ours, theirs) >= 0.9999
    assert facade.guard.calls == 1 and facade.guard.failures == 0
    (record,) = _records(plugin)
    assert record["backend"] == "cuda-torch" and record["replaced"] == "onnxruntime-cpu"
    assert (
        record["why"] == "env OMNI_DEPLOY_SPK_PROCESSOR"
        and record["vllm_omni"] == takeover.vllm_omni_version()
    )


# --- GLM-TTS: the voice-clone processor in the API server (opt-in) -----------------------------------


@pytest.fixture
def glm_dir(plugin: Path, standin_onnx: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A GLM-TTS model folder with its campplus.onnx, the processor opted in."""
    (tmp_path / "frontend").mkdir()
    shutil.copy(standin_onnx, tmp_path / "frontend" / "campplus.onnx")
    monkeypatch.setenv("OMNI_DEPLOY_SPK_PROCESSOR", "cuda-torch")
    return tmp_path


def _glm_session(model_dir: Path) -> Any:
    _, session = glm_tts.load_voice_clone_frontend(
        str(model_dir),
        torch.device("cpu"),
        speech_tokenizer_cache=("WhisperVQ stand-in", None),  # not on the speaker path
        campplus_cache=None,
        campplus_path=str(model_dir / "frontend" / "campplus.onnx"),
    )
    return session


def test_glm_tts_opted_in_gets_the_encoder_thread_safe_with_parity(plugin: Path, glm_dir: Path) -> None:
    session = _glm_session(glm_dir)
    assert isinstance(session, SessionFacade)
    # The processor hands its session back as the cache: decided once, nothing rebuilt.
    _, again = glm_tts.load_voice_clone_frontend(
        str(glm_dir), torch.device("cpu"), speech_tokenizer_cache=("x", None), campplus_cache=session
    )
    assert again is session
    reference = _ort(glm_dir / "frontend" / "campplus.onnx")
    voices = [torch.from_numpy(_voice(1.0 + 0.25 * i, seed=i)) for i in range(6)]
    expected = [glm_tts.extract_spk_embedding(v, 24000, reference) for v in voices]
    results: dict[int, Any] = {}

    def request(i: int) -> None:
        results[i] = glm_tts.extract_spk_embedding(voices[i % 6], 24000, session)

    threads = [threading.Thread(target=request, args=(i,)) for i in range(24)]  # processors share it
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 24
    assert min(_cosine(results[i], expected[i % 6]) for i in results) >= 0.9999
    assert session.guard.calls == 24 and session.guard.failures == 0
    (record,) = _records(plugin)
    assert record["model"] == "glm_tts" and record["backend"] == "cuda-torch"


def test_glm_tts_a_bad_embedding_is_answered_by_onnx_runtime(
    plugin: Path, glm_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = _glm_session(glm_dir)
    guard: GuardedSpeakerModel = session.guard
    monkeypatch.setattr(guard, "encoder", lambda feat: torch.full((1, 192), float("nan")))
    voice = torch.from_numpy(_voice())
    got = glm_tts.extract_spk_embedding(voice, 24000, session)
    want = glm_tts.extract_spk_embedding(voice, 24000, _ort(glm_dir / "frontend" / "campplus.onnx"))
    assert np.isfinite(got).all() and _cosine(got, want) >= 0.999999
    assert guard.fallback_calls == 1 and "non-finite" in str(guard.last_problem)


def test_glm_tts_with_a_gpu_session_is_left_alone(
    plugin: Path, glm_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # onnxruntime-gpu's CUDA provider: vllm-omni already runs CAM++ on the GPU.
    monkeypatch.setattr(
        onnxruntime.InferenceSession,
        "get_providers",
        lambda self: ["CUDAExecutionProvider", "CPUExecutionProvider"],
    )
    assert isinstance(_glm_session(glm_dir), onnxruntime.InferenceSession)
    (record,) = _records(plugin)
    assert record["backend"] == "onnxruntime-cuda" and record["why"] == "vllm-omni"


# --- Ming-TTS: the speaker extractor in its stage-0 process (on by default) ---------------------------


def _ming_wrapper(model_dir: Path, extra: dict[str, Any]) -> SimpleNamespace:
    from vllm_omni.utils.speaker_cache import get_speaker_cache

    model_config = SimpleNamespace(
        model=str(model_dir),
        stage_id=0,
        stage_connector_config={"name": "SharedMemoryConnector", "extra": extra},
    )
    return SimpleNamespace(
        vllm_config=SimpleNamespace(model_config=model_config),
        ming_config=SimpleNamespace(sample_rate=16000),
        _speaker_cache=get_speaker_cache(),
    )


def _ming_embed(wrapper: SimpleNamespace, voice: np.ndarray) -> torch.Tensor:
    from vllm_omni.model_executor.models.ming_tts.constants import (
        KEY_SPEAKER_SAMPLE_RATES,
        KEY_SPEAKER_WAVEFORM,
    )

    info = {KEY_SPEAKER_WAVEFORM: torch.from_numpy(voice), KEY_SPEAKER_SAMPLE_RATES: [24000]}
    (embedding,) = ming._resolve_speaker_embeddings(wrapper, info)
    return embedding


def _ming_reference(model_dir: Path, voice: np.ndarray) -> torch.Tensor:
    from vllm_omni.model_executor.models.common.ming.speaker_extractor import SpeakerEmbeddingExtractor

    return SpeakerEmbeddingExtractor(str(model_dir)).extract_from_waveform(torch.from_numpy(voice), 24000)


@pytest.mark.parametrize("extra", [{}, {"latent_chunk_size": 25}])
def test_ming_tts_gets_the_encoder_by_default_with_parity(
    plugin: Path, standin_onnx: Path, tmp_path: Path, extra: dict[str, Any]
) -> None:
    shutil.copy(standin_onnx, tmp_path / "campplus.onnx")
    wrapper = _ming_wrapper(tmp_path, extra)
    voice = _voice(2.0)
    got = _ming_embed(wrapper, voice)
    assert isinstance(wrapper._speaker_extractor._core.campplus_session, SessionFacade)
    assert tuple(got.shape) == (192,) and _cosine(got, _ming_reference(tmp_path, voice)) >= 0.9999
    (record,) = _records(plugin)
    assert record["model"] == "ming_tts" and record["stage"] == "0" and record["backend"] == "cuda-torch"
    assert record["why"] == "ming_device_spk (default)"


def test_ming_tts_device_spk_false_in_its_connector_keeps_onnx_runtime(
    plugin: Path, standin_onnx: Path, tmp_path: Path
) -> None:
    shutil.copy(standin_onnx, tmp_path / "campplus.onnx")
    wrapper = _ming_wrapper(tmp_path, {"ming_device_spk": False})
    _ming_embed(wrapper, _voice())
    assert isinstance(wrapper._speaker_extractor._core.campplus_session, onnxruntime.InferenceSession)
    (record,) = _records(plugin)
    assert record["backend"] == "cpu-onnxruntime" and record["why"] == "ming_device_spk"


def test_every_hooked_module_was_patched(plugin: Path) -> None:
    modules: list[ModuleType] = [cosyvoice3, glm_tts, ming]
    for module in modules:
        assert any(name.startswith("omni-deploy CAM++") for name in import_hooks.applied(module)), module
