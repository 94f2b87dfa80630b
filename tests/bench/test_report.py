"""`bench report` on result files with vllm-omni 0.30.0's field names, against hand computations."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.cli import run_cli

DATA = Path(__file__).resolve().parents[1] / "data" / "bench"


def _rows(out: str) -> dict[tuple[str, int], dict]:  # type: ignore[type-arg]
    return {(r["source"], r["concurrency"]): r for r in json.loads(out)["rows"]}


def test_measured_rounds_with_ranges_by_recorded_concurrency(capsys: pytest.CaptureFixture[str]) -> None:
    result = run_cli(capsys, "bench", "report", str(DATA / "candidate"), "-o", "json")
    assert result.code == 0, result.err
    rows = _rows(result.out)
    c4 = rows[("candidate", 4)]
    assert c4["rounds"] == 2 and c4["failed"] == 0  # the discarded round is not counted
    # audio throughput per round: 180/10 = 18.0 and 180/12 = 15.0
    assert c4["audio_throughput"] == pytest.approx({"mean": 16.5, "min": 15.0, "max": 18.0})
    assert c4["ttfa_p50_ms"] == pytest.approx({"mean": 575.0, "min": 570.0, "max": 580.0})
    assert c4["ttfa_p95_ms"] == pytest.approx({"mean": 710.0, "min": 700.0, "max": 720.0})
    assert c4["rtf_mean"] == pytest.approx({"mean": 0.23, "min": 0.22, "max": 0.24})
    assert c4["request_throughput"] == pytest.approx({"mean": 5.7, "min": 5.0, "max": 6.4})
    assert c4["output_audio_s"] == pytest.approx({"mean": 180.0, "min": 180.0, "max": 180.0})
    # A renamed file is grouped by the max_concurrency inside it.
    assert rows[("candidate", 8)]["audio_throughput"]["mean"] == pytest.approx(25.0)


def test_baseline_and_changes(capsys: pytest.CaptureFixture[str]) -> None:
    result = run_cli(
        capsys, "bench", "report", str(DATA / "candidate"), "--baseline", str(DATA / "baseline"), "-o", "json"
    )
    data = json.loads(result.out)
    from tests.support.json_shapes import assert_shape

    assert_shape(data, "bench-report")
    base = _rows(result.out)[("baseline", 4)]
    assert base["rounds"] == 1  # warmup.json is skipped by its name
    assert base["audio_throughput"]["mean"] == pytest.approx(16.0)
    change = next(c for c in data["changes"] if c["concurrency"] == 4)
    assert change["audio_throughput"] == pytest.approx(100 * (16.5 - 16.0) / 16.0)
    assert change["ttfa_p50_ms"] == pytest.approx(100 * (575.0 - 716.0) / 716.0)
    assert all(c["concurrency"] != 8 for c in data["changes"])  # no baseline at C=8


def test_failed_and_incomplete_rounds_are_flagged_not_averaged(capsys: pytest.CaptureFixture[str]) -> None:
    result = run_cli(capsys, "bench", "report", str(DATA / "flagged"), "-o", "json")
    assert result.code == 1
    row = _rows(result.out)[("flagged", 16)]  # sources are named by their folders
    assert row["rounds"] == 1 and row["failed"] == 2
    assert row["ttfa_p95_ms"]["mean"] == pytest.approx(1600.0)  # only the clean round
    assert any("b.json: 2 failed request(s)" in f for f in row["flagged"])
    assert any("c.json: missing ttfa_p95_ms" in f for f in row["flagged"])
    text = run_cli(capsys, "bench", "report", str(DATA / "flagged"))
    assert "flagged, not averaged" in text.out


def test_text_and_markdown(capsys: pytest.CaptureFixture[str]) -> None:
    text = run_cli(capsys, "bench", "report", str(DATA / "candidate"), "--baseline", str(DATA / "baseline"))
    assert "16.500 (15.000-18.000)" in text.out and "Change of candidate vs baseline" in text.out
    md = run_cli(capsys, "bench", "report", str(DATA / "candidate"), "-o", "markdown")
    assert md.out.startswith("| C | Source | Audio-s/s |")


def test_plot(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    out = tmp_path / "sweep.png"
    result = run_cli(
        capsys,
        "bench",
        "report",
        str(DATA / "candidate"),
        "--baseline",
        str(DATA / "baseline"),
        "--plot",
        str(out),
    )
    assert result.code == 0 and out.stat().st_size > 10_000
    again = run_cli(capsys, "bench", "report", str(DATA / "candidate"), "--plot", str(out))
    assert again.code == 2 and "not overwritten" in again.err  # a usage error: --plot names a taken file


def test_bad_inputs(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    (tmp_path / "x.json").write_text("{not json")
    result = run_cli(capsys, "bench", "report", str(tmp_path))
    assert result.code == 1 and "not a readable result file" in result.err
    empty = tmp_path / "empty"
    empty.mkdir()
    assert run_cli(capsys, "bench", "report", str(empty)).code == 1


def test_plot_ticks_title_and_labels() -> None:
    pytest.importorskip("matplotlib")
    import matplotlib.pyplot as plt

    from omni_deploy.bench.plot import figure
    from omni_deploy.bench.report import aggregate
    from omni_deploy.bench.results import read_dir

    rows = aggregate(read_dir(DATA / "candidate").rounds, "candidate")
    fig = figure(rows, "main vs PR")
    try:
        measured = sorted({r.concurrency for r in rows})
        ax = fig.axes[0]
        assert list(ax.get_xticks()) == measured
        assert [t.get_text() for t in ax.get_xticklabels()] == [str(c) for c in measured]
        assert ax.get_xscale() == "log" and ax.xaxis.get_transform().base == 2
        assert ax.get_xlabel() == "concurrency" and ax.get_ylabel() == "seconds of audio per second"
        assert fig.get_suptitle() == "main vs PR"
        titles = [a.get_title() for a in fig.axes]
        assert (
            titles[0] == "Audio-s/s (↑ higher is better)" and titles[1] == "TTFA p50 ms (↓ lower is better)"
        )
        # One title per panel: none repeats its y label, and each says which way is better
        # (the last panel, audio seconds per round, is what was measured, not a score).
        assert all(a.get_title() != a.get_ylabel() for a in fig.axes)
        assert all("is better" in t for t in titles[:5]) and titles[5] == "Audio s"
    finally:
        plt.close(fig)


def test_sources_are_named_by_their_folders_and_the_table_fits(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil

    shutil.copytree(DATA / "candidate", tmp_path / "pr")
    shutil.copytree(DATA / "baseline", tmp_path / "main")
    result = run_cli(capsys, "bench", "report", str(tmp_path / "pr"), "--baseline", str(tmp_path / "main"))
    rows = [line.split()[:2] for line in result.out.splitlines()[2:5]]
    assert rows == [["4", "main"], ["4", "pr"], ["8", "pr"]]
    assert "Change of pr vs main (mean, %):" in result.out
    data = json.loads(
        run_cli(
            capsys,
            "bench",
            "report",
            str(tmp_path / "pr"),
            "--baseline",
            str(tmp_path / "main"),
            "-o",
            "json",
        ).out
    )
    assert {r["source"] for r in data["rows"]} == {"pr", "main"}
    monkeypatch.setenv("COLUMNS", "110")  # a terminal's width: the table wraps its cells to fit
    narrow = run_cli(capsys, "bench", "report", str(tmp_path / "pr"), "--baseline", str(tmp_path / "main"))
    table = narrow.out.split("\n\n")[0].splitlines()
    assert max(len(line) for line in table) <= 110 and any(line.lstrip().startswith("4 ") for line in table)


def test_at_80_columns_tables_wrap_by_column_never_inside_a_number(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import re

    monkeypatch.setenv("COLUMNS", "80")
    out = run_cli(
        capsys, "bench", "report", str(DATA / "candidate"), "--baseline", str(DATA / "baseline")
    ).out
    assert max(len(line) for line in out.splitlines()) <= 80
    # Each block repeats the row's keys and holds whole cells: every row has its concurrency and
    # source on one line, and each number is whole ("16.500 (15.000-18.000)", not "(15.00" / "0-18").
    blocks = [b for b in out.split("\n\n") if b.startswith("C ")]
    assert len(blocks) > 1 and all(b.splitlines()[0].split()[:2] == ["C", "Source"] for b in blocks[:-1])
    rows = [line for b in blocks for line in b.splitlines()[2:]]
    assert all(re.match(r"^[48] +(baseline|candidate) ", line) for line in rows if not line.startswith("C"))
    assert "16.500 (15.000-18.000)" in out and "1075.0" in out
    for number in re.findall(r"[\d.]+", out):
        assert number.count(".") <= 1
    # A single round has no range to show.
    assert "16.000 (16.000-16.000)" not in out and re.search(r"^4 +baseline +1 +0 +16\.000 ", out, re.M)
