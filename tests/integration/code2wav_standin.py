"""Stand-in MiniCPM-o 4.5 token2wav assets, and a Code2Wav stage process that loads them.

The real assets (flow.pt and flow.yaml, hift.pt, campplus.onnx, the S3 tokenizer) ship only with
the model checkpoint. The stand-ins are small and random but go through vllm-omni 0.30.0's own
loading code (`StepAudio2Token2WavCore._ensure_models_loaded`: hyperpyyaml for flow.yaml,
`torch.load` + strict `load_state_dict` for flow.pt and hift.pt, ONNX Runtime for campplus.onnx):
- campplus.onnx: `spk make-standin` (real CAM++ structure, random weights);
- hift.pt: vllm-omni's own HiFT (`_build_hift`), randomly initialised;
- flow.yaml/flow.pt: `TinyFlow` below, a stand-in with the module layout vllm-omni's
  BatchedToken2Wav drives (the real flow's classes come from the model's own package, not from
  vllm-omni);
- the S3 tokenizer: s3tokenizer's own S3TokenizerV2 with a small random configuration, put in
  place of `s3tokenizer.load_model` in the stage process (the real file is a 500 MB ONNX export).

`run_stage` is what the spawned stage process runs: vLLM's real `load_general_plugins`, then the
real `MiniCPMO45Code2Wav` built by vLLM's own `BaseModelLoader.load_model` (construction under
`set_default_torch_dtype(dtype)` and `torch.device`, then `load_weights -> _build_backend`, still
under the dtype: bf16 by default, as MiniCPM-o 4.5's stages load; see vllm_loading.py), then
`forward` as vLLM's runner calls it (`torch.inference_mode()`) on requests that carry a reference
voice.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

import torch
from torch import nn

FLOW_DIM = 32
HEADS, HEAD_DIM = 2, 8
MEL = 80


class _Encoder(nn.Module):
    """Upsamples tokens 2x; consumes a 3-token lookahead unless it is the last chunk."""

    lookahead = 3

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.mix = nn.Linear(dim, dim)

    def forward_chunk(
        self, xs: torch.Tensor, last_chunk: bool, cnn_cache: Any, att_cache: Any
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        if not last_chunk:
            xs = xs[:, : -self.lookahead]
        hidden = torch.tanh(self.mix(xs)).repeat_interleave(2, dim=1)
        batch = hidden.shape[0]
        new_cnn = hidden[:, -1:, :].transpose(1, 2).contiguous()  # [B, D, 1]
        current = hidden[:, :, :4].reshape(1, batch, 1, hidden.shape[1], 4)
        new_att = current if att_cache is None else torch.cat((att_cache, current), dim=3)
        return hidden, new_cnn, new_att


class _Attrs(nn.Module):
    """A module that only carries the attributes vllm-omni reads for buffer shapes."""

    def __init__(self, **attrs: Any) -> None:
        super().__init__()
        for name, value in attrs.items():
            setattr(self, name, value)


class _Conv(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.in_channels = self.out_channels = channels
        self.block = nn.ModuleList([nn.Identity(), _Attrs(causal_padding=(2, 0))])


class _Block(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv = _Conv(channels)
        self.attn = _Attrs(num_heads=HEADS, head_dim=HEAD_DIM)


class _TimeEmbedder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(1, MEL)

    def forward(self, time: torch.Tensor) -> torch.Tensor:
        return self.linear(time.reshape(-1, 1))


class _Estimator(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        inputs = 4 * MEL  # x, mu, speaker, cond
        self.t_embedder = _TimeEmbedder()
        self.blocks = nn.ModuleList([_Block(MEL)])
        self.proj = nn.Conv1d(inputs, MEL, 1)
        self.kv = nn.Conv1d(inputs, HEADS * 2 * HEAD_DIM, 1)

    def blocks_forward_chunk(
        self,
        x: torch.Tensor,
        time_embedding: torch.Tensor,
        attn_mask: Any,
        old_cnn: Any,
        old_att: Any,
        cnn_out: torch.Tensor,
        att_out: torch.Tensor,
    ) -> torch.Tensor:
        batch, _, frames = x.shape
        kv = self.kv(x).reshape(batch, HEADS, 2 * HEAD_DIM, frames).transpose(2, 3)
        for index in range(len(self.blocks)):
            cnn_out[index].zero_()
            previous = old_att[index]
            att_out[index].copy_(kv if previous is None else torch.cat((previous, kv), dim=2))
        return torch.tanh(self.proj(x) + time_embedding.reshape(batch, MEL, 1))


class _Decoder(nn.Module):
    inference_cfg_rate = 0.7

    def __init__(self) -> None:
        super().__init__()
        self.estimator = _Estimator()
        self.register_buffer(
            "rand_noise", torch.randn(1, MEL, 2000, generator=torch.Generator().manual_seed(0))
        )


class TinyFlow(nn.Module):
    """Stand-in flow: the attributes and shapes vllm-omni 0.30.0's BatchedToken2Wav uses."""

    def __init__(self, vocab_size: int = 6561, dim: int = FLOW_DIM, up_rate: int = 2) -> None:
        super().__init__()
        self.up_rate = up_rate
        self.input_embedding = nn.Embedding(vocab_size, dim)
        self.encoder = _Encoder(dim)
        self.encoder_proj = nn.Linear(dim, MEL)
        self.spk_embed_affine_layer = nn.Linear(192, MEL)
        self.decoder = _Decoder()


FLOW_YAML = f"flow: !new:{__name__}.TinyFlow\n  dim: {FLOW_DIM}\n"


def write_wav(path: Path, seconds: float, sample_rate: int = 16000, seed: int = 0) -> None:
    import numpy as np
    import soundfile

    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * sample_rate)) / sample_rate
    wave = 0.3 * np.sin(2 * np.pi * 220 * t) + 0.05 * rng.standard_normal(t.shape)
    soundfile.write(path, wave.astype("float32"), sample_rate)


def build_model_dir(root: Path, campplus: Path) -> Path:
    """A model folder with stand-in token2wav assets where vllm-omni looks for them."""
    import shutil

    from vllm_omni.model_executor.models.step_audio2.step_audio2_token2wav import _build_hift

    assets = root / "assets"
    token2wav = assets / "token2wav"
    token2wav.mkdir(parents=True)
    shutil.copy(campplus, token2wav / "campplus.onnx")
    torch.manual_seed(0)
    torch.save(_build_hift().state_dict(), token2wav / "hift.pt")
    (token2wav / "flow.yaml").write_text(FLOW_YAML)
    torch.save(TinyFlow().state_dict(), token2wav / "flow.pt")
    # Read only through the patched s3tokenizer.load_model (see run_stage); it must exist.
    (token2wav / "speech_tokenizer_v2_25hz.onnx").write_bytes(b"stand-in: see code2wav_standin.py")
    write_wav(assets / "HT_ref_audio.wav", 1.0, seed=1)
    return root


def _small_s3_tokenizer(name: str, download_root: str | None = None) -> Any:
    from s3tokenizer.model import ModelConfig
    from s3tokenizer.model_v2 import S3TokenizerV2

    torch.manual_seed(0)
    config = ModelConfig(
        n_audio_state=64, n_audio_head=1, n_audio_layer=1
    )  # rotary tables assume 64-wide heads
    return S3TokenizerV2("speech_tokenizer_v2_25hz", config=config).eval()


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(f"{record.levelname} {record.name} {record.getMessage()}")


# Faults of the encoder's answer (the guard must catch each): name -> what the encoder returns instead.
BAD_EMBEDDINGS: dict[str, Any] = {
    "nan": lambda out: out.index_fill(1, torch.tensor([5]), float("nan")),
    "inf": lambda out: out.index_fill(1, torch.tensor([0]), float("inf")),
    "zeros": torch.zeros_like,
    "shape": lambda out: out[:, :191],
    "dtype": lambda out: out.to(torch.bfloat16),
}


def run_stage(
    model_dir: str,
    extra: dict[str, Any],
    env: dict[str, str | None],
    fault: str,
    result: str,
    requests: int = 1,
    vllm_omni_version: str | None = None,
    dtype: str = "bfloat16",
) -> None:
    """The Code2Wav stage process: plugins, the model loaded as vLLM loads it in `dtype`'s context,
    `requests` forwards with one reference voice (distinct requests, the same voice: vllm-omni
    prepares it once and caches it)."""
    _set_env(env)
    import s3tokenizer
    import vllm.plugins
    import vllm_omni

    if vllm_omni_version is not None:
        vllm_omni.__version__ = vllm_omni_version  # as a newer (or patched) vllm-omni would say
    from tests.integration import vllm_loading

    vllm_loading.configure_vllm_logging()  # the `vllm` logger tree as in a stage process
    # The plugins load before the model's modules are imported, as in a stage's engine core.
    vllm.plugins.load_general_plugins()
    from vllm_omni.model_executor.models.minicpmo_4_5 import minicpmo_4_5_code2wav as c2w
    from vllm_omni.model_executor.models.step_audio2 import step_audio2_token2wav as step

    records = _Records()
    logging.getLogger("vllm").addHandler(records)
    s3tokenizer.load_model = _small_s3_tokenizer
    if fault == "tensorrt":
        _stand_in_tensorrt(c2w)

    seen: list[tuple[torch.Tensor, torch.Tensor]] = []
    original = step.StepAudio2Token2WavCore._forward_spk_embedding

    def spy(self: Any, spk_feat: torch.Tensor) -> torch.Tensor:
        out = original(self, spk_feat)
        seen.append((spk_feat.detach().clone(), out.detach().clone()))
        return out

    step.StepAudio2Token2WavCore._forward_spk_embedding = spy

    vllm_config = vllm_loading.stage_config(
        vllm_loading.DTYPES[dtype], model=model_dir, revision=None, stage_id=2,
        stage_connector_config={"name": "SharedMemoryConnector", "extra": extra},
    )  # fmt: skip
    code2wav = vllm_loading.load_as_vllm(
        lambda config: c2w.MiniCPMO45Code2Wav(vllm_config=config), vllm_config
    )
    core = code2wav.backend._token2wav._core
    speaker_model = type(core._spk_model).__name__
    _inject(core, fault)
    served = _serve(code2wav, requests)
    cosine, cache_cosine, cached = _agreement(model_dir, seen, code2wav)
    guard = core._spk_model if hasattr(core._spk_model, "fallback_calls") else None
    Path(result).write_text(
        json.dumps(
            {
                "speaker_model": speaker_model,
                "speaker_model_after": type(core._spk_model).__name__,
                "embeddings": len(seen),
                "cosine": cosine,
                "cached_voices": cached,
                "cache_cosine": cache_cosine,
                **served[0],
                "requests": served,
                "fallback_calls": getattr(guard, "fallback_calls", None),
                "log": records.lines,
                "default_dtype": str(torch.get_default_dtype()),
            }
        )
    )


def _set_env(env: dict[str, str | None]) -> None:
    for name, value in env.items():  # None: not set in the stage process
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


def _inject(core: Any, fault: str) -> None:
    """The encoder fault under test, in the guard's encoder (the guard itself stays as built)."""
    if fault == "encoder-raises":

        def broken(feat: torch.Tensor) -> torch.Tensor:
            raise RuntimeError("CUDA error: out of memory (stand-in fault)")

        core._spk_model.encoder = broken
    elif fault in BAD_EMBEDDINGS:
        good, corrupt = core._spk_model.encoder, BAD_EMBEDDINGS[fault]
        core._spk_model.encoder = lambda feat: corrupt(good(feat))


def _serve(code2wav: Any, requests: int) -> list[dict[str, Any]]:
    """`requests` forwards, distinct requests with one reference voice."""
    tokens = torch.randint(0, 6561, (24,), generator=torch.Generator().manual_seed(3))
    import numpy as np

    rng = np.random.default_rng(7)
    ref = (
        0.3 * np.sin(np.arange(16000) * 2 * np.pi * 180 / 16000) + 0.05 * rng.standard_normal(16000)
    ).astype("float32")
    served: list[dict[str, Any]] = []
    for index in range(requests):
        request_id = f"req-{index}"
        info = {
            "meta": {
                "request_id": request_id,
                "cache_epoch": 0,
                "chunk_seq": 0,
                "last_chunk": True,
                "ref_audio_sr": 16000,
                "code_flat_numel": int(tokens.numel()),
            },
            "codes": {"audio": tokens, "ref": torch.from_numpy(ref)},
        }
        try:
            with vllm_loading_runner():
                output = code2wav.forward(
                    input_ids=tokens, runtime_additional_information=[info], request_ids=[request_id]
                )
            audio = output.multimodal_outputs["model_outputs"][0]
            served.append({"error": None, "audio_samples": int(audio.numel()),
                           "finite": bool(torch.isfinite(audio).all())})  # fmt: skip
        except Exception as exc:  # reported to the test, which decides
            served.append({"error": f"{type(exc).__name__}: {exc}", "audio_samples": 0, "finite": False})
    return served


def vllm_loading_runner() -> Any:
    from tests.integration import vllm_loading

    return vllm_loading.as_runner()


def _agreement(
    model_dir: str, seen: list[tuple[torch.Tensor, torch.Tensor]], code2wav: Any
) -> tuple[float | None, float | None, int]:
    """Cosine of the last embedding used, and of what vllm-omni's per-voice cache kept, against ONNX
    Runtime on the same features; and how many voices the cache holds."""
    import numpy as np

    cosine = None
    if seen:
        import onnxruntime

        feat, embedding = seen[-1]
        session = onnxruntime.InferenceSession(str(Path(model_dir) / "assets/token2wav/campplus.onnx"))
        reference = session.run(None, {session.get_inputs()[0].name: feat.unsqueeze(0).numpy()})[0]
        a = embedding.double().reshape(-1).numpy()
        b = reference.astype("float64").reshape(-1)
        cosine = float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))
    # What vllm-omni's per-voice cache kept, against ONNX Runtime on the same features.
    cached = [f.speaker_embedding for f in code2wav.backend._prompt_features.values()]
    cache_cosine = None
    if cached and seen:
        a = cached[-1].detach().double().reshape(-1).cpu().numpy()
        cache_cosine = float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))
    return cosine, cache_cosine, len(cached)


def _stand_in_tensorrt(c2w: Any) -> None:
    """vllm-omni's TensorRT branch on a machine without CUDA or TensorRT: the platform answers CUDA
    and the two TensorRT builders are stand-ins (the DiT stepper is None, so decoding stays on
    torch; the speaker model is a callable as `get_campplus_trt` returns one)."""
    from vllm_omni.model_executor.models.step_audio2 import step_audio2_dit_trt
    from vllm_omni.platforms import current_omni_platform

    class CampplusTRTStandIn:
        def __init__(self, path: str) -> None:
            import onnxruntime

            self.session = onnxruntime.InferenceSession(path)

        def __call__(self, feat: torch.Tensor) -> torch.Tensor:
            name = self.session.get_inputs()[0].name
            return torch.from_numpy(self.session.run(None, {name: feat.unsqueeze(0).numpy()})[0])

    def enable_trt(self: Any) -> None:
        self._ensure_models_loaded()
        self._spk_model = CampplusTRTStandIn(f"{self.model_path}/campplus.onnx")

    from vllm_omni.model_executor.models.step_audio2.step_audio2_token2wav import StepAudio2Token2WavCore

    type(current_omni_platform).is_cuda = lambda self: True  # type: ignore[method-assign]
    step_audio2_dit_trt.build_dit_trt_stepper = lambda *args, **kwargs: None
    StepAudio2Token2WavCore.enable_trt_spk_embedding = enable_trt  # type: ignore[method-assign]
