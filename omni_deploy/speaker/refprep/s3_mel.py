"""The S3 tokenizer's log-mel (`s3tokenizer.log_mel_spectrogram`, 128 bins) for many voices at once.

Per voice, s3tokenizer computes a centred STFT (Hann window of 400, hop 160, reflect padding of 200
each side), drops the last frame, projects the power spectrum onto its mel filters, takes log10
floored at 1e-10, clamps each value to at least the voice's own maximum less 8, and maps x to
(x + 4) / 4; `s3tokenizer.padding` then right-pads the batch with zeros. Here each voice is reflect-
padded on its own, the STFT runs on the whole batch without centring, and the maximum is taken over
each voice's own frames, so each voice's mel equals its one-by-one mel to rounding.
"""

from __future__ import annotations

import torch

from omni_deploy.speaker.refprep.plan import S3_FFT, S3_HOP
from omni_deploy.speaker.refprep.waves import reflect_gather

N_MELS = 128

_WINDOWS: dict[str, torch.Tensor] = {}


def _window(device: torch.device) -> torch.Tensor:
    key = str(device)
    if key not in _WINDOWS:
        _WINDOWS[key] = torch.hann_window(S3_FFT, dtype=torch.float32, device="cpu").to(device)
    return _WINDOWS[key]


_FILTERS: dict[str, torch.Tensor] = {}


def mel_filters(device: torch.device) -> torch.Tensor:
    """s3tokenizer's own filter bank (its packaged mel_filters.npz), on `device` (read once)."""
    key = str(device)
    if key not in _FILTERS:
        from s3tokenizer.utils import _mel_filters

        _FILTERS[key] = _mel_filters(torch.device("cpu"), N_MELS).to(device=device, dtype=torch.float32)
    return _FILTERS[key]


def s3_log_mel(
    flat16: torch.Tensor, starts: torch.Tensor, samples: torch.Tensor, frames: torch.Tensor, width_frames: int
) -> torch.Tensor:
    """[B, 128, width_frames] log-mels of 16 kHz voices flat16[starts[b] : starts[b] + samples[b]],
    each with frames[b] (= samples[b] // 160) valid frames and zeros after them."""
    pad = S3_FFT // 2
    width = (width_frames - 1) * S3_HOP + S3_FFT
    x = reflect_gather(flat16, starts, samples, pad, width)
    stft = torch.stft(x, S3_FFT, S3_HOP, window=_window(x.device), center=False, return_complex=True)
    magnitudes = stft[..., :width_frames].abs() ** 2
    mel = mel_filters(x.device) @ magnitudes
    log_spec = torch.clamp(mel, min=1e-10).log10()
    valid = (torch.arange(width_frames, device=x.device)[None, :] < frames[:, None])[:, None, :]
    peak = torch.where(valid, log_spec, float("-inf")).amax(dim=(1, 2), keepdim=True)
    log_spec = torch.maximum(log_spec, peak - 8.0)
    return torch.where(valid, (log_spec + 4.0) / 4.0, 0.0)
