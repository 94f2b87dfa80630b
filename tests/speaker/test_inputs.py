"""WAV headers are range-checked before anything is allocated; cut data names the file."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from omni_deploy.speaker.inputs import AudioError, read_wav


def _wav(rate: int, channels: int, width: int, declared: int, data: bytes) -> bytes:
    fmt = struct.pack(
        "<HHIIHH", 1, channels, rate, (rate * channels * width) & 0xFFFFFFFF, channels * width, 8 * width
    )
    return (
        b"RIFF"
        + struct.pack("<I", 36 + len(data))
        + b"WAVEfmt "
        + struct.pack("<I", 16)
        + fmt
        + b"data"
        + struct.pack("<I", declared)
        + data
    )


@pytest.mark.parametrize("rate", [1, 4_294_967_295])
def test_a_rate_out_of_range_is_a_message(tmp_path: Path, rate: int) -> None:
    path = tmp_path / "r.wav"
    path.write_bytes(_wav(rate, 1, 2, 64, bytes(64)))
    with pytest.raises(AudioError, match=rf"r\.wav: sample rate {rate} Hz"):
        read_wav(path)


def test_data_cut_inside_a_frame_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "cut.wav"
    path.write_bytes(_wav(16000, 2, 3, 1200, bytes(601)))
    with pytest.raises(AudioError, match=r"cut\.wav: truncated"):
        read_wav(path)


def test_a_good_wav_still_reads(tmp_path: Path) -> None:
    path = tmp_path / "ok.wav"
    path.write_bytes(_wav(16000, 2, 2, 400, bytes(400)))
    ref = read_wav(path)
    assert ref.sample_rate == 16000 and ref.waveform.shape == (100,)
