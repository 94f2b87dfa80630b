"""`omni-deploy spk` commands, run through the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.cli import run_cli
from tests.support.json_shapes import assert_shape

pytest.importorskip("torch")
pytest.importorskip("onnxruntime")


def test_make_standin_says_it_is_a_standin_and_never_overwrites(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "campplus.onnx"
    result = run_cli(capsys, "spk", "make-standin", str(out), "--seed", "3")
    assert result.code == 0, result.err
    assert "stand-in" in result.out and "56 BatchNormalization" in result.out
    before = out.read_bytes()
    again = run_cli(capsys, "spk", "make-standin", str(out))
    assert again.code == 2 and "--force" in again.err  # a usage error: OUT is taken
    assert out.read_bytes() == before


def test_parity_on_synthetic_references(standin_onnx: Path, capsys: pytest.CaptureFixture[str]) -> None:
    onnx_path = standin_onnx
    result = run_cli(capsys, "spk", "parity", "--onnx", str(onnx_path), "--device", "cpu", "--synthetic", "3",
                     "--tf32", "off", "-o", "json")  # fmt: skip
    assert result.code == 0, result.err
    data = json.loads(result.out)
    assert_shape(data, "spk")
    assert data["tf32_off"]["cases"] == 3
    assert data["tf32_off"]["min_cosine"] >= 0.99999
    strict = run_cli(capsys, "spk", "parity", "--onnx", str(onnx_path), "--device", "cpu", "--synthetic", "2",
                     "--min-cosine", "1.5")  # fmt: skip
    assert strict.code == 1 and "below" in strict.err


def test_parity_reads_wav_files(
    standin_onnx: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import wave

    import numpy as np

    onnx_path = standin_onnx
    path = tmp_path / "ref.wav"
    samples = (np.sin(np.arange(24000 * 2) / 9.0) * 8000).astype("<i2")
    with wave.open(str(path), "wb") as handle:
        handle.setnchannels(2)
        handle.setsampwidth(2)
        handle.setframerate(24000)
        handle.writeframes(np.repeat(samples, 2).tobytes())
    result = run_cli(
        capsys, "spk", "parity", "--onnx", str(onnx_path), "--device", "cpu", "--tf32", "off", str(path)
    )
    assert result.code == 0, result.err
    assert "ref.wav" in result.out
    bad = tmp_path / "bad.wav"
    bad.write_text("not audio")
    broken = run_cli(capsys, "spk", "parity", "--onnx", str(onnx_path), "--device", "cpu", str(bad))
    assert broken.code == 1 and "not a readable PCM WAV" in broken.err and "Traceback" not in broken.err


def test_bench_small_run_as_json(standin_onnx: Path, capsys: pytest.CaptureFixture[str]) -> None:
    onnx_path = standin_onnx
    result = run_cli(capsys, "spk", "bench", "--onnx", str(onnx_path), "--device", "cpu", "--seconds", "1",
                     "--batch", "2", "--mixed", "0", "--repeats", "1", "-o", "json")  # fmt: skip
    assert result.code == 0, result.err
    document = json.loads(result.out)
    assert_shape(document, "spk")
    rows = document["rows"]
    assert {r["backend"] for r in rows} == {
        "ours",
        "fbank",
        "fbank+ours",
        "eager-torch",
        "ort-cpu-1thread",
        "ort-cpu-all",
    }
    assert all(r["median_ms"] > 0 for r in rows)
    bad = run_cli(capsys, "spk", "bench", "--onnx", str(onnx_path), "--batch", "x")
    assert bad.code == 2


def test_make_standin_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "campplus.onnx"
    result = run_cli(capsys, "spk", "make-standin", str(out), "-o", "json")
    assert result.code == 0, result.err
    data = json.loads(result.out)
    assert_shape(data, "spk")
    assert (data["path"], data["batchnorm_nodes"], data["avgpool_nodes"]) == (str(out), 56, 52)
    assert data["size_bytes"] == out.stat().st_size


def test_bench_table_says_what_each_column_is(standin_onnx: Path, capsys: pytest.CaptureFixture[str]) -> None:
    result = run_cli(capsys, "spk", "bench", "--onnx", str(standin_onnx), "--device", "cpu", "--seconds", "1",
                     "--batch", "1", "--mixed", "0", "--repeats", "1")  # fmt: skip
    assert result.code == 0, result.err
    header = result.out.splitlines()[0].split()
    assert header[:3] == ["case", "backend", "batch"] and "vs" in header and "ours" in header
    ours = next(line for line in result.out.splitlines()[2:] if " ours " in line)
    assert ours.rstrip().endswith("1.0x")
