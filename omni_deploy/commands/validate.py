"""`omni-deploy validate`: check deploy files before a GPU is touched."""

from __future__ import annotations

from pathlib import Path

import click

from omni_deploy.cli_inputs import file_argument, stdin_filename_option
from omni_deploy.cli_params import PipelineType, PlatformType, TargetVersionType
from omni_deploy.config.stage_schema import PLATFORMS
from omni_deploy.knowledge.versions import RELEASED, default_target_version


@click.command()
@file_argument("files", many=True)
@click.option(
    "--platform",
    "platforms",
    multiple=True,
    type=PlatformType("all"),
    help="Platforms to check (repeatable, any case). Default: cuda plus every platform the file has a section for.",
)
@click.option("--strict", is_flag=True, help="Warnings count as errors.")
@click.option(
    "--target-version",
    type=TargetVersionType(),
    default=None,
    help=f"vllm-omni version to check against: a release, 'installed' or 'main' (default: the installed one, else {RELEASED}).",
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
    "-o",
    "--output",
    "fmt",
    type=click.Choice(("text", "json", "sarif", "github", "junit")),
    default="text",
    show_default=True,
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
    strict: bool,
    target_version: str | None,
    gpu_memory_gib: float | None,
    pipeline: str | None,
    model_config: Path | None,
    gpus_per_node: int | None,
    fmt: str,
    stdin_filename: str | None,
    skip_non_deploy: bool,
) -> int:
    """Check deploy FILEs (default: the bundled MiniCPM-o 4.5 turn profile) as vllm-omni would read them.

    A FILE may be '-' (stdin), a directory (its deploy files) or a quoted glob. Findings point at
    file:line:col. Exit 0 when no errors (and, with --strict, no warnings), 1 otherwise, 2 on
    usage errors.
    """
    from omni_deploy.cli_inputs import read_inputs
    from omni_deploy.validate.context import Options, model_shape_from_config
    from omni_deploy.validate.report import REPORTERS
    from omni_deploy.validate.runner import validate_file

    target = target_version or default_target_version()
    inputs = read_inputs(files, stdin_filename)
    if skip_non_deploy:
        inputs = [i for i in inputs if _is_deploy_file(i)]
    chosen = None if not platforms else (PLATFORMS if "all" in platforms else tuple(dict.fromkeys(platforms)))
    shape = None
    if model_config is not None:
        try:
            shape = model_shape_from_config(model_config)
        except (ValueError, KeyError, TypeError) as exc:
            raise click.BadParameter(
                f"cannot read the Talker's shape from it: {exc}", param_hint="--model-config"
            ) from None
    options = Options(chosen, strict, target, gpu_memory_gib, pipeline, shape, gpus_per_node)
    reports = [validate_file(i.name, options, text=i.text) for i in inputs]
    output = REPORTERS[fmt](reports)
    if fmt == "text":
        import sys

        from omni_deploy.output import color

        if color.wanted(sys.stdout):
            output = _colour_severities(output)
    click.echo(output, color=fmt == "text" or None)
    failed = any(not r.valid for r in reports)
    return 1 if failed else 0


def _is_deploy_file(source: object) -> bool:
    from omni_deploy.config.deploy_file import looks_like_deploy_file
    from omni_deploy.inputs import Input

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
