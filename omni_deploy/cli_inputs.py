"""FILE arguments of the commands and the options that go with them (stdin, directories, globs)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from omni_deploy.bundled import deploy_file_name

if TYPE_CHECKING:
    from omni_deploy.deployment import Deployment
    from omni_deploy.inputs import Input


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
    """FILE arguments expanded (stdin, directories, globs); none given: the bundled profile."""
    from omni_deploy.inputs import InputError, expand

    try:
        return expand(list(files) or [deploy_file_name(None)], sys.stdin, stdin_filename)
    except InputError as exc:
        raise click.BadParameter(str(exc), param_hint="FILE") from None


def read_one_input(file: str | None, stdin_filename: str | None) -> Input:
    """One FILE for the commands that show one deployment (a directory must hold exactly one)."""
    found = read_inputs([file] if file is not None else [], stdin_filename)
    if len(found) != 1:
        names = ", ".join(i.name for i in found[:4]) + (", ..." if len(found) > 4 else "")
        raise click.BadParameter(
            f"{file} holds {len(found)} deploy files ({names}); name one", param_hint="FILE"
        )
    return found[0]


def load_deployment(source: Input, pipeline: str | None = None) -> Deployment:
    from omni_deploy.deployment import Deployment

    return Deployment.load(source.name, pipeline=pipeline, text=source.text)
