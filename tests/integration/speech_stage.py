"""A CosyVoice3, GLM-TTS or Ming-TTS process started the way vllm-omni 0.30.0 starts its stages.

`run_model` is the target of a `multiprocessing` spawn (a fresh interpreter, as vllm-omni forces for
its stages): it loads vLLM's general plugins through the real `load_general_plugins` (entry points,
the VLLM_PLUGINS allowlist), then, under the loader's context (`set_default_torch_dtype(dtype)` and
`torch.device("cpu")`), runs vllm-omni's own function that loads the model's CAM++ session, embeds a
reference voice with vllm-omni's own embedding function and again with a plain ONNX Runtime session
in the same context, and writes what it saw as JSON. Stand-ins as in test_other_models.py:
campplus.onnx (real structure, random weights), CosyVoice3's text tokenizer, GLM-TTS's WhisperVQ
speech tokenizer and Ming's model wrapper; the CPU stands in for CUDA (OMNI_DEPLOY_SPK_ALLOW_CPU=1).
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import torch

MODELS = ("cosyvoice3", "glm_tts", "ming_tts")


def run_model(model: str, model_dir: str, env: dict[str, str | None], result: str, dtype: str) -> None:
    for name, value in env.items():  # None: not set in the stage process
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    import onnxruntime
    import vllm.plugins
    from vllm.utils.torch_utils import set_default_torch_dtype

    from tests.integration import code2wav_standin, vllm_loading

    vllm_loading.configure_vllm_logging()  # the `vllm` logger tree as in a stage process
    vllm.plugins.load_general_plugins()  # before the model's modules are imported, as in a stage

    records = code2wav_standin._Records()
    logging.getLogger("vllm").addHandler(records)
    folder = Path(model_dir)
    voice = _voice()
    reference = onnxruntime.InferenceSession(
        str(folder / "campplus.onnx"), providers=["CPUExecutionProvider"]
    )
    context = vllm_loading.DTYPES[dtype]
    with set_default_torch_dtype(context), torch.device("cpu"):
        session, embed = _LOADERS[model](folder)
    with set_default_torch_dtype(context), torch.device("cpu"), vllm_loading.as_runner():
        ours = embed(session, voice)
        theirs = embed(reference, voice)
    guard = getattr(session, "guard", None)
    x, y = (np.asarray(t.float() if isinstance(t, torch.Tensor) else t, dtype=np.float64).reshape(-1)
            for t in (ours, theirs))  # fmt: skip
    Path(result).write_text(
        json.dumps(
            {
                "session": type(session).__name__,
                "cosine": float(x @ y / (np.linalg.norm(x) * np.linalg.norm(y))),
                "finite": bool(np.isfinite(x).all()),
                "dims": int(x.size),
                "guard_calls": getattr(guard, "calls", None),
                "fallback_calls": getattr(guard, "fallback_calls", None),
                "failures": getattr(guard, "failures", None),
                "log": records.lines,
                "default_dtype": str(torch.get_default_dtype()),
            }
        )
    )


def _voice(seconds: float = 1.5, sample_rate: int = 24000, seed: int = 4) -> np.ndarray:
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * sample_rate)) / sample_rate
    return (0.3 * np.sin(2 * np.pi * 170 * t) + 0.05 * rng.standard_normal(t.shape)).astype(np.float32)


def _cosyvoice3(folder: Path) -> tuple[Any, Any]:
    """The API server's multimodal processor builds the session; `extract_spk_embedding` embeds."""
    from vllm_omni.model_executor.models.cosyvoice3 import cosyvoice3

    cosyvoice3.get_qwen_tokenizer = lambda **kwargs: "tokenizer stand-in"  # not on the speaker path
    config = SimpleNamespace(
        qwen_pretrain_path="tokenizer", skip_special_tokens=True, version="cosyvoice3",
        campplus_onxx_path="campplus.onnx", feat_extractor={},
    )  # fmt: skip
    processor = cosyvoice3.CosyVoice3MultiModalProcessor.__new__(cosyvoice3.CosyVoice3MultiModalProcessor)
    session = processor._build_runtime_components(str(folder), config)["campplus_session"]
    return session, lambda s, voice: cosyvoice3.extract_spk_embedding((voice, 24000), s, "cpu")


def _glm_tts(folder: Path) -> tuple[Any, Any]:
    from vllm_omni.model_executor.models.glm_tts import glm_tts

    _, session = glm_tts.load_voice_clone_frontend(
        str(folder), torch.device("cpu"),
        speech_tokenizer_cache=("WhisperVQ stand-in", None),  # not on the speaker path
        campplus_cache=None, campplus_path=str(folder / "campplus.onnx"),
    )  # fmt: skip
    return session, lambda s, voice: glm_tts.extract_spk_embedding(torch.from_numpy(voice), 24000, s)


def _ming_tts(folder: Path) -> tuple[Any, Any]:
    """Ming's stage 0 loads its extractor at the first request; the session it keeps is compared."""
    from vllm_omni.model_executor.models.ming_tts import speaker_extractor as ming
    from vllm_omni.model_executor.models.ming_tts.constants import (
        KEY_SPEAKER_SAMPLE_RATES,
        KEY_SPEAKER_WAVEFORM,
    )
    from vllm_omni.utils.speaker_cache import get_speaker_cache

    model_config = SimpleNamespace(model=str(folder), stage_id=0,
                                   stage_connector_config={"name": "SharedMemoryConnector", "extra": {}})  # fmt: skip
    wrapper = SimpleNamespace(vllm_config=SimpleNamespace(model_config=model_config),
                              ming_config=SimpleNamespace(sample_rate=16000), _speaker_cache=get_speaker_cache())  # fmt: skip
    first = {KEY_SPEAKER_WAVEFORM: torch.from_numpy(_voice(0.5, seed=9)), KEY_SPEAKER_SAMPLE_RATES: [24000]}
    ming._resolve_speaker_embeddings(wrapper, first)  # loads the extractor (not compared)
    extractor = wrapper._speaker_extractor

    def embed(session: Any, voice: np.ndarray) -> Any:
        # vllm-omni's own extraction, with `session` as its CAM++ session for this one call.
        core = extractor._core
        kept, core.campplus_session = core.campplus_session, session
        try:
            return extractor.extract_from_waveform(torch.from_numpy(voice), 24000)
        finally:
            core.campplus_session = kept

    return extractor._core.campplus_session, embed


_LOADERS = {"cosyvoice3": _cosyvoice3, "glm_tts": _glm_tts, "ming_tts": _ming_tts}
