"""The text reporter (ruff, rustc): grouped by file, code frames, a summary; --quiet, --statistics,
--exit-zero."""

from __future__ import annotations

from pathlib import Path

import pytest

from omni_deploy.validate.findings import Finding
from omni_deploy.validate.reporters import ReportOptions
from omni_deploy.validate.reporters.text import statistics, text
from omni_deploy.validate.runner import FileReport
from tests.support.cli import run_cli

ROOT = Path(__file__).resolve().parents[2]
NEG = ROOT / "tests" / "data" / "validate" / "negative"
BASE = (NEG.parent / "base_minicpmo.yaml").resolve()


def _finding(file: str, line: int, code: str = "W302", severity: str = "warning", **kw: str) -> Finding:
    return Finding(severity, code, file, line, 5 if line else 0, "$.stages[1].knob", kw.get("message", "m"),
                   kw.get("hint"))  # fmt: skip


def test_findings_are_grouped_by_file_in_order_with_counts() -> None:
    reports = [
        FileReport("a.yaml", [_finding("a.yaml", 3), _finding("base.yaml", 7, "E307", "error")]),
        FileReport("b.yaml", [_finding("b.yaml", 2), _finding("a.yaml", 9)]),
    ]
    out = text(reports, ReportOptions(sources={"a.yaml": "x\n" * 20, "b.yaml": "", "base.yaml": ""}))
    headers = [line for line in out.splitlines() if line.endswith(("warning", "warnings", "error"))]
    assert headers == ["a.yaml: 2 warnings", "base.yaml: 1 error", "b.yaml: 1 warning"]
    assert out.splitlines()[-1] == "invalid: 1 of 2 files; 1 error, 3 warnings, 0 infos (E307 1, W302 3)"


def test_a_finding_about_the_whole_file_has_no_frame_but_its_help() -> None:
    report = FileReport(
        "x.yaml", [_finding("x.yaml", 0, "E107", "error", message="no such file", hint="look")]
    )
    out = text([report]).splitlines()
    assert out[:4] == ["x.yaml: 1 error", "error[E107]: no such file", "  --> x.yaml $.stages[1].knob",
                       "  = help: look"]  # fmt: skip


def test_messages_and_source_are_shown_escaped() -> None:
    # A file name, a message and a source line with terminal escapes: shown, never obeyed.
    evil = "x\x1b]0;owned\x07.yaml"
    report = FileReport(evil, [_finding(evil, 1, message="bad \x1b[2J value")])
    out = text([report], ReportOptions(sources={evil: "k: \x1b[31mred\n"}))
    assert "\x1b" not in out and "\\x1b]0;owned\\x07" in out and "bad \\x1b[2J value" in out


def test_long_messages_wrap_at_the_width_given() -> None:
    report = FileReport("a.yaml", [_finding("a.yaml", 0, message="word " * 40)])
    out = text([report], ReportOptions(width=80))
    assert max(len(line) for line in out.splitlines()) <= 80


def test_statistics_count_each_code_and_mark_the_fixable(capsys: pytest.CaptureFixture[str]) -> None:
    result = run_cli(capsys, "validate", str(NEG / "typos.yaml"), str(NEG / "code2wav_types.yaml"),
                     "--statistics", "--target-version", "0.30.0")  # fmt: skip
    lines = result.out.splitlines()
    assert lines[0].split()[:3] == ["9", "E307", "[*]"] and "typo" in lines[0]
    rows = {line.split()[1]: line for line in lines if line[:5].strip().isdigit()}
    # token2wav_trt: "false" is read with bool() (true): a fixable warning, not a type error
    assert rows["W203"].split()[:3] == ["1", "W203", "[*]"]
    assert rows["E201"].split()[0] == "1" and "[*]" not in rows["E201"]  # codec_chunk_frames: 0
    assert rows["E380"].split()[0] == "1" and "[*]" not in rows["E380"]  # no one right answer
    assert rows["E315"].split()[0] == "2" and "[*]" not in rows["E315"]  # (0.30.0's typed config)
    assert lines[-2].startswith("invalid: 2 of 2 files;")
    assert lines[-1] == "[*] 8 fixable with `validate --fix` (`--diff` shows the change)."
    assert result.code == 1 and "-->" not in result.out  # the counts instead of the findings


def test_statistics_rows_come_from_the_findings() -> None:
    reports = [
        FileReport(
            "a.yaml", [_finding("a.yaml", 1), _finding("a.yaml", 2), _finding("a.yaml", 3, "I313", "info")]
        )
    ]
    assert [row.split()[:2] for row in statistics(reports)] == [["2", "W302"], ["1", "I313"]]


def test_quiet_prints_the_findings_only(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    noisy = run_cli(capsys, "validate", str(NEG / "typos.yaml"), "-q", "--target-version", "0.30.0")
    assert noisy.code == 1 and "error[E307]" in noisy.out
    assert "invalid:" not in noisy.out and "fixable" not in noisy.out
    clean = tmp_path / "clean.yaml"
    clean.write_text(f"base_config: {BASE}\n")
    quiet = run_cli(capsys, "validate", str(clean), "--quiet", "--target-version", "0.30.0")
    assert quiet.code == 0 and quiet.out == ""


def test_exit_zero_keeps_the_report_and_drops_the_failure(capsys: pytest.CaptureFixture[str]) -> None:
    result = run_cli(capsys, "validate", str(NEG / "typos.yaml"), "--exit-zero", "--target-version", "0.30.0")
    assert result.code == 0 and "error[E307]" in result.out and "invalid: 1 of 1 file" in result.out
    usage = run_cli(capsys, "validate", str(NEG / "typos.yaml"), "--exit-zero", "--ignore", "nope")
    assert usage.code == 2  # a usage error is still one


def test_concise_is_one_line_per_finding(capsys: pytest.CaptureFixture[str]) -> None:
    result = run_cli(
        capsys, "validate", str(NEG / "typos.yaml"), "-o", "concise", "--target-version", "0.30.0"
    )
    lines = result.out.splitlines()
    findings = [line for line in lines if "typos.yaml:" in line.split(" ", 1)[0]]
    assert len(findings) == 11 and sum("error[E307]" in line for line in findings) == 9
    assert lines[: len(findings)] == findings  # the findings first, one line each
    assert lines[-1].startswith("invalid: 1 of 1 file;")


def test_every_format_the_option_offers_has_one_reporter_by_that_name() -> None:
    from omni_deploy.cli.commands.validate import validate
    from omni_deploy.validate.reporters import REPORTERS

    (option,) = [p for p in validate.params if p.name == "fmt" or "--format" in getattr(p, "opts", [])]
    assert set(getattr(option.type, "choices", ())) == set(REPORTERS)
    assert all(name == reporter.name for name, reporter in REPORTERS.items())
