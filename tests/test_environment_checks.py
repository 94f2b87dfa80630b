"""Numbers and paths from the environment, range-checked before use (cli_settings, numbers)."""

from __future__ import annotations

from omni_deploy.cli_settings import sanitize_environment
from omni_deploy.numbers import version_problem


def test_sizes_that_are_no_terminal_s_and_relative_xdg_dirs_are_dropped() -> None:
    env = {"COLUMNS": "9" * 5000, "LINES": "40", "XDG_CACHE_HOME": "cache", "XDG_CONFIG_HOME": "/etc/x"}
    assert sorted(sanitize_environment(env)) == ["COLUMNS", "XDG_CACHE_HOME"]
    assert env == {"LINES": "40", "XDG_CONFIG_HOME": "/etc/x"}
    env = {"COLUMNS": "0", "LINES": "٣"}  # zero, and a digit that is not ASCII
    assert sorted(sanitize_environment(env)) == ["COLUMNS", "LINES"] and env == {}


def test_version_strings_are_bounded_before_any_parser() -> None:
    assert version_problem("0.30.0") is None and version_problem("0.30.0rc1.dev12+gabc") is None
    assert "characters" in (version_problem("0." + "3" * 5000) or "")
    assert "digits" in (version_problem("0.1234567890.0") or "")
