"""The options of `bench report`, declared once (each field is its option:
omni_deploy/common/cli_fields.py; the command builds the dataclass by keyword). DIRECTORY stays a
Click argument: a field declares an option, not a positional argument."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from omni_deploy.common import cli_fields as cf
from omni_deploy.common.cli_fields import option, shared_option


@dataclass(frozen=True, kw_only=True)
class ReportArgs:
    baseline: Path | None = option(
        "--baseline",
        type=cf.path(exists=True, file_okay=False),
        default=None,
        help="Results folder to compare against (changes in percent per concurrency).",
    )
    plot_path: Path | None = option(  # the field is the option's name: --plot fills plot_path
        "--plot",
        metavar="FILE",
        type=cf.path(dir_okay=False),
        default=None,
        help="Also draw the sweep into FILE (.png or .svg; never overwritten): one panel per metric, "
        "log2 concurrency axis. Needs matplotlib (the `plot` extra).",
    )
    fmt: str = shared_option(
        "output",
        ("text", "json", "markdown"),
        default="text",
        help="text (a table), json, or markdown (for a pull request).",
    )
