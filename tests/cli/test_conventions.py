"""Conventions of the command line as a whole: did-you-mean, completion, colour, help everywhere."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import click
import pytest

from omni_deploy.cli.app import cli
from tests.support.cli import run_cli
from tools.cli_reference import _walk

ROOT = Path(__file__).resolve().parents[2]
BENCH = str(ROOT / "deploy" / "turn-bench.yaml")
TURN = str(ROOT / "deploy" / "minicpmo_4_5_turn.yaml")


def test_mistyped_command_gets_did_you_mean(capsys: pytest.CaptureFixture[str]) -> None:
    result = run_cli(capsys, "valdate", BENCH)
    assert result.code == 2
    assert "No such command 'valdate'. Did you mean 'validate'?" in result.err


def _complete(words: str, cword: int, cwd: Path) -> list[str]:
    env = {
        **os.environ,
        "_OMNI_DEPLOY_COMPLETE": "bash_complete",
        "COMP_WORDS": words,
        "COMP_CWORD": str(cword),
        "PYTHONPATH": str(ROOT),
    }
    code = "from omni_deploy.cli.app import cli; cli(prog_name='omni-deploy')"
    done = subprocess.run([sys.executable, "-c", code], env=env, cwd=cwd, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return [line for line in done.stdout.splitlines() if line]


def test_completion_of_commands_choices_and_paths(tmp_path: Path) -> None:
    assert _complete("omni-deploy val", 1, tmp_path) == ["plain,validate"]
    assert "plain,cuda" in _complete("omni-deploy diff --platform ", 3, tmp_path)
    # FILE arguments complete as paths: the shell lists the files (type "file").
    assert _complete("omni-deploy diff de", 2, tmp_path) == ["file,de"]
    assert _complete("omni-deploy valdate x", 2, tmp_path) == []  # no traceback while typing


def test_color_always_never_and_no_color(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    always = run_cli(capsys, "--color", "always", "diff", TURN, BENCH)
    assert "\x1b[" in always.out
    never = run_cli(capsys, "--color", "never", "diff", TURN, BENCH)
    assert "\x1b[" not in never.out
    monkeypatch.setenv("FORCE_COLOR", "1")
    assert "\x1b[" in run_cli(capsys, "diff", TURN, BENCH).out
    monkeypatch.setenv("NO_COLOR", "1")
    assert "\x1b[" not in run_cli(capsys, "diff", TURN, BENCH).out


def test_every_option_has_help_text() -> None:
    missing = []
    for path, command in _walk(cli, ["omni-deploy"]):
        assert command.help, f"{' '.join(path)} has no help"
        for param in command.params:
            if isinstance(param, click.Option) and not param.help and not param.hidden:
                missing.append(f"{' '.join(path)} {param.opts[-1]}")
    assert not missing, missing


def test_cli_reference_page_is_current() -> None:
    import difflib

    from tools.cli_reference import reference_markdown

    committed, generated = (ROOT / "docs" / "cli.md").read_text(), reference_markdown()
    diff = "".join(list(difflib.unified_diff(committed.splitlines(True), generated.splitlines(True)))[:40])
    assert committed == generated, f"regenerate: python -m tools.cli_reference > docs/cli.md\n{diff}"


def test_validate_colours_severities_only_when_asked(capsys: pytest.CaptureFixture[str]) -> None:
    # A key 0.28.0's code does not read (deploy/turn-bench.yaml silences its W310s on their lines).
    newer = str(ROOT / "tests" / "data" / "validate" / "negative" / "newer_version_key.yaml")
    coloured = run_cli(capsys, "--color", "always", "validate", newer, "--target-version", "0.28.0")
    assert "\x1b[33m\x1b[1mwarning[W310]\x1b[0m: " in coloured.out
    plain = run_cli(capsys, "validate", newer, "--target-version", "0.28.0")  # captured: not a terminal
    assert "\x1b[" not in plain.out and "warning[W310]" in plain.out
    # --color after the command name too; the last one given wins.
    after = run_cli(capsys, "validate", newer, "--target-version", "0.28.0", "--color", "always")
    assert "\x1b[33m\x1b[1mwarning[W310]\x1b[0m: " in after.out
    both = run_cli(
        capsys, "--color", "always", "validate", newer, "--target-version", "0.28.0", "--color", "never"
    )
    assert "\x1b[" not in both.out


def test_command_lists_show_whole_summaries(capsys: pytest.CaptureFixture[str]) -> None:
    # At 80 columns Click cuts a long summary ("Validate FILE (default: the bundled..."): each
    # command's one-line summary is a whole sentence that fits.
    for group in ([], ["bench"], ["spk"]):
        out = run_cli(capsys, *group, "--help").out
        listed = out.split("Commands:\n", 1)[1].split("\n\n", 1)[0].splitlines()
        assert listed, group
        for line in listed:
            assert line.rstrip().endswith(".") and "..." not in line and len(line) <= 80, line


def test_option_help_is_specific(capsys: pytest.CaptureFixture[str]) -> None:
    generic = []
    for path, command in _walk(cli, ["omni-deploy"]):
        for param in command.params:
            if isinstance(param, click.Option) and param.help in ("Output format.", "Output format"):
                generic.append(f"{' '.join(path)} {param.opts[-1]}")
    assert not generic, generic
    k8s = run_cli(capsys, "k8s", "--help").out
    from omni_deploy.k8s.options import DEFAULT_IMAGE

    assert f"[default:{DEFAULT_IMAGE}]" in "".join(k8s.split())  # wrapped anywhere
    report = " ".join(run_cli(capsys, "bench", "report", "--help").out.split())
    assert "--plot FILE" in report and "OUT" not in report
    parity = " ".join(run_cli(capsys, "spk", "parity", "--help").out.split())
    assert "--device [auto|cpu|cuda|cuda:N]" in parity


def test_every_command_takes_color_after_its_name(capsys: pytest.CaptureFixture[str]) -> None:
    for path, command in _walk(cli, ["omni-deploy"]):
        if len(path) > 1:
            assert any(p.name == "color" for p in command.params), " ".join(path)


def test_readme_command_table_is_current() -> None:
    """The README's command table is generated from the commands (issue 33: it listed validate twice
    and left out options the findings ask for)."""
    from tools.cli_reference import readme_table, replace_table

    readme = (ROOT / "README.md").read_text()
    assert readme == replace_table(readme), "regenerate: python -m tools.cli_reference --readme README.md"
    rows = [line for line in readme_table().splitlines()[2:]]
    commands = [row.split("`")[1].split(" [")[0].split(" FILE")[0] for row in rows]
    assert len(commands) == len(set(commands))  # one row per command
    validate = next(row for row in rows if row.startswith("| `omni-deploy validate"))
    for option in ("--model-config", "--pipeline", "--stdin-filename", "--skip-non-deploy"):
        assert f"`{option}`" in validate
