"""The torch Kaldi fbank against independent implementations."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from omni_deploy.speaker.fbank import fbank, fbank_padded, num_frames, resample


def _speechlike(samples: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    t = torch.arange(samples) / 16000
    voiced = sum(torch.sin(2 * math.pi * 140 * k * t) / k for k in range(1, 8))
    return (0.2 * voiced + 0.02 * torch.randn(samples, generator=g)).clamp(-1, 1)


LENGTHS = [400, 559, 16000, 48000, 96000, 12345]


def test_frame_count_follows_snip_edges() -> None:
    assert [num_frames(n) for n in (399, 400, 559, 560, 96000)] == [0, 1, 1, 2, 598]


def test_parity_with_kaldi_native_fbank() -> None:
    knf = pytest.importorskip("kaldi_native_fbank")
    waves = [_speechlike(n, seed=n) for n in LENGTHS]
    for wave, ours in zip(waves, fbank(waves), strict=True):
        opts = knf.FbankOptions()
        opts.frame_opts.dither = 0
        opts.frame_opts.samp_freq = 16000
        opts.frame_opts.snip_edges = True
        opts.mel_opts.num_bins = 80
        online = knf.OnlineFbank(opts)
        online.accept_waveform(16000, wave.tolist())
        online.input_finished()
        ref = np.stack([online.get_frame(i) for i in range(online.num_frames_ready)])
        ref = ref - ref.mean(0, keepdims=True)
        assert ours.shape == ref.shape
        assert np.abs(ours.numpy() - ref).max() <= 1e-3


def test_parity_with_torchaudio_when_it_imports() -> None:
    try:
        from torchaudio.compliance import kaldi
    except Exception:  # torchaudio's extension often fails to load beside CPU torch
        pytest.skip("torchaudio does not import here")
    for n in (16000, 96000):
        wave = _speechlike(n, seed=1)
        ref = kaldi.fbank(wave[None], num_mel_bins=80, dither=0, sample_frequency=16000)
        ref = ref - ref.mean(0, keepdim=True)
        assert (fbank([wave])[0] - ref).abs().max() <= 1e-3


def test_batched_equals_single() -> None:
    waves = [_speechlike(n, seed=n) for n in (16000, 40000, 401)]
    batched = fbank(waves)
    for wave, feats in zip(waves, batched, strict=True):
        assert torch.allclose(fbank([wave])[0], feats, atol=1e-5)


def test_padded_frames_are_zero() -> None:
    waves = torch.zeros(2, 16000)
    waves[0] = _speechlike(16000, 0)
    waves[1, :8000] = _speechlike(8000, 1)
    feats, counts = fbank_padded(waves, torch.tensor([16000, 8000]))
    assert counts.tolist() == [98, 48]
    assert feats[1, 48:].abs().max() == 0


def test_resample_keeps_the_tone_and_the_length() -> None:
    rate = 48000
    t = torch.arange(rate) / rate
    tone = torch.sin(2 * math.pi * 440 * t)
    out = resample(tone, rate, 16000)
    assert out.shape[0] == 16000
    spectrum = torch.fft.rfft(out).abs()
    assert abs(int(spectrum.argmax()) - 440) <= 1  # 1 Hz bins over one second
    assert resample(tone, 16000, 16000) is tone
