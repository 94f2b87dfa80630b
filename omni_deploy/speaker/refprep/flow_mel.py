"""The flow's 24 kHz prompt mel for many voices at once, padded to the flow's token grid.

vllm-omni 0.30.0 computes it per voice with CosyVoice's `mel_spectrogram` (n_fft 1920, hop 480,
Hann window 1920, reflect padding of 720 each side, no centring, magnitude sqrt(re^2 + im^2 +
1e-9), 80 Slaney mel bins from 0 to 8 kHz built by torchaudio's `melscale_fbanks`, natural log
floored at 1e-5), then pads the [T, 80] result with its last frame (or cuts it) to
`flow.up_rate` frames per S3 token. Here each voice is reflect-padded on its own and one STFT
covers the batch; the padding to the token grid is one gather.
"""

from __future__ import annotations

import threading

import torch

from omni_deploy.speaker.refprep.plan import FLOW_FFT, FLOW_HOP, FLOW_RATE
from omni_deploy.speaker.refprep.waves import reflect_gather

N_MELS, F_MAX = 80, 8000.0
_CONSTANTS: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
_LOCK = threading.Lock()


def _constants(device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """(Hann window, [80, 961] mel basis) on `device`, built as vllm-omni builds them."""
    key = str(device)
    with _LOCK:
        if key not in _CONSTANTS:
            from torchaudio.functional import melscale_fbanks

            from omni_deploy.speaker.refprep.defaults import float32_defaults

            with float32_defaults():  # melscale_fbanks follows the default dtype, as in vllm-omni
                basis = melscale_fbanks(
                    n_freqs=FLOW_FFT // 2 + 1,
                    f_min=0.0,
                    f_max=F_MAX,
                    n_mels=N_MELS,
                    sample_rate=FLOW_RATE,
                    mel_scale="slaney",
                    norm="slaney",
                ).T
            window = torch.hann_window(FLOW_FFT, dtype=torch.float32, device="cpu").to(device)
            _CONSTANTS[key] = (window, basis.to(device=device, dtype=torch.float32))
        return _CONSTANTS[key]


def flow_mel(
    flat24: torch.Tensor, starts: torch.Tensor, samples: torch.Tensor, width_frames: int
) -> torch.Tensor:
    """[B, 80, width_frames] log-mels of 24 kHz voices flat24[starts[b] : starts[b] + samples[b]];
    frames past each voice's own count (samples // 480) hold anything."""
    window, basis = _constants(flat24.device)
    pad = (FLOW_FFT - FLOW_HOP) // 2
    width = (width_frames - 1) * FLOW_HOP + FLOW_FFT
    x = reflect_gather(flat24, starts, samples, pad, width)
    spec = torch.view_as_real(
        torch.stft(
            x,
            FLOW_FFT,
            hop_length=FLOW_HOP,
            win_length=FLOW_FFT,
            window=window,
            center=False,
            normalized=False,
            onesided=True,
            return_complex=True,
        )
    )
    spec = torch.sqrt(spec.pow(2).sum(-1) + 1e-9)
    return torch.log(torch.clamp(torch.matmul(basis, spec), min=1e-5))


def to_token_grid(mels: torch.Tensor, frames: torch.Tensor, width: int) -> torch.Tensor:
    """[B, width, 80] from [B, 80, T] mels with frames[b] valid frames: frame j of voice b is
    frame min(j, frames[b] - 1), which is vllm-omni's replicate padding (or cut) to the grid."""
    steps = torch.arange(width, device=mels.device)[None, :]
    index = torch.minimum(steps, (frames - 1)[:, None])  # [B, width]
    rows = mels.transpose(1, 2)  # [B, T, 80]
    return torch.gather(rows, 1, index[:, :, None].expand(-1, -1, rows.shape[2]))
