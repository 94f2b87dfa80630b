"""The host-side plan of one batched pass: every length and offset, in integers, before any work.

All of it follows from the voices' sample counts and rates by the same integer arithmetic vllm-omni
0.30.0's per-voice path implies (torchaudio's resampled length, the S3 log-mel's frames, the S3
tokenizer's two stride-2 convolutions, Kaldi's snip-edges frames, the flow mel's frames), so the
device work needs no lengths read back from the device and the host never waits for it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

S3_RATE = 16000  # the S3 tokenizer's and CAM++'s input rate
FLOW_RATE = 24000  # the flow mel's input rate
S3_HOP = 160
S3_FFT = 400
FBANK_WINDOW, FBANK_SHIFT = 400, 160
FLOW_FFT, FLOW_HOP = 1920, 480
LONG_AUDIO_FRAMES = 3000  # s3tokenizer's quantize splits longer mels into 30 s windows


def resampled_length(samples: int, orig: int, new: int) -> int:
    """torchaudio.functional.resample's output length: ceil(new * n / orig) over the reduced rates."""
    if orig == new:
        return samples
    g = math.gcd(orig, new)
    return math.ceil((new // g) * samples / (orig // g))


def s3_frames(samples16: int) -> int:
    """Frames of s3tokenizer.log_mel_spectrogram: a centred STFT's 1 + n // 160, less the last."""
    return samples16 // S3_HOP


def s3_tokens(frames: int) -> int:
    """Tokens of S3TokenizerV2's encoder: two convolutions of kernel 3, stride 2, padding 1."""
    after_conv1 = (frames + 2 - 1 * (3 - 1) - 1) // 2 + 1
    return (after_conv1 + 2 - 1 * (3 - 1) - 1) // 2 + 1


def fbank_frames(samples16: int) -> int:
    return 0 if samples16 < FBANK_WINDOW else 1 + (samples16 - FBANK_WINDOW) // FBANK_SHIFT


def flow_frames(samples24: int) -> int:
    """Frames of the flow's mel: reflect padding of (1920 - 480) / 2 each side, no centring."""
    padded = samples24 + 2 * ((FLOW_FFT - FLOW_HOP) // 2)
    return 0 if padded < FLOW_FFT else 1 + (padded - FLOW_FFT) // FLOW_HOP


def why_not_batched(samples: int, rate: int) -> str | None:
    """Why a voice must take vllm-omni's own per-voice path (which then raises its own error, or
    handles it), or None. Reflect padding needs more samples than it pads; the S3 tokenizer
    handles mels of more than 30 s with its own sliding window."""
    if rate <= 0:
        return f"sample rate {rate}"
    n16, n24 = resampled_length(samples, rate, S3_RATE), resampled_length(samples, rate, FLOW_RATE)
    if n16 <= S3_FFT // 2 or n24 <= (FLOW_FFT - FLOW_HOP) // 2:
        return f"too short ({samples} samples at {rate} Hz)"
    if fbank_frames(n16) < 2:
        return f"too short for CAM++ ({samples} samples at {rate} Hz)"
    if s3_frames(n16) > LONG_AUDIO_FRAMES:
        return f"longer than 30 s ({samples} samples at {rate} Hz)"
    return None


@dataclass(frozen=True)
class VoicePlan:
    samples: int  # decoded, at `rate`
    rate: int
    samples16: int
    samples24: int
    mel_frames: int  # S3 log-mel
    tokens: int
    fbank_frames: int
    flow_frames: int  # flow mel before padding to up_rate * tokens

    @classmethod
    def of(cls, samples: int, rate: int) -> VoicePlan:
        n16, n24 = resampled_length(samples, rate, S3_RATE), resampled_length(samples, rate, FLOW_RATE)
        frames = s3_frames(n16)
        return cls(samples, rate, n16, n24, frames, s3_tokens(frames), fbank_frames(n16), flow_frames(n24))


def offsets(lengths: list[int]) -> list[int]:
    out, total = [], 0
    for n in lengths:
        out.append(total)
        total += n
    return out
