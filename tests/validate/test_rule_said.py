"""`omni-deploy rule CODE` shows what validate says of the page's failing example, drawn as the
text reporter draws it: the same message, location, code frame and fix line."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from omni_deploy.validate.rule_pages import pages, said
from tests.support.cli import run_cli

ROOT = Path(__file__).resolve().parents[2]


def _shown(page: str) -> list[str]:
    """The lines of the page's `What validate says` block."""
    lines = page.splitlines()
    start = lines.index("## What validate says of the failing example") + 3
    return lines[start : lines.index("```", start)]


@pytest.mark.parametrize("code", ["E307", "E201", "E350"])
def test_the_page_draws_the_finding_as_validate_does(
    code: str, capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shown = _shown(run_cli(capsys, "rule", code).out)
    assert shown[0].startswith(f"error[{code}]: ")
    assert any(line.startswith("  --> example.yaml:") for line in shown)
    assert any(line.lstrip().startswith("|") and "^" in line for line in shown)  # the caret under the spot
    # The same lines come out of validate run on the example in a project of its own, at the
    # page's width.
    shutil.copy(ROOT / "deploy" / "minicpmo_4_5_turn.yaml", tmp_path)
    (tmp_path / "example.yaml").write_text(pages()[code].fails)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "100")
    args = ("validate", "example.yaml", "--target-version", "0.30.0", "--server-check", "off")
    lines = run_cli(capsys, *args).out.splitlines()
    assert shown[0] in lines, lines
    first = lines.index(shown[0])
    assert lines[first : first + len(shown)] == shown


def test_a_fixable_code_shows_its_fix(capsys: pytest.CaptureFixture[str]) -> None:
    shown = _shown(run_cli(capsys, "rule", "E307").out)
    assert "  = fix: rename 'max_num_seq' to 'max_num_seqs' (with --fix)" in shown
    assert "    |     ^^^^^^^^^^^ did you mean 'max_num_seqs'?" in shown


def test_the_page_is_the_same_from_any_folder(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Messages that name files (a cycle, a missing base) name them without the scratch folder.
    here = run_cli(capsys, "rule", "E111").out
    monkeypatch.chdir(tmp_path)
    assert run_cli(capsys, "rule", "E111").out == here
    assert "tmp" not in "\n".join(_shown(here))


def test_examples_that_are_commands_or_need_files_show_nothing() -> None:
    docs = pages()
    commands = [d for d in docs.values() if d.fails.startswith("$ ")]
    needs_a_file = [d for d in docs.values() if "--model-config" in d.fails]
    assert commands and needs_a_file
    assert all(said(d) == [] for d in commands + needs_a_file)
