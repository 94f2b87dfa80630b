"""`omni-deploy validate`: check deploy files before a GPU is touched."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import click

from omni_deploy.cli.file_options import file_argument, stdin_filename_option
from omni_deploy.cli.params import MAX_GPUS_PER_NODE, Count, PipelineType, PlatformType, Real, output_option
from omni_deploy.cli.settings import ENV_IGNORE, ENV_STRICT, target_version_option
from omni_deploy.config.stage_schema import PLATFORMS

if TYPE_CHECKING:
    from omni_deploy.cli.file_args import Input
    from omni_deploy.validate.context import Options
    from omni_deploy.validate.runner import FileReport


def _model_folder(value: str | None) -> str | None:
    """--model as the server check's child will read it: a folder's config.json must be a regular
    file of a sane size (a FIFO there would hold the child until the check's time limit)."""
    if not value or not Path(value).is_dir():
        return value  # a name the child cannot find locally: it says so (nothing is downloaded)
    from omni_deploy.common import guarded

    config = Path(value) / "config.json"
    if os.path.lexists(config):
        try:
            guarded.read_bytes(config, str(config), 64 * 1024 * 1024)
        except guarded.Refused as refused:
            raise click.BadParameter(refused.why, param_hint=f"--model ({config})") from None
    return value


@click.command(short_help="Check deploy files as vllm-omni would read them.")
@file_argument("files", many=True)
@click.option(
    "--platform",
    "platforms",
    multiple=True,
    type=PlatformType("all"),
    help="Platforms to check (repeatable, any case). Default: cuda plus every platform the file has a section for.",
)
@click.option(
    "--strict/--no-strict",
    default=None,
    help=f"Warnings count as errors (default: {ENV_STRICT}, else the project settings' strict, else off).",
)
@click.option(
    "--ignore",
    "ignore",
    multiple=True,
    metavar="CODE[,CODE]",
    help=f"Leave these finding codes out (repeatable; adds to {ENV_IGNORE} and the project settings' "
    "ignore). One line: a comment '# omni-deploy: ignore[W310]' on it, or alone on the line above.",
)
@target_version_option(
    "check against",
    "A release is checked against what its code reads; an installed vllm-omni that is not a release is read now.",
)
@click.option(
    "--vllm-omni-source",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    default=None,
    help="A vllm-omni source tree (the folder that holds vllm_omni/, e.g. a main checkout) read as the "
    "target's code.",
)
@click.option(
    "--gpu-memory-gib",
    type=Real(0.0, 1e6, low_open=True),
    help="Check KV budgets against this card size.",
)
@click.option(
    "--pipeline",
    type=PipelineType(),
    default=None,
    help="Pipeline of files that neither name nor imply one (a vllm-omni registry name, e.g. minicpmo_4_5).",
)
@click.option(
    "--model-config",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="The model's config.json: lets the Talker KV capacity be checked.",
)
@click.option(
    "--gpus-per-node",
    type=Count(1, MAX_GPUS_PER_NODE),
    help="Check that the stages can be spread over nodes of this many GPUs (as `omni-deploy k8s` places them).",
)
@click.option(
    "--server-check",
    type=click.Choice(["auto", "on", "require", "off"]),
    default="auto",
    show_default=True,
    help="Also run vllm-omni's own start-up config code on the files, in a child process of the "
    "serving environment's interpreter (no GPU, no weights): auto runs it when that vllm-omni is the "
    "target version; on makes not running an error and a file it cannot decide a warning; require "
    "makes both errors; off skips it.",
)
@click.option(
    "--server-python",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help="The serving environment's Python (the one that has vllm-omni); default: this one.",
)
@click.option(
    "--model",
    default=None,
    callback=lambda ctx, param, value: _model_folder(value),
    help="The model the server will run (a local folder), for pipelines whose set-up reads its "
    "config.json; nothing is downloaded.",
)
@output_option(
    ("text", "concise", "json", "sarif", "github", "junit"),
    help="text: grouped by file, with code frames; concise: one line per finding (grep, editors); "
    "json; sarif (code scanning); github (workflow annotations); junit (XML).",
)
@stdin_filename_option()
@click.option(
    "--skip-non-deploy",
    is_flag=True,
    help="Skip, without a finding, files that are not deploy files (several YAML documents, or "
    "none of vllm-omni's top-level keys); the pre-commit hook passes it.",
)
@click.option(
    "-q", "--quiet", is_flag=True, help="Text output: the findings only; no summary, nothing when clean."
)
@click.option(
    "--statistics",
    is_flag=True,
    help="Text output: how often each code occurs (and [*] where --fix fixes it) instead of the findings.",
)
@click.option(
    "--exit-zero", is_flag=True, help="Exit 0 even when there are errors (usage errors still exit 2)."
)
@click.option(
    "--fix",
    is_flag=True,
    help="Apply the fixes with one right answer (marked `= fix:`: a typo renamed to the key it "
    "misspells, quotes dropped around a boolean or number) in place, comments and layout kept; "
    "a file is written only after its fixed text validated. With '-' the fixed text goes to stdout.",
)
@click.option(
    "--diff",
    "show_diff",
    is_flag=True,
    help="Print what --fix would change, as a unified diff; write nothing.",
)
def validate(
    files: tuple[str, ...],
    platforms: tuple[str, ...],
    strict: bool | None,
    ignore: tuple[str, ...],
    target_version: str | None,
    vllm_omni_source: Path | None,
    gpu_memory_gib: float | None,
    pipeline: str | None,
    model_config: Path | None,
    gpus_per_node: int | None,
    server_check: str,
    server_python: str | None,
    model: str | None,
    fmt: str,
    stdin_filename: str | None,
    skip_non_deploy: bool,
    quiet: bool,
    statistics: bool,
    exit_zero: bool,
    fix: bool,
    show_diff: bool,
) -> int:
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

    inputs = read_inputs(files, stdin_filename)
    if skip_non_deploy:
        inputs = [i for i in inputs if _is_deploy_file(i)]
    options = _options(
        platforms, strict, ignore, target_version, vllm_omni_source, gpu_memory_gib, pipeline, model_config,
        gpus_per_node, server_check, server_python, model,
    )  # fmt: skip
    reports = validate_inputs([(i.name, i.text, i.named) for i in inputs], options)
    fixed_stdin = False
    if fix or show_diff:
        from omni_deploy.cli.fix import fix_files

        outcome = fix_files(inputs, reports, options, write=not show_diff)
        if show_diff:
            return 1 if outcome.changed else 0
        reports, inputs, fixed_stdin = outcome.reports, outcome.inputs, outcome.stdin_printed
    _report(reports, inputs, fmt, quiet, statistics, to_stderr=fixed_stdin)
    failed = any(not r.valid for r in reports)
    return 1 if failed and not exit_zero else 0


def _options(
    platforms: tuple[str, ...],
    strict: bool | None,
    ignore: tuple[str, ...],
    target_version: str | None,
    vllm_omni_source: Path | None,
    gpu_memory_gib: float | None,
    pipeline: str | None,
    model_config: Path | None,
    gpus_per_node: int | None,
    server_check: str = "auto",
    server_python: str | None = None,
    model: str | None = None,
) -> Options:
    """The checks' options: the settings resolved (project, environment, options), files read."""
    from omni_deploy.cli.settings import resolve
    from omni_deploy.validate.context import Options, model_shape_from_config

    settings = resolve(target_version, strict, ignore)
    chosen = None if not platforms else (PLATFORMS if "all" in platforms else tuple(dict.fromkeys(platforms)))
    shape = None
    if model_config is not None:
        try:
            shape = model_shape_from_config(model_config)
        except (ValueError, KeyError, TypeError) as exc:
            raise click.BadParameter(
                f"cannot read the Talker's shape from it: {exc}", param_hint="--model-config"
            ) from None
    return Options(
        chosen, settings.strict, settings.target_version, gpu_memory_gib, pipeline, shape, gpus_per_node,
        vllm_omni_source=vllm_omni_source, ignore=settings.ignore, server_check=server_check,
        server_python=server_python, model=model,
    )  # fmt: skip


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
    from omni_deploy.common import guarded
    from omni_deploy.knowledge.deploy_file import looks_like_deploy_file

    assert isinstance(source, Input)
    try:
        if isinstance(source.text, bytes):
            return looks_like_deploy_file(guarded.decode(source.text, source.name))
        if source.text is not None:
            return looks_like_deploy_file(source.text)
        if not guarded.is_readable_file(source.name):
            return True  # a pipe is read once, by the loader; anything else: validate says why
        return looks_like_deploy_file(guarded.read_text(source.name))
    except guarded.Refused:
        return True  # unreadable (too big, not UTF-8): validate reports why
