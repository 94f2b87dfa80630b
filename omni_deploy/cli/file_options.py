"""FILE arguments of the commands and the options that go with them (stdin, directories, globs)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from omni_deploy.common.bundled import deploy_file_name

if TYPE_CHECKING:
    from omni_deploy.cli.file_args import Input
    from omni_deploy.deployment.model import Deployment


def file_argument(name: str = "file", *, many: bool = False) -> Callable[[Any], Any]:
    """FILE (or FILE...), completed as a path by the shell."""
    return click.argument(
        name,
        nargs=-1 if many else 1,
        required=False,
        metavar="[FILE]..." if many else "[FILE]",
        type=click.Path(allow_dash=True, path_type=str),
    )


def stdin_filename_option() -> Callable[[Any], Any]:
    return click.option(
        "--stdin-filename",
        metavar="NAME",
        default=None,
        help="Name of the file read from '-' in messages; a relative base_config in it is "
        "resolved from NAME's folder (default: <stdin>, the working directory).",
    )


def read_inputs(files: tuple[str, ...] | list[str], stdin_filename: str | None) -> list[Input]:
    """FILE arguments expanded (stdin, directories, globs; the project's `exclude` applies to
    what directories and globs find); none given: the project's deploy files."""
    from omni_deploy.cli.file_args import InputError, expand
    from omni_deploy.cli.settings import project

    if not files:
        return project_inputs()
    try:
        return expand(list(files), sys.stdin, stdin_filename, project().excluded)
    except InputError as exc:
        raise click.BadParameter(str(exc), param_hint="FILE") from None


def project_inputs() -> list[Input]:
    """The project's deploy files (settings `files`, else deploy/); none: the bundled profile,
    with a line on stderr saying so. `files` that match nothing is a usage error."""
    from omni_deploy.cli.file_args import Input
    from omni_deploy.cli.settings import project
    from omni_deploy.config.yaml_loader import display_path

    found = project()
    files = found.deploy_files()
    if files:
        return [Input(display_path(f)) for f in files]
    if found.files is not None:
        raise click.UsageError(f"{found.describe_search()}: {', '.join(found.files)}")
    bundled = deploy_file_name(None)
    click.echo(
        f"omni-deploy: {found.describe_search()} and no FILE given; using the bundled "
        f"MiniCPM-o 4.5 turn profile {display_path(Path(bundled))}",
        err=True,
    )
    return [Input(bundled)]


def one_file_name(file: str | None) -> str:
    """FILE of a command that runs one deployment (serve, k8s): as given, else the project's one."""
    return file if file is not None else _only(project_inputs()).name


def read_one_input(file: str | None, stdin_filename: str | None) -> Input:
    """One FILE for the commands that show one deployment (a directory must hold exactly one)."""
    return _only(read_inputs([file] if file is not None else [], stdin_filename), file)


def _only(found: list[Input], file: str | None = None) -> Input:
    if len(found) != 1:
        names = ", ".join(i.name for i in found[:4]) + (", ..." if len(found) > 4 else "")
        where = file if file is not None else "the project"
        raise click.UsageError(f"{where} holds {len(found)} deploy files ({names}); name one as FILE")
    return found[0]


def load_deployment(source: Input, pipeline: str | None = None) -> Deployment:
    from omni_deploy.deployment.model import Deployment

    return Deployment.load(source.name, pipeline=pipeline, text=source.text, named=source.named)
