"""`omni-deploy validate`: check deploy files before a GPU is touched."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from omni_deploy.cli.file_options import file_argument
from omni_deploy.cli.options_from_dataclass import options_from, picked
from omni_deploy.cli.validate_args import ValidateArgs, ValidateOutputArgs

if TYPE_CHECKING:
    from omni_deploy.cli.file_args import Input
    from omni_deploy.validate.runner import FileReport


@click.command(short_help="Check deploy files as vllm-omni would read them.")
@file_argument("files", many=True)
@options_from(ValidateArgs)
@options_from(ValidateOutputArgs)
def validate(files: tuple[str, ...], **kwargs: Any) -> int:
    """Check deploy FILEs as vllm-omni would read them (default: the project's deploy files).

    Without FILE: the files the project settings' `files` globs name, else the deploy files under
    the project's deploy/ folder, else the bundled MiniCPM-o 4.5 turn profile (a line says so).
    A FILE may be '-' (stdin), a directory (its deploy files) or a quoted glob. Findings point at
    file:line:col. Exit 0 when no errors (and, with --strict, no warnings), 1 otherwise, 2 on
    usage errors. Settings (files, exclude, ignore, target-version, strict) come from the nearest
    .omni-deploy.yaml or pyproject.toml [tool.omni-deploy] at or above the working directory,
    then OMNI_DEPLOY_* variables, then the options. `omni-deploy rule CODE` explains a finding code.
    """
    from omni_deploy.cli.file_options import read_inputs
    from omni_deploy.validate.runner import validate_inputs

    out = ValidateOutputArgs(**picked(ValidateOutputArgs, kwargs))
    inputs = read_inputs(files, out.stdin_filename)
    if out.skip_non_deploy:
        inputs = [i for i in inputs if _is_deploy_file(i)]
    options = ValidateArgs(**picked(ValidateArgs, kwargs)).options()
    reports = validate_inputs([(i.name, i.text, i.named) for i in inputs], options)
    fixed_stdin = False
    if out.fix or out.show_diff:
        from omni_deploy.cli.fix import fix_files

        outcome = fix_files(inputs, reports, options, write=not out.show_diff)
        if out.show_diff:
            return 1 if outcome.changed else 0
        reports, inputs, fixed_stdin = outcome.reports, outcome.inputs, outcome.stdin_printed
    _report(reports, inputs, out.fmt, out.quiet, out.statistics, to_stderr=fixed_stdin)
    failed = any(not r.valid for r in reports)
    return 1 if failed and not out.exit_zero else 0


def _report(
    reports: list[FileReport], inputs: list[Input], fmt: str, quiet: bool, statistics: bool, to_stderr: bool
) -> None:
    """The reporter's document on stdout (on stderr when stdout carries fixed text)."""
    import sys

    from omni_deploy.common.output import color
    from omni_deploy.common.output.tables import UNBOUNDED, width_for
    from omni_deploy.validate.reporters import REPORTERS, ReportOptions

    stream = sys.stderr if to_stderr else sys.stdout
    width = width_for(stream)
    options = ReportOptions(
        color=color.wanted(stream),
        width=None if width >= UNBOUNDED else width,
        quiet=quiet,
        statistics=statistics,
        sources={i.name: body for i in inputs if (body := _stdin_text(i)) is not None},
    )
    REPORTERS[fmt].emit(reports, stream, options)


def _stdin_text(source: Input) -> str | None:
    """What was read from stdin as text, for the code frames (None: not stdin, or not UTF-8)."""
    if not isinstance(source.text, bytes):
        return source.text
    from omni_deploy.common import guarded

    try:
        return guarded.decode(source.text, source.name)
    except guarded.Refused:
        return None


def _is_deploy_file(source: object) -> bool:
    from omni_deploy.cli.file_args import Input
    from omni_deploy.knowledge.deploy_file import is_deploy_source

    assert isinstance(source, Input)
    return is_deploy_source(source.name, source.text)
