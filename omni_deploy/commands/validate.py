"""`omni-deploy validate`: check deploy files before a GPU is touched."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from omni_deploy.cli_inputs import file_argument, stdin_filename_option
from omni_deploy.cli_params import PipelineType, PlatformType, TargetVersionType, output_option
from omni_deploy.config.stage_schema import PLATFORMS
from omni_deploy.knowledge.versions import RELEASED, default_target_version

if TYPE_CHECKING:
    from omni_deploy.validate.context import ModelShape
    from omni_deploy.validate.project import ProjectSettings


@click.command()
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
    help="Warnings count as errors (default: the project settings' strict, else off).",
)
@click.option(
    "--ignore",
    "ignore",
    multiple=True,
    metavar="CODE[,CODE]",
    help="Leave these finding codes out (repeatable; adds to the project settings' ignore). One line: "
    "a comment '# omni-deploy: ignore[W310]' on it, or alone on the line above.",
)
@click.option(
    "--target-version",
    type=TargetVersionType(),
    default=None,
    help="vllm-omni version to check against: a release, 'installed' or 'main' (default: the project "
    f"settings', else the installed one, else {RELEASED}). A release is checked against what its code "
    "reads; an installed vllm-omni that is not a release is read now.",
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
    type=click.FloatRange(min=0, min_open=True),
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
    type=click.IntRange(min=1),
    help="Check that the stages can be spread over nodes of this many GPUs (as `omni-deploy k8s` places them).",
)
@click.option(
    "--server-check",
    type=click.Choice(["auto", "on", "off"]),
    default="auto",
    show_default=True,
    help="Also run vllm-omni's own start-up config code on the files, in a child process of the "
    "serving environment's interpreter (no GPU, no weights): auto runs it when that vllm-omni is the "
    "target version, on makes not running an error, off skips it.",
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
    help="The model the server will run (a local folder), for pipelines whose set-up reads its "
    "config.json; nothing is downloaded.",
)
@output_option(
    ("text", "json", "sarif", "github", "junit"),
    help="text for people; json; sarif (code scanning); github (workflow annotations); junit (XML).",
)
@stdin_filename_option()
@click.option(
    "--skip-non-deploy",
    is_flag=True,
    help="Skip, without a finding, files that are not deploy files (several YAML documents, or "
    "none of vllm-omni's top-level keys); the pre-commit hook passes it.",
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
) -> int:
    """Check deploy FILEs (default: the bundled MiniCPM-o 4.5 turn profile) as vllm-omni would read them.

    A FILE may be '-' (stdin), a directory (its deploy files) or a quoted glob. Findings point at
    file:line:col. Exit 0 when no errors (and, with --strict, no warnings), 1 otherwise, 2 on
    usage errors. Project settings (ignore, target-version, strict) come from the nearest
    .omni-deploy.yaml or pyproject.toml [tool.omni-deploy] at or above the working directory.
    """
    from omni_deploy.cli_inputs import read_inputs
    from omni_deploy.validate.context import Options
    from omni_deploy.validate.report import REPORTERS
    from omni_deploy.validate.runner import validate_inputs

    settings = _project_settings(ignore)
    target = target_version or settings.target_version or default_target_version()
    inputs = read_inputs(files, stdin_filename)
    if skip_non_deploy:
        inputs = [i for i in inputs if _is_deploy_file(i)]
    chosen = None if not platforms else (PLATFORMS if "all" in platforms else tuple(dict.fromkeys(platforms)))
    strict = settings.strict if strict is None else strict
    options = Options(
        chosen, bool(strict), target, gpu_memory_gib, pipeline, _model_shape(model_config), gpus_per_node,
        vllm_omni_source=vllm_omni_source, ignore=settings.ignore, server_check=server_check,
        server_python=server_python, model=model,
    )  # fmt: skip
    reports = validate_inputs([(i.name, i.text) for i in inputs], options)
    output = REPORTERS[fmt](reports)
    if fmt == "text":
        import sys

        from omni_deploy.output import color

        if color.wanted(sys.stdout):
            output = _colour_severities(output)
    click.echo(output, color=fmt == "text" or None)
    failed = any(not r.valid for r in reports)
    return 1 if failed else 0


def _model_shape(model_config: Path | None) -> ModelShape | None:
    from omni_deploy.validate.context import model_shape_from_config

    if model_config is None:
        return None
    try:
        return model_shape_from_config(model_config)
    except (ValueError, KeyError, TypeError) as exc:
        raise click.BadParameter(
            f"cannot read the Talker's shape from it: {exc}", param_hint="--model-config"
        ) from None


def _project_settings(ignore: tuple[str, ...]) -> ProjectSettings:
    """The project settings found from the working directory, with --ignore's codes added."""
    from dataclasses import replace

    from omni_deploy.validate import project

    settings = project.find(Path.cwd())
    codes = set(settings.ignore)
    for text in ignore:
        try:
            codes |= project.parse_codes(text)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--ignore") from None
    target = settings.target_version
    if target is not None:
        try:
            target = TargetVersionType().convert(target, None, None)
        except click.BadParameter as exc:
            raise click.UsageError(f"{settings.source}: target-version: {exc.message}") from None
    return replace(settings, ignore=frozenset(codes), target_version=target)


def _is_deploy_file(source: object) -> bool:
    from omni_deploy.inputs import Input
    from omni_deploy.knowledge.deploy_file import looks_like_deploy_file

    assert isinstance(source, Input)
    if source.text is not None:
        return looks_like_deploy_file(source.text)
    try:
        return looks_like_deploy_file(Path(source.name).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError):
        return True  # unreadable: validate reports why


def _colour_severities(text: str) -> str:
    """`error[E201]` red, `warning[...]` yellow, `info[...]` blue: the word a reader scans for."""
    import re

    styles = {"error": "red", "warning": "yellow", "info": "blue"}
    return re.sub(
        r": (error|warning|info)\[",
        lambda m: ": " + click.style(m.group(1), fg=styles[m.group(1)], bold=True) + "[",
        text,
    )
