"""`bench report` validates every field it reads: bad files are skipped with the reason, never averaged."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import run_cli

DATA = Path(__file__).resolve().parents[1] / "data" / "bench"
GOOD: dict[str, Any] = json.loads((DATA / "flagged" / "a.json").read_text())

# field -> bad value, and a word the reason must contain
BAD_FIELDS: list[tuple[str, Any, str]] = [
    ("completed", "abc", "completed"),
    ("completed", -1, "completed"),
    ("failed", "2", "failed"),
    ("failed", 1.5, "failed"),
    ("duration", -10.0, "duration"),
    ("duration", 0, "duration"),
    ("duration", "10", "duration"),
    ("max_concurrency", True, "max_concurrency"),
    ("max_concurrency", 0, "max_concurrency"),
    ("max_concurrency", 1e30, "max_concurrency"),
    ("max_concurrency", 10**12, "max_concurrency"),
    ("p95_audio_ttfp_ms", -1.0, "p95_audio_ttfp_ms"),
    ("mean_audio_rtf", [1], "mean_audio_rtf"),
    ("errors", "boom", "errors"),
    ("omni_deploy_round", 3, "omni_deploy_round"),
]


def _write(directory: Path, name: str, data: Any) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


@pytest.mark.parametrize(("key", "value", "word"), BAD_FIELDS, ids=[f"{k}={v!r}" for k, v, _ in BAD_FIELDS])
def test_bad_field_is_skipped_with_the_reason(
    key: str, value: Any, word: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = dict(GOOD)
    if key == "errors":
        bad.pop("failed")  # errors are read only when failed is absent
    bad[key] = value
    _write(tmp_path, "bad.json", bad)
    _write(tmp_path, "good.json", GOOD)
    result = run_cli(capsys, "bench", "report", "-o", "json", str(tmp_path))
    assert result.code == 0, result.err
    data = json.loads(result.out)
    assert [s["file"].endswith("bad.json") for s in data["skipped"]] == [True]
    assert word in data["skipped"][0]["reason"]
    assert data["rows"][0]["rounds"] == 1  # only the good file was read
    assert "skipped" in result.err and "bad.json" in result.err


@pytest.mark.parametrize(
    "text",
    [
        '{"completed": 1, "duration": NaN, "max_concurrency": 1}',
        '{"completed": 1, "duration": Infinity, "max_concurrency": 1}',
        '{"completed": 1, "duration": -Infinity, "max_concurrency": 1}',
        '{"completed": 1, "duration": 1e400, "max_concurrency": 1}',
        "[" * 5000 + "]" * 5000,
        '{"a": ' * 500 + "1" + "}" * 500,
        "not json",
    ],
    ids=["nan", "inf", "-inf", "overflow", "deep-list", "deep-object", "garbage"],
)
def test_nothing_valid_left_is_exit_1_and_json_still_parses(
    text: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _write(tmp_path, "r.json", text)
    for fmt in ("text", "json"):
        result = run_cli(capsys, "bench", "report", "-o", fmt, str(tmp_path))
        assert result.code == 1
        assert "no valid measured rounds" in result.err
        assert "skipped" in result.err and "Traceback" not in result.err


def test_json_output_is_strict_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    round_ = dict(GOOD, total_audio_duration_s=1e308, duration=1e-300)  # the quotient overflows
    _write(tmp_path, "r.json", round_)
    result = run_cli(capsys, "bench", "report", "-o", "json", str(tmp_path))
    json.loads(result.out, parse_constant=lambda c: pytest.fail(f"{c} in JSON output"))


def test_a_fifo_in_the_results_folder_is_skipped(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _write(tmp_path, "good.json", GOOD)
    os.mkfifo(tmp_path / "pipe.json")  # reading it would block forever
    result = run_cli(capsys, "bench", "report", str(tmp_path))
    assert result.code == 0
    assert "pipe.json" in result.err and "FIFO" in result.err


def test_a_baseline_without_rounds_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _write(tmp_path / "cand", "good.json", GOOD)
    (tmp_path / "base").mkdir()
    result = run_cli(capsys, "bench", "report", str(tmp_path / "cand"), "--baseline", str(tmp_path / "base"))
    assert result.code == 1
    assert "nothing to compare" in result.err


def test_plot_without_matplotlib_is_a_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "matplotlib" else real(name, *a)
    )
    result = run_cli(capsys, "bench", "report", str(DATA / "candidate"), "--plot", str(tmp_path / "p.png"))
    assert result.code == 1
    assert "plots need matplotlib" in result.err
    assert not (tmp_path / "p.png").exists()
