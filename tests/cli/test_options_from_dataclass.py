"""Options declared once: the option dataclasses' fields are the commands' options, and the
generator turns a field's plain-data metadata into the Click option it describes."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from omni_deploy.bench.inputs_args import InputsArgs
from omni_deploy.bench.report_args import ReportArgs
from omni_deploy.bench.sweep_args import AbArgs, RunArgs, SweepArgs
from omni_deploy.cli.command_args import DiffArgs, RenderArgs, RuleArgs, SchemaArgs
from omni_deploy.cli.options_from_dataclass import options_from, picked
from omni_deploy.cli.validate_args import ValidateArgs, ValidateOutputArgs
from omni_deploy.common import cli_fields as cf
from omni_deploy.common.cli_fields import OptionValueError, option
from omni_deploy.explain.args import ExplainArgs
from omni_deploy.k8s.cli_options import K8sArgs
from omni_deploy.serve.request import ServeArgs
from omni_deploy.speaker.tool_args import ParityArgs, SpkBenchArgs, StandinArgs
from tests.support.cli import command_at

COMMANDS = [
    (("validate",), ValidateArgs),
    (("validate",), ValidateOutputArgs),
    (("serve",), ServeArgs),
    (("k8s",), K8sArgs),
    (("explain",), ExplainArgs),
    (("diff",), DiffArgs),
    (("render",), RenderArgs),
    (("rule",), RuleArgs),
    (("schema",), SchemaArgs),
    (("bench", "run"), RunArgs),
    (("bench", "run"), SweepArgs),
    (("bench", "ab"), AbArgs),
    (("bench", "ab"), SweepArgs),
    (("bench", "inputs"), InputsArgs),
    (("bench", "report"), ReportArgs),
    (("spk", "make-standin"), StandinArgs),
    (("spk", "parity"), ParityArgs),
    (("spk", "bench"), SpkBenchArgs),
]


@pytest.mark.parametrize(("path", "cls"), COMMANDS, ids=lambda v: " ".join(v) if isinstance(v, tuple) else "")
def test_every_field_is_an_option_of_its_command(path: tuple[str, ...], cls: type) -> None:
    names = [p.name for p in command_at(*path).params]
    fields = [f.name for f in dataclasses.fields(cls)]
    assert [n for n in names if n in fields] == fields  # all of them, in declaration order


@pytest.mark.parametrize(("path", "cls"), COMMANDS, ids=lambda v: " ".join(v) if isinstance(v, tuple) else "")
def test_a_field_defaults_to_what_its_option_gives_when_left_out(path: tuple[str, ...], cls: type) -> None:
    # So that the dataclass built by keyword from defaults is the one the command builds.
    ctx = command_at(*path).make_context(path[-1], [], resilient_parsing=True)  # required ones may be missing
    defaults = {f.name: f.default for f in dataclasses.fields(cls) if f.default is not dataclasses.MISSING}
    assert {name: ctx.params[name] for name in defaults} == defaults


@dataclasses.dataclass(frozen=True, kw_only=True)
class _Toy:
    count: int = option("-n", "--count", type=cf.count(1, 9), default=3, show_default=True, help="How many.")
    words: tuple[str, ...] = option("--word", default=(), multiple=True, metavar="W", help="Words.")
    loud: bool = option("--loud/--quiet", default=False, help="Shout.")
    name: str = option("--name", required=True, check=lambda v: _refuse(v), help="Who.")


def _refuse(value: str) -> str:
    if value == "nobody":
        raise OptionValueError("nobody is not a name", hint="--name (who)")
    return value


@click.command()
@options_from(_Toy)
def _toy(**kwargs: object) -> None:
    click.echo(repr(_Toy(**picked(_Toy, kwargs))) + f" rest={kwargs}")


def test_generated_options_parse_into_the_dataclass_by_keyword() -> None:
    result = CliRunner().invoke(_toy, ["--name", "ann", "-n", "2", "--word", "a", "--word", "b", "--loud"])
    assert result.exit_code == 0, result.output
    assert result.output.strip() == repr(_Toy(count=2, words=("a", "b"), loud=True, name="ann")) + " rest={}"
    assert CliRunner().invoke(_toy, ["--name", "ann"]).output.startswith(repr(_Toy(name="ann")))


def test_generated_help_types_and_checks() -> None:
    help_text = CliRunner().invoke(_toy, ["--help"]).output
    assert "-n, --count INTEGER RANGE 1-9" in help_text and "[default: 3]" in help_text
    assert "--word W" in help_text and "--loud / --quiet" in help_text
    bad = CliRunner().invoke(_toy, ["--name", "ann", "-n", "10"])
    assert bad.exit_code == 2 and "--count" in bad.output
    refused = CliRunner().invoke(_toy, ["--name", "nobody"])
    assert refused.exit_code == 2 and "Invalid value for --name (who): nobody is not a name" in refused.output
    assert CliRunner().invoke(_toy, []).exit_code == 2  # --name is required


@pytest.mark.parametrize(
    "module",
    [
        "omni_deploy.common.cli_fields",
        "omni_deploy.serve.request",
        "omni_deploy.k8s.cli_options",
        "omni_deploy.bench.sweep_args",
        "omni_deploy.bench.inputs_args",
        "omni_deploy.bench.report_args",
        "omni_deploy.explain.args",
        "omni_deploy.cli.command_args",
        "omni_deploy.speaker.tool_args",
    ],
)
def test_option_dataclasses_stay_free_of_click(module: str) -> None:
    code = f"import sys, {module}; sys.exit('click' in sys.modules)"
    root = Path(__file__).resolve().parents[2]
    assert subprocess.run([sys.executable, "-c", code], cwd=root, check=False).returncode == 0


def test_a_check_without_a_hint_is_reported_against_its_option() -> None:
    @click.command()
    @options_from(_Hintless)
    def command(**kwargs: object) -> None:
        _Hintless(**picked(_Hintless, kwargs))

    result = CliRunner().invoke(command, ["--size", "0"])
    assert result.exit_code == 2 and "Invalid value for '--size': no room" in result.output


def _no_room(value: str) -> str:
    if value == "0":
        raise OptionValueError("no room")
    return value


@dataclasses.dataclass(frozen=True)
class _Hintless:
    size: str = option("--size", default="1", check=_no_room, help="Size.")
