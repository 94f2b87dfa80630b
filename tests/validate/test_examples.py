"""Data-driven validate cases: each negative file names the findings it must produce, exactly."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from omni_deploy.commands.validate import validate as validate_command
from omni_deploy.validate.context import Options, model_shape_from_config
from omni_deploy.validate.runner import FileReport, validate_file

DATA = Path(__file__).resolve().parents[1] / "data" / "validate"
NEGATIVE = sorted((DATA / "negative").glob("*.yaml"))
POSITIVE = sorted((DATA / "positive").glob("*.yaml"))
EXPECT = re.compile(r"^# expect: ([EWI]\d+) (\d+):(\d+)$")
OPTIONS = re.compile(r"^# options: (.*)$")


def _options(path: Path) -> Options:
    options = Options(target_version="0.30.0")
    for line in path.read_text().splitlines():
        match = OPTIONS.match(line)
        if not match:
            continue
        args = shlex.split(match.group(1))
        for flag, value in zip(args[::2], args[1::2], strict=True):
            if flag == "--target-version":
                options.target_version = value
            elif flag == "--gpu-memory-gib":
                options.gpu_memory_gib = float(value)
            elif flag == "--model-config":
                options.model_shape = model_shape_from_config(path.parent / value)
            else:
                raise AssertionError(f"{path.name}: unknown option {flag}")
    return options


def _run(path: Path) -> FileReport:
    return validate_file(str(path), _options(path))


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


@pytest.mark.parametrize("path", POSITIVE, ids=[p.name for p in POSITIVE])
def test_positive_example_is_clean(path: Path) -> None:
    report = _run(path)
    assert report.valid
    assert [f.text() for f in report.findings if f.severity != "info"] == []


def test_every_check_has_a_negative_example() -> None:
    codes = {m.group(1) for p in NEGATIVE for m in map(EXPECT.match, p.read_text().splitlines()) if m}
    documented = {
        "E201", "W301", "W302", "W303", "E304", "W305", "W306", "W310", "E311", "E320", "E321", "E322",
        "W323", "E330", "E331", "W332", "W333", "W340", "E350", "W351", "E352", "W360", "W361", "W362",
        "W363", "E370", "I371", "W372", "E380",
    }  # fmt: skip
    assert documented <= codes, sorted(documented - codes)


def test_did_you_mean() -> None:
    report = _run(DATA / "negative" / "unknown_stage_key.yaml")
    assert report.findings[0].hint == "did you mean 'max_num_seqs'?"
    report = _run(DATA / "negative" / "unknown_top_key.yaml")
    assert report.findings[0].hint == "did you mean 'session_mode'?"


def test_strict_turns_warnings_into_errors() -> None:
    path = DATA / "negative" / "unknown_stage_key.yaml"
    assert _run(path).valid
    strict = validate_file(str(path), Options(strict=True))
    assert not strict.valid and strict.findings[0].severity == "error"


def test_command_exists() -> None:
    assert validate_command.name == "validate"
