"""The options of diff, render, rule, schema and bench inputs, report, run and ab, declared once: the
dataclasses are built by keyword only, and an option fills the field of its name whatever its flags."""

from __future__ import annotations

import dataclasses

import pytest

from omni_deploy.bench.inputs_args import InputsArgs
from omni_deploy.bench.report_args import ReportArgs
from omni_deploy.bench.sweep_args import AbArgs, RunArgs
from omni_deploy.cli.command_args import DiffArgs, RenderArgs, RuleArgs, SchemaArgs
from tests.support.cli import command_at

KEYWORD_ONLY = [DiffArgs, RenderArgs, RuleArgs, SchemaArgs, InputsArgs, ReportArgs, RunArgs, AbArgs]


@pytest.mark.parametrize("cls", KEYWORD_ONLY, ids=lambda c: c.__name__)
def test_built_by_keyword_only(cls: type) -> None:
    first = dataclasses.fields(cls)[0]
    assert all(f.kw_only for f in dataclasses.fields(cls))
    with pytest.raises(TypeError):
        cls(first.default)  # positional: refused


@pytest.mark.parametrize(
    ("path", "field", "flags"),
    [
        (("rule",), "all_codes", ["--all"]),
        (("bench", "inputs"), "checkout", ["--from"]),
        (("bench", "report"), "plot_path", ["--plot"]),
        (("diff",), "fmt", ["-o", "--output"]),
        (("render",), "fmt", ["-o", "--output"]),
        (("bench", "ab"), "a_pairs", ["--a"]),
        (("bench", "ab"), "b_pairs", ["--b"]),
    ],
)
def test_an_option_fills_the_field_of_its_name(path: tuple[str, ...], field: str, flags: list[str]) -> None:
    (found,) = [p for p in command_at(*path).params if p.name == field]
    assert found.opts == flags
