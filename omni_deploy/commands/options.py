"""Options shared by several commands."""

from __future__ import annotations

import click

from omni_deploy.bundled import default_deploy_file
from omni_deploy.config.stage_schema import PLATFORMS


def deploy_file_argument(required: bool = False) -> click.Argument:
    return click.argument("file", required=required, metavar="FILE")  # type: ignore[return-value]


def default_file_name(file: str | None) -> str:
    return file if file is not None else str(default_deploy_file())


PLATFORM_CHOICE = click.Choice(PLATFORMS)
