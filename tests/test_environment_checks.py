"""Numbers and paths from the environment, range-checked before use (cli.settings, numbers)."""

from __future__ import annotations

import io

import pytest

from omni_deploy.cli.settings import sanitize_environment
from omni_deploy.common.numbers import MAX_TERMINAL_SIZE, terminal_size, version_problem
from omni_deploy.common.output.tables import UNBOUNDED, width_for


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


SIZES = [
    "80",
    "1",
    str(MAX_TERMINAL_SIZE),
    str(MAX_TERMINAL_SIZE + 1),
    "999999",
    "0",
    "9" * 5000,
    " 80",
    "٣",
    "-1",
    "",
]


@pytest.mark.parametrize("value", SIZES)
def test_one_rule_for_columns_at_start_up_and_in_tables(value: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # sanitize_environment (start-up) and output.tables.width_for agree on every value: what one
    # keeps the other uses as the width, what one drops the other ignores as unset.
    env = {"COLUMNS": value}
    kept = not sanitize_environment(env)
    monkeypatch.setenv("COLUMNS", value)
    width = width_for(io.StringIO())  # not a terminal: COLUMNS or no limit
    assert kept == (terminal_size(value) is not None)
    assert width == (int(value) if kept else UNBOUNDED)


def test_terminal_size_bounds() -> None:
    assert terminal_size("80") == 80 and terminal_size(str(MAX_TERMINAL_SIZE)) == MAX_TERMINAL_SIZE
    for refused in ("0", str(MAX_TERMINAL_SIZE + 1), "999999", "9" * 5000, "٣", " 80", "1_0", ""):
        assert terminal_size(refused) is None, refused
