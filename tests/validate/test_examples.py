"""Data-driven validate cases: each negative file names the findings it must produce, exactly."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from omni_deploy.cli.commands.validate import validate as validate_command
from omni_deploy.common.codes import CODES
from omni_deploy.validate.context import Options
from omni_deploy.validate.runner import FileReport, validate_file
from tests.support.examples import run_example

DATA = Path(__file__).resolve().parents[1] / "data" / "validate"
NEGATIVE = sorted((DATA / "negative").glob("*.yaml"))
POSITIVE = sorted((DATA / "positive").glob("*.yaml"))
EXPECT = re.compile(r"^# expect: ([EWI]\d+) (\d+):(\d+)$")
SAYS = re.compile(r"^# says: ([EWI]\d+) (.+)$")  # a finding of that code says this text


def _run(path: Path) -> FileReport:
    return run_example(path)


@pytest.mark.parametrize("path", NEGATIVE, ids=[p.name for p in NEGATIVE])
def test_negative_example(path: Path) -> None:
    expected = {
        (m.group(1), int(m.group(2)), int(m.group(3)))
        for m in (EXPECT.match(line) for line in path.read_text().splitlines())
        if m
    }
    assert expected, f"{path.name} has no '# expect: CODE LINE:COL' line"
    report = _run(path)
    # Info findings count only where the file expects some (they are notes, not problems).
    wanted_info = any(code.startswith("I") for code, _, _ in expected)
    got = {
        (f.code, f.line, f.column)
        for f in report.findings
        if f.file.endswith(path.name) and (f.severity != "info" or wanted_info)
    }
    elsewhere = [f.text() for f in report.findings if not f.file.endswith(path.name) and f.severity != "info"]
    assert got == expected, "\n".join(f.text() for f in report.findings)
    assert not elsewhere, elsewhere
    for code, text in (m.groups() for m in map(SAYS.match, path.read_text().splitlines()) if m):
        said = [f.text() for f in report.findings if f.code == code]
        assert any(text in s for s in said), (text, said)


@pytest.mark.parametrize("path", POSITIVE, ids=[p.name for p in POSITIVE])
def test_positive_example_is_clean(path: Path) -> None:
    report = _run(path)
    assert report.valid
    assert [f.text() for f in report.findings if f.severity != "info"] == []


def test_every_check_has_a_negative_example() -> None:
    codes = {m.group(1) for p in NEGATIVE for m in map(EXPECT.match, p.read_text().splitlines()) if m}
    # Every code of the table whose example lives here is expected, at its place, by some file.
    documented = {c.id for c in CODES.values() if c.example.startswith("validate/negative/")}
    assert documented <= codes, sorted(documented - codes)


def test_typos_are_errors_with_did_you_mean() -> None:
    report = _run(DATA / "negative" / "typos.yaml")
    hints = {f.path.rsplit(".", 1)[-1].split("[")[0]: f.hint for f in report.findings if f.code == "E307"}
    assert hints == {
        "max_num_seq": "did you mean 'max_num_seqs'?",
        "gpu_memory_utilisation": "did you mean 'gpu_memory_utilization'?",
        "platfroms": "did you mean 'platforms'?",
        "session_mod": "did you mean 'session_mode'?",
        "cdua": "did you mean 'cuda'?",
        "kv_cache_memory_byte": "did you mean 'kv_cache_memory_bytes'?",
        "extras": "did you mean 'extra'?",
        "codec_chunk_frame": "did you mean 'codec_chunk_frames'?",
        "max_session": "did you mean 'max_sessions'?",
    }
    assert not report.valid


def test_strict_turns_warnings_into_errors() -> None:
    # A file with warnings only (an unknown stage key no longer is one: 0.30.0's typed config refuses it).
    path = DATA / "negative" / "unknown_top_key.yaml"
    assert _run(path).valid
    strict = validate_file(str(path), Options(strict=True))
    # infos stay infos (Code2Wav's cache advice on the base's max_num_seqs); the warning is an error now
    assert not strict.valid and [f.severity for f in strict.findings if f.code == "W301"] == ["error"]


def test_command_exists() -> None:
    assert validate_command.name == "validate"
