"""Run the CLI in-process and capture what it prints; find a command by its path."""

from __future__ import annotations

from dataclasses import dataclass

import click
import pytest

from omni_deploy.cli.app import cli, main


@dataclass
class Result:
    code: int
    out: str
    err: str


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> Result:
    code = main(list(args))
    captured = capsys.readouterr()
    return Result(code, captured.out, captured.err)


def command_at(*path: str) -> click.Command:
    """The command `omni-deploy PATH...` names (a group's subcommand by its path), as Click builds it."""
    command: click.Command = cli
    for name in path:
        assert isinstance(command, click.Group)
        found = command.get_command(click.Context(command), name)
        assert found is not None, path
        command = found
    return command
