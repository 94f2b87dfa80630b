"""validate's output options, declared once (ValidateOutputArgs): the --output formats are the
reporter registry's names, read from it, and the dataclass is built by keyword."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import click
import pytest

from omni_deploy.cli.commands.validate import validate
from omni_deploy.cli.validate_args import ValidateOutputArgs
from omni_deploy.validate.reporters import REPORTERS

ROOT = Path(__file__).resolve().parents[2]


def _output_option() -> click.Option:
    (found,) = [p for p in validate.params if p.name == "fmt"]
    assert isinstance(found, click.Option) and "--output" in found.opts
    return found


def test_the_formats_are_the_reporters_names_in_the_registrys_order() -> None:
    option = _output_option()
    assert isinstance(option.type, click.Choice)
    assert tuple(option.type.choices) == tuple(REPORTERS)
    assert option.default == next(iter(REPORTERS)) == ValidateOutputArgs().fmt == "text"


def test_a_reporter_added_to_the_registry_is_a_format_validate_offers() -> None:
    # Not a second list kept equal by hand: a reporter registered before the command is defined
    # is offered by it (a fresh interpreter, so that the command is defined after the change).
    probe = (
        "from omni_deploy.validate.reporters import REPORTERS\n"
        "REPORTERS['toy'] = REPORTERS['json']\n"
        "from omni_deploy.cli.commands.validate import validate\n"
        "(option,) = [p for p in validate.params if p.name == 'fmt']\n"
        "print(','.join(option.type.choices))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == ",".join([*REPORTERS, "toy"])


def test_the_output_help_describes_every_format() -> None:
    help_text = _output_option().help or ""
    assert all(name in help_text for name in REPORTERS), help_text


def test_defining_the_command_loads_no_checks() -> None:
    # Every command's --help imports this module (the top-level help lists them all): reading the
    # formats from the registry must not load validate's runner and its checks.
    probe = (
        "import sys\n"
        "import omni_deploy.cli.commands.validate\n"
        "loaded = [m for m in ('omni_deploy.validate.runner', 'yaml', 'torch') if m in sys.modules]\n"
        "assert not loaded, loaded\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_built_by_keyword_only() -> None:
    args = ValidateOutputArgs(fmt="json", quiet=True, show_diff=True)
    assert (args.fmt, args.quiet, args.show_diff, args.fix) == ("json", True, True, False)
    with pytest.raises(TypeError):
        ValidateOutputArgs("json")  # type: ignore[call-arg]  # positional: refused


def test_an_option_fills_the_field_of_its_name_whatever_its_flags() -> None:
    by_name = {p.name: p for p in validate.params if isinstance(p, click.Option)}
    assert by_name["show_diff"].opts == ["--diff"] and by_name["quiet"].opts == ["-q", "--quiet"]
