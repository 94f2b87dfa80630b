"""vllm-omni 0.30.0's per-voice reference preparation, reproduced: the same calls in the same order.

`StepAudio2Token2WavCore._prepare_prompt` (step_audio2_token2wav.py:243-288), as reached through
`BatchedToken2Wav.prepare_prompt` (default dtype float32, autocast off), minus the file decoding:
vLLM's `AudioResampler` (torchaudio's Resample, one thread, oneDNN off) to 16 kHz, the S3
tokenizer's log-mel, `padding` and `quantize` on the device, Kaldi fbank minus its mean into the
speaker model, vLLM's resampler to 24 kHz, CosyVoice's `mel_spectrogram` and the replicate padding
to the token grid. Where vLLM and vllm-omni cannot be installed (the GPU benchmark machine) this is
the per-voice path; the vllm test tier checks it against the real `_prepare_prompt` bit for bit.
The vLLM plugin passes vLLM's own resampler instead of `torchaudio_resample`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import lru_cache
from typing import Any

import numpy as np
import torch

Resample = Callable[[np.ndarray, int, int], np.ndarray]  # (float32 samples, from Hz, to Hz)
SpeakerModel = Callable[[torch.Tensor], torch.Tensor]  # [T, 80] features -> [1, 192]
_THREADS = threading.Lock()


@lru_cache(maxsize=32)
def _resampler(orig: int, new: int) -> Any:
    import torchaudio

    return torchaudio.transforms.Resample(orig, new)


_single = threading.local()


@contextmanager
def single_threaded() -> Iterator[None]:
    """What vLLM's resampler runs under: torch on one thread, oneDNN off (both process-wide, so
    the change is serialised). Threads that each run such work inside one `single_threaded()`
    of the caller's run side by side, each op on its own thread."""
    if getattr(_single, "depth", 0):
        _single.depth += 1
        try:
            yield
        finally:
            _single.depth -= 1
        return
    with _THREADS:
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        _single.depth = 1
        try:
            with torch.backends.mkldnn.flags(enabled=False):
                yield
        finally:
            _single.depth = 0
            torch.set_num_threads(threads)


def torchaudio_resample(audio: np.ndarray, orig: int, new: int) -> np.ndarray:
    """vLLM 0.30.0's resample_audio_torchaudio, as `AudioResampler(target_sr=new).resample` calls it."""
    if orig == new:
        return audio
    tensor = torch.as_tensor(audio, dtype=torch.float32)
    if _SHARED.active:  # inside a caller's single_threaded(): one thread, oneDNN off already
        return _resampler(orig, new)(tensor).numpy()
    with single_threaded():
        return _resampler(orig, new)(tensor).numpy()


class _Shared:
    """Set while a caller's single_threaded() section runs work on several threads."""

    active = False


_SHARED = _Shared()


@contextmanager
def shared_single_threaded() -> Iterator[None]:
    """single_threaded() for work spread over a thread pool: the settings are made once here and
    every thread's resampling runs under them without taking the lock."""
    with single_threaded():
        _SHARED.active = True
        try:
            yield
        finally:
            _SHARED.active = False


@contextmanager
def as_vllm_omni_prepares(device: torch.device) -> Any:
    """BatchedToken2Wav.prepare_prompt's context: default dtype float32, autocast off on `device`."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float32)
    try:
        with torch.amp.autocast(device.type, enabled=False):
            yield
    finally:
        torch.set_default_dtype(previous)


@lru_cache(maxsize=8)
def _flow_constants(device: str) -> tuple[torch.Tensor, torch.Tensor]:
    from torchaudio.functional import melscale_fbanks

    from omni_deploy.speaker.refprep.defaults import float32_defaults

    with float32_defaults():  # as vllm-omni builds them: inside prepare_prompt's float32 default
        basis = melscale_fbanks(
            n_freqs=961,
            f_min=0.0,
            f_max=8000.0,
            n_mels=80,
            sample_rate=24000,
            mel_scale="slaney",
            norm="slaney",
        ).T
    target = torch.device(device)
    window = torch.hann_window(1920, dtype=torch.float32, device="cpu").to(target)
    return basis.to(device=target, dtype=torch.float32), window


def cosyvoice_mel(y: torch.Tensor) -> torch.Tensor:
    """CosyVoice3's mel_spectrogram(y, 1920, 80, 24000, 480, 1920, 0, 8000, center=False)."""
    mel, window = _flow_constants(str(y.device))
    y = torch.nn.functional.pad(y.unsqueeze(1), (720, 720), mode="reflect").squeeze(1)
    spec = torch.view_as_real(
        torch.stft(y, 1920, hop_length=480, win_length=1920, window=window, center=False,
                   pad_mode="reflect", normalized=False, onesided=True, return_complex=True)
    )  # fmt: skip
    spec = torch.sqrt(spec.pow(2).sum(-1) + (1e-9))
    spec = torch.matmul(mel, spec)
    return torch.log(torch.clamp(spec, min=1e-5))


def s3_mel(audio: np.ndarray, rate: int, resample: Resample = torchaudio_resample) -> torch.Tensor:
    """The S3 tokenizer's input as vllm-omni computes it on the CPU: [128, frames]."""
    import s3tokenizer

    return s3tokenizer.log_mel_spectrogram(torch.from_numpy(resample(audio.astype(np.float32), rate, 16000)))


def s3_tokens(
    audio: np.ndarray,
    rate: int,
    tokenizer: Any,
    device: torch.device,
    resample: Resample = torchaudio_resample,
    mel: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The S3 branch alone: (tokens [1, L] int32, lengths [1]) on `device`; `mel`, when given, is
    this voice's s3_mel already computed."""
    import s3tokenizer

    mels, mels_lens = s3tokenizer.padding([s3_mel(audio, rate, resample) if mel is None else mel])
    codes, lens = tokenizer.quantize(mels.to(device), mels_lens.to(device))
    return codes, lens


def prepare_one(
    audio: np.ndarray,
    rate: int,
    tokenizer: Any,
    speaker: SpeakerModel,
    device: torch.device,
    up_rate: int = 2,
    resample: Resample = torchaudio_resample,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(tokens, token lengths, embedding, prompt mels, prompt mel lengths) of one decoded voice."""
    import s3tokenizer
    import torchaudio.compliance.kaldi as kaldi

    with as_vllm_omni_prepares(device):
        audio_16k = resample(audio.astype(np.float32), rate, 16000)
        samples = torch.from_numpy(audio_16k)
        mels = s3tokenizer.log_mel_spectrogram(samples)
        mels, mels_lens = s3tokenizer.padding([mels])
        tokens, tokens_lens = tokenizer.quantize(mels.to(device), mels_lens.to(device))

        spk_feat = kaldi.fbank(samples.unsqueeze(0), num_mel_bins=80, dither=0, sample_frequency=16000)
        spk_feat = spk_feat - spk_feat.mean(dim=0, keepdim=True)
        embedding = speaker(spk_feat).to(device)

        audio_24k = resample(audio.astype(np.float32), rate, 24000)
        prompt_mel = cosyvoice_mel(torch.from_numpy(audio_24k).unsqueeze(0)).transpose(1, 2).squeeze(0)
        prompt_mels = prompt_mel.unsqueeze(0).to(device)
        prompt_mels_lens = torch.tensor([prompt_mels.shape[1]], dtype=torch.int32, device=device)
        prompt_mels = torch.nn.functional.pad(
            prompt_mels, (0, 0, 0, tokens.shape[1] * up_rate - prompt_mels.shape[1]), mode="replicate"
        )
    return tokens, tokens_lens, embedding, prompt_mels, prompt_mels_lens


def onnxruntime_speaker(session: Any, device: torch.device) -> SpeakerModel:
    """vllm-omni's own ONNX Runtime branch of `_forward_spk_embedding`."""

    def run(feat: torch.Tensor) -> torch.Tensor:
        name = session.get_inputs()[0].name
        return torch.tensor(session.run(None, {name: feat.unsqueeze(dim=0).cpu().numpy()})[0], device=device)

    return run
