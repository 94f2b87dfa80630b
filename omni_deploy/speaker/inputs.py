"""Reference audio for the parity and speed tools: WAV files or synthetic speech-like signals."""

from __future__ import annotations

import io
import math
import wave
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from omni_deploy.common import guarded  # standard library only: the speaker side stays apart from config

MAX_WAV_BYTES = 256 * 1024 * 1024  # a reference voice is seconds long; this is over 20 minutes
# What a header may claim, checked before anything is allocated for it: a 1 Hz header resampled to
# 16 kHz asks for 16,000 samples a sample (GBs), a 4.29 GHz one overflows the resampler.
MIN_RATE, MAX_RATE = 4000, 384_000
MAX_CHANNELS = 32
MAX_SECONDS = 30 * 60


@dataclass
class Reference:
    name: str
    waveform: np.ndarray  # float32 mono in [-1, 1]
    sample_rate: int


class AudioError(Exception):
    pass


def read_wav(path: Path) -> Reference:
    """PCM WAV (8/16/24/32-bit), any rate, channels mixed to mono; read through the guarded
    reader (a regular file of at most MAX_WAV_BYTES: a FIFO or /dev/zero is a message)."""
    try:
        content = guarded.read_bytes(path, str(path), MAX_WAV_BYTES)
    except guarded.Refused as refused:
        raise AudioError(str(refused)) from None
    try:
        with wave.open(io.BytesIO(content), "rb") as handle:
            channels, width, rate = handle.getnchannels(), handle.getsampwidth(), handle.getframerate()
            _check_header(path, channels, width, rate)
            raw = handle.readframes(handle.getnframes())
    except (wave.Error, EOFError, OSError, ValueError, OverflowError, MemoryError) as exc:
        raise AudioError(f"{path}: not a readable PCM WAV file ({str(exc)[:200]})") from None
    frame_bytes = width * channels
    if len(raw) % frame_bytes:
        raise AudioError(
            f"{path}: truncated: its data ends inside a sample frame ({len(raw)} bytes of "
            f"{frame_bytes}-byte frames); the file was cut short"
        )
    if not raw:
        raise AudioError(f"{path}: holds no audio (0 sample frames)")
    if len(raw) // frame_bytes > MAX_SECONDS * rate:
        raise AudioError(
            f"{path}: longer than {MAX_SECONDS // 60} minutes; a reference voice is seconds long"
        )
    data = _samples(raw, width)
    if channels > 1:
        data = data.reshape(-1, channels).mean(axis=1)
    return Reference(path.name, data.astype(np.float32), rate)


def _samples(raw: bytes, width: int) -> np.ndarray:
    """Whole frames of `width`-byte little-endian PCM as float32 in [-1, 1]."""
    if width == 1:
        data = (np.frombuffer(raw, dtype=np.uint8).astype(np.float32) - 128.0) / 128.0
    elif width == 2:
        data = np.frombuffer(raw, dtype="<i2").astype(np.float32) / 32768.0
    elif width == 3:
        bytes3 = np.frombuffer(raw, dtype=np.uint8).reshape(-1, 3)
        ints = (
            bytes3[:, 0].astype(np.int32)
            | bytes3[:, 1].astype(np.int32) << 8
            | bytes3[:, 2].astype(np.int32) << 16
        )
        ints = np.where(ints >= 1 << 23, ints - (1 << 24), ints)
        data = ints.astype(np.float32) / float(1 << 23)
    else:  # 4, the only width _check_header leaves
        data = np.frombuffer(raw, dtype="<i4").astype(np.float32) / float(1 << 31)
    return data


def _check_header(path: Path, channels: int, width: int, rate: int) -> None:
    if not MIN_RATE <= rate <= MAX_RATE:
        raise AudioError(f"{path}: sample rate {rate} Hz is out of range ({MIN_RATE}..{MAX_RATE} Hz)")
    if not 1 <= channels <= MAX_CHANNELS:
        raise AudioError(f"{path}: {channels} channels is out of range (1..{MAX_CHANNELS})")
    if width not in (1, 2, 3, 4):
        raise AudioError(f"{path}: unsupported sample width {width}")


def synthetic(
    count: int, seed: int = 0, min_seconds: float = 1.0, max_seconds: float = 6.0
) -> list[Reference]:
    """Voiced-speech-like signals: a wandering pitch with harmonics, syllable envelopes, noise."""
    rng = np.random.default_rng(seed)
    refs = []
    for i in range(count):
        seconds = float(rng.uniform(min_seconds, max_seconds)) if count > 1 else max_seconds
        refs.append(synthetic_one(seconds, int(rng.integers(0, 2**31)), name=f"synthetic-{i:03d}"))
    return refs


def synthetic_one(seconds: float, seed: int, sample_rate: int = 16000, name: str = "synthetic") -> Reference:
    rng = np.random.default_rng(seed)
    n = int(seconds * sample_rate)
    t = np.arange(n) / sample_rate
    pitch = 110 + 80 * rng.random() + 20 * np.sin(2 * math.pi * rng.uniform(0.5, 3) * t)
    phase = 2 * math.pi * np.cumsum(pitch) / sample_rate
    voiced = sum(np.sin(k * phase) / k for k in range(1, 12))
    envelope = np.clip(np.sin(2 * math.pi * rng.uniform(2, 5) * t + rng.random() * 6), 0, None) ** 0.5
    signal = voiced * envelope + 0.05 * rng.standard_normal(n)
    signal = 0.3 * signal / (np.abs(signal).max() + 1e-9)
    return Reference(name, signal.astype(np.float32), sample_rate)
