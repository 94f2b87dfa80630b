"""Kaldi-compatible log-mel filterbank in torch, batched, on CPU or CUDA.

The serving contract of CAM++ in vllm-omni: mono audio at 16 kHz in [-1, 1]; 25 ms frames every
10 ms (snip_edges: T = 1 + (N - 400) // 160); per frame DC removal, pre-emphasis 0.97, povey
window, 512-point FFT, power spectrum, 80 Kaldi mel bins between 20 Hz and Nyquist, natural log
floored at float eps; dither 0. Then the mean over each utterance's frames is subtracted.
"""

from __future__ import annotations

import math
from functools import cache

import torch

SAMPLE_RATE = 16000
FRAME_LENGTH = 400  # 25 ms
FRAME_SHIFT = 160  # 10 ms
FFT_SIZE = 512
NUM_MEL_BINS = 80
LOW_FREQ = 20.0
PREEMPHASIS = 0.97


def num_frames(samples: int) -> int:
    return 0 if samples < FRAME_LENGTH else 1 + (samples - FRAME_LENGTH) // FRAME_SHIFT


def _mel(freq: torch.Tensor) -> torch.Tensor:
    return 1127.0 * torch.log1p(freq / 700.0)


@cache
def _mel_banks_cpu() -> torch.Tensor:
    """[257, 80] triangular Kaldi mel filters over the FFT bins (Nyquist bin weight 0)."""
    nyquist = SAMPLE_RATE / 2
    fft_bins = FFT_SIZE // 2
    mel_low, mel_high = (
        _mel(torch.tensor(LOW_FREQ, dtype=torch.float64, device="cpu")),
        _mel(torch.tensor(nyquist, dtype=torch.float64, device="cpu")),
    )
    delta = (mel_high - mel_low) / (NUM_MEL_BINS + 1)
    index = torch.arange(NUM_MEL_BINS, dtype=torch.float64, device="cpu")[:, None]
    left, center, right = (
        mel_low + index * delta,
        mel_low + (index + 1) * delta,
        mel_low + (index + 2) * delta,
    )
    mel = _mel(SAMPLE_RATE / FFT_SIZE * torch.arange(fft_bins, dtype=torch.float64, device="cpu"))[None, :]
    up = (mel - left) / (center - left)
    down = (right - mel) / (right - center)
    banks = torch.clamp(torch.minimum(up, down), min=0.0)
    return (
        torch.cat([banks, torch.zeros(NUM_MEL_BINS, 1, dtype=torch.float64, device="cpu")], dim=1)
        .T.float()
        .contiguous()
    )


@cache
def _povey_window_cpu() -> torch.Tensor:
    n = torch.arange(FRAME_LENGTH, dtype=torch.float64, device="cpu")
    return (0.5 - 0.5 * torch.cos(2 * math.pi * n / (FRAME_LENGTH - 1))).pow(0.85).float()


@cache
def _constants_on(device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """(povey window, mel banks) on `device`, copied once: a copy from host memory inside a CUDA
    graph capture would fail, and every eager call would pay for one."""
    return _povey_window_cpu().to(device), _mel_banks_cpu().to(device)


def fbank_padded(waveforms: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Features of right-padded waveforms [B, N] with sample counts [B].

    Returns ([B, F, 80] mean-subtracted features, zero beyond each item's frames; [B] frame counts).
    """
    if waveforms.dim() != 2:
        raise ValueError("waveforms must be [batch, samples]")
    device = waveforms.device
    wave = waveforms.float()
    if wave.shape[1] < FRAME_LENGTH:
        wave = torch.nn.functional.pad(wave, (0, FRAME_LENGTH - wave.shape[1]))
    frames = wave.unfold(1, FRAME_LENGTH, FRAME_SHIFT)  # [B, F, 400]
    frames = frames - frames.mean(dim=-1, keepdim=True)
    shifted = torch.cat([frames[..., :1], frames[..., :-1]], dim=-1)
    window, banks = _constants_on(device)
    frames = (frames - PREEMPHASIS * shifted) * window
    spectrum = torch.fft.rfft(frames, n=FFT_SIZE).abs().pow(2)  # [B, F, 257]
    energies = torch.matmul(spectrum, banks)
    logmel = energies.clamp_min(torch.finfo(torch.float32).eps).log()
    counts = torch.clamp((lengths.to(device) - FRAME_LENGTH) // FRAME_SHIFT + 1, min=0)
    valid = (torch.arange(logmel.shape[1], device=device)[None, :] < counts[:, None]).to(logmel.dtype)[
        ..., None
    ]
    mean = (logmel * valid).sum(dim=1, keepdim=True) / counts.clamp_min(1).to(logmel.dtype)[:, None, None]
    return (logmel - mean) * valid, counts


def fbank(waveforms: list[torch.Tensor]) -> list[torch.Tensor]:
    """Mean-subtracted [T, 80] features for each 16 kHz mono waveform, computed in one batch."""
    if not waveforms:
        return []
    device = waveforms[0].device
    lengths = torch.tensor([int(w.shape[-1]) for w in waveforms], dtype=torch.int64, device=device)
    padded = torch.nn.utils.rnn.pad_sequence([w.reshape(-1).float() for w in waveforms], batch_first=True)
    feats, counts = fbank_padded(padded, lengths)
    return [feats[i, : int(n)] for i, n in enumerate(counts.tolist())]


def resample(waveform: torch.Tensor, orig_rate: int, new_rate: int = SAMPLE_RATE) -> torch.Tensor:
    """Band-limited sinc resampling (Hann-windowed, 6 zero crossings, rolloff 0.99), 1-D in and out."""
    if orig_rate == new_rate:
        return waveform
    if orig_rate <= 0 or new_rate <= 0:
        raise ValueError("sample rates must be positive")
    gcd = math.gcd(orig_rate, new_rate)
    orig, new = orig_rate // gcd, new_rate // gcd
    zeros, rolloff = 6, 0.99
    base = min(orig, new) * rolloff
    width = math.ceil(zeros * orig / base)
    idx = torch.arange(-width, width + orig, dtype=torch.float64, device=waveform.device)[None, None] / orig
    t = (-torch.arange(new, dtype=torch.float64, device=waveform.device)[:, None, None] / new + idx) * base
    t = t.clamp(-zeros, zeros)
    window = torch.cos(t * math.pi / zeros / 2) ** 2
    t = t * math.pi
    kernel = torch.where(
        t == 0, torch.ones_like(t), torch.sin(t) / torch.where(t == 0, torch.ones_like(t), t)
    )
    kernel = (kernel * window * base / orig).to(waveform.dtype)
    length = waveform.shape[-1]
    x = torch.nn.functional.pad(waveform.reshape(1, 1, -1), (width, width + orig))
    out = torch.nn.functional.conv1d(x, kernel, stride=orig)  # [1, new, L]
    out = out.transpose(1, 2).reshape(-1)
    return out[: math.ceil(new * length / orig)]
