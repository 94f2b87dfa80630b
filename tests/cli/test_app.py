"""The exit-code map: every error type it names exists, and --help documents the codes."""

from __future__ import annotations

import importlib

import click
import pytest

from omni_deploy.cli.app import EXIT_CODES, EXIT_HELP, exit_code_of
from omni_deploy.common.errors import ConfigError, Interrupted, ProcessExited, ReadinessTimeout
from tests.support.cli import run_cli


@pytest.mark.parametrize("name", sorted(EXIT_CODES))
def test_each_mapped_error_type_exists(name: str) -> None:
    if name.startswith("omni_deploy.speaker"):
        pytest.importorskip("numpy")
    module, _, qualname = name.rpartition(".")
    cls = getattr(importlib.import_module(module), qualname)
    assert isinstance(cls, type) and issubclass(cls, BaseException)


def test_error_types_map_to_their_codes() -> None:
    assert exit_code_of(ConfigError("x", code="E101")) == 1
    assert exit_code_of(click.BadParameter("x")) == 2
    assert exit_code_of(RuntimeError("x")) == 3
    assert exit_code_of(ProcessExited("the server", 3)) == 4
    assert exit_code_of(ReadinessTimeout("x")) == 124
    assert exit_code_of(Interrupted("x")) == 130
    assert exit_code_of(KeyboardInterrupt()) == 130


def test_help_lists_the_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    result = run_cli(capsys, "--help")
    assert result.code == 0
    flat = " ".join(result.out.split())
    assert " ".join(EXIT_HELP.split()) in flat
    for code in ("0", "1", "2", "3", "4", "124", "130"):
        assert f" {code} " in flat
