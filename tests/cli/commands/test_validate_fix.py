"""`validate --fix` and `--diff` in a temporary project: each promise of omni_deploy/cli/fix.py."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest

from tests.support.cli import run_cli

ROOT = Path(__file__).resolve().parents[3]
BASE = (ROOT / "tests" / "data" / "validate" / "base_minicpmo.yaml").resolve()

# Typos in keys and a quoted boolean, among comments, blank lines, flow style and odd quoting.
BEFORE = f"""# yaml-language-server: $schema=../schemas/deploy.schema.json
base_config: {BASE}   # the shared profile

stages:
  # the Talker
  - stage_id: 1
    "max_num_seq": 8      # quoted key, comment kept
    gpu_memory_utilisation:   0.05

connectors:
  shm:
    extra: {{codec_chunk_frame: 50, token2wav_trt: "false"}}  # flow style
"""
AFTER = f"""# yaml-language-server: $schema=../schemas/deploy.schema.json
base_config: {BASE}   # the shared profile

stages:
  # the Talker
  - stage_id: 1
    "max_num_seqs": 8      # quoted key, comment kept
    gpu_memory_utilization:   0.05

connectors:
  shm:
    extra: {{codec_chunk_frames: 50, token2wav_trt: false}}  # flow style
"""


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "deploy").mkdir()
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _validate(capsys: pytest.CaptureFixture[str], *args: str):  # type: ignore[no-untyped-def]
    return run_cli(capsys, "validate", "--target-version", "0.30.0", *args)


def test_fix_renames_typos_and_unquotes_in_place_keeping_everything_else(
    capsys: pytest.CaptureFixture[str], repo: Path
) -> None:
    path = repo / "deploy" / "mine.yaml"
    path.write_text(BEFORE)
    shown = _validate(capsys)
    assert shown.code == 1 and shown.out.count("= fix:") == 4
    assert "[*] 4 fixable with `validate --fix`" in shown.out
    fixed = _validate(capsys, "--fix")
    assert path.read_text() == AFTER  # comments, blank lines, quoting, spacing: all as they were
    assert "fixed 4 finding(s) in deploy/mine.yaml" in fixed.err
    assert fixed.code == 0, fixed.out  # what is left after the fixes decides the exit
    assert "E307" not in fixed.out and "E201" not in fixed.out


def test_diff_shows_the_change_and_writes_nothing(capsys: pytest.CaptureFixture[str], repo: Path) -> None:
    path = repo / "deploy" / "mine.yaml"
    path.write_text(BEFORE)
    diff = _validate(capsys, "--diff")
    assert diff.code == 1 and path.read_text() == BEFORE
    assert diff.out.startswith("--- a/deploy/mine.yaml\n+++ b/deploy/mine.yaml\n")
    assert '-    "max_num_seq": 8      # quoted key, comment kept\n' in diff.out
    assert '+    "max_num_seqs": 8      # quoted key, comment kept\n' in diff.out
    assert "would fix 4 finding(s) in 1 file(s)" in diff.err
    path.write_text(AFTER)
    clean = _validate(capsys, "--diff")
    assert clean.code == 0 and clean.out == "" and "nothing to fix" in clean.err


def test_line_endings_and_a_byte_order_mark_are_kept(capsys: pytest.CaptureFixture[str], repo: Path) -> None:
    path = repo / "deploy" / "mine.yaml"
    path.write_bytes(b"\xef\xbb\xbf" + BEFORE.replace("\n", "\r\n").encode())
    _validate(capsys, "--fix")
    assert path.read_bytes() == b"\xef\xbb\xbf" + AFTER.replace("\n", "\r\n").encode()


def test_the_write_is_atomic_keeps_the_mode_and_follows_a_symlink(
    capsys: pytest.CaptureFixture[str], repo: Path
) -> None:
    real = repo / "shared" / "real.yaml"
    real.parent.mkdir()
    real.write_text(BEFORE)
    real.chmod(0o640)
    link = repo / "deploy" / "mine.yaml"
    link.symlink_to(real)
    inode = real.stat().st_ino
    _validate(capsys, "deploy/mine.yaml", "--fix")
    assert link.is_symlink() and real.read_text() == AFTER
    assert real.stat().st_ino != inode  # a new file renamed over the old one, not rewritten in place
    assert real.stat().st_mode & 0o777 == 0o640
    assert sorted(p.name for p in real.parent.iterdir()) == ["real.yaml"]  # no temporary file left


def test_a_failed_write_leaves_the_file_as_it_was(
    capsys: pytest.CaptureFixture[str], repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = repo / "deploy" / "mine.yaml"
    path.write_text(BEFORE)

    def refuse(*_args: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", refuse)
    result = _validate(capsys, "--fix")
    assert result.code == 1 and "Traceback" not in result.err
    assert (
        "not fixed: cannot write deploy/mine.yaml: No space left on device; it is left as it was"
        in result.err
    )
    assert path.read_text() == BEFORE
    assert sorted(p.name for p in path.parent.iterdir()) == ["mine.yaml"]


def test_files_not_validated_themselves_are_never_touched(
    capsys: pytest.CaptureFixture[str], repo: Path
) -> None:
    # A typo in a base file reached through base_config: reported, not fixed (nobody named it).
    base = repo / "base.yaml"
    base.write_text(BASE.read_text() + "duplex_sesion:\n  max_sessions: 4\n")
    overlay = repo / "deploy" / "mine.yaml"
    overlay.write_text("base_config: ../base.yaml\n")
    result = _validate(capsys, "--fix")
    assert base.read_text().endswith("duplex_sesion:\n  max_sessions: 4\n")
    assert overlay.read_text() == "base_config: ../base.yaml\n"
    assert "base.yaml was not validated itself (name it to fix it)" in result.err
    assert result.code == 1 and "E307" in result.out
    named = _validate(capsys, "base.yaml", "--fix")
    assert base.read_text().endswith("duplex_session:\n  max_sessions: 4\n") and "E307" not in named.out


def test_a_bundled_file_found_by_its_bare_name_is_never_written(
    capsys: pytest.CaptureFixture[str], repo: Path
) -> None:
    bundled = ROOT / "deploy" / "minicpmo_4_5_turn.yaml"
    before = bundled.stat().st_mtime_ns
    result = _validate(capsys, "minicpmo_4_5_turn.yaml", "--fix")
    assert result.code == 0 and bundled.stat().st_mtime_ns == before


def test_stdin_gets_its_fixed_text_on_stdout_and_the_report_on_stderr(
    capsys: pytest.CaptureFixture[str], repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(BEFORE))
    result = _validate(capsys, "-", "--stdin-filename", "deploy/mine.yaml", "--fix")
    assert result.out == AFTER
    assert result.err.rstrip().splitlines()[-1].startswith("ok: 1 file;")
    assert not (repo / "deploy" / "mine.yaml").exists()  # stdin is never written anywhere


def test_a_rename_that_would_duplicate_a_key_is_not_offered(
    capsys: pytest.CaptureFixture[str], repo: Path
) -> None:
    path = repo / "deploy" / "mine.yaml"
    text = f"base_config: {BASE}\nstages:\n  - stage_id: 1\n    max_num_seq: 8\n    max_num_seqs: 4\n"
    path.write_text(text)
    result = _validate(capsys, "--fix")
    assert path.read_text() == text and "E307" in result.out and "= fix:" not in result.out


def test_a_fixed_text_that_does_not_validate_is_not_written(tmp_path: Path) -> None:
    # A fix whose result no longer loads (made by hand: the checks make none such) is refused.
    from omni_deploy.cli.file_args import Input
    from omni_deploy.cli.fix import fix_files
    from omni_deploy.validate.context import Options
    from omni_deploy.validate.findings import Finding, Fix
    from omni_deploy.validate.runner import FileReport, validate_file

    path = tmp_path / "mine.yaml"
    path.write_text(f"base_config: {BASE}\nsession_mod: duplex\n")
    options = Options(target_version="0.30.0")
    report = validate_file(str(path), options)
    (typo,) = [f for f in report.findings if f.code == "E307"]
    broken = Fix(typo.file, typo.line, typo.column, (("session_mod", "session_mode: [unclosed"),), "break it")
    bad = FileReport(report.file, [Finding(**{**typo.__dict__, "fix": broken})], report.deployment)
    said: list[str] = []
    outcome = fix_files([Input(str(path))], [bad], options, write=True, out=said.append, err=said.append)
    assert path.read_text() == f"base_config: {BASE}\nsession_mod: duplex\n" and not outcome.changed
    assert any("the fixed text does not load (E101" in line and "left as it was" in line for line in said)


def test_a_file_named_through_a_home_path_is_fixed_as_the_loader_read_it(
    capsys: pytest.CaptureFixture[str], repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `./~/mine.yaml`: pathlib (the loader's reading) takes it for ~/mine.yaml; os.path would not.
    home = repo / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    path = home / "mine.yaml"
    path.write_text(BEFORE)
    diff = _validate(capsys, "--diff", "./~/mine.yaml")
    assert diff.code == 1 and "would fix 4 finding(s) in 1 file(s)" in diff.err, diff.err
    fixed = _validate(capsys, "--fix", "./~/mine.yaml")
    assert path.read_text() == AFTER and fixed.code == 0, fixed.err


def test_a_base_files_finding_at_the_same_place_does_not_refuse_the_fix(
    capsys: pytest.CaptureFixture[str], repo: Path
) -> None:
    # The same typo at the same line and column of the file and of its base: the file's is fixed;
    # the base's stays and does not count as the fix failing.
    typo = "stages:\n  - stage_id: 1\n    max_num_seq: 8\n"
    base = repo / "base.yaml"
    base.write_text(f"base_config: {BASE}\n{typo}")
    mine = repo / "deploy" / "mine.yaml"
    mine.write_text(f"base_config: ../base.yaml\n{typo}")
    result = _validate(capsys, "deploy/mine.yaml", "--fix")
    assert mine.read_text() == "base_config: ../base.yaml\nstages:\n  - stage_id: 1\n    max_num_seqs: 8\n", (
        result.err
    )
    assert base.read_text() == f"base_config: {BASE}\n{typo}"
    assert "still there after the fix" not in result.err
    assert "E307" in result.out  # the base's, left
