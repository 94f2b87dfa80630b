"""Run the CLI in-process and capture what it prints."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from omni_deploy.cli.app import main


@dataclass
class Result:
    code: int
    out: str
    err: str


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> Result:
    code = main(list(args))
    captured = capsys.readouterr()
    return Result(code, captured.out, captured.err)
