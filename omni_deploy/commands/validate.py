"""`omni-deploy validate`: check deploy files before a GPU is touched."""

from __future__ import annotations

from pathlib import Path

import click

from omni_deploy.bundled import default_deploy_file
from omni_deploy.config.stage_schema import PLATFORMS
from omni_deploy.knowledge.versions import RELEASED, default_target_version, is_known_target


@click.command()
@click.argument("files", nargs=-1, metavar="[FILE]...")
@click.option(
    "--platform",
    "platforms",
    multiple=True,
    type=click.Choice(("all", *PLATFORMS)),
    help="Platforms to check (repeatable). Default: cuda plus every platform the file has a section for.",
)
@click.option("--strict", is_flag=True, help="Warnings count as errors.")
@click.option(
    "--target-version",
    default=None,
    help=f"vllm-omni version to check against (default: the installed one, else {RELEASED}; 'main' for newer).",
)
@click.option(
    "--gpu-memory-gib",
    type=click.FloatRange(min=0, min_open=True),
    help="Check KV budgets against this card size.",
)
@click.option(
    "--pipeline", default=None, help="Pipeline of files that neither name nor imply one (e.g. minicpmo_4_5)."
)
@click.option(
    "--model-config",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="The model's config.json: lets the Talker KV capacity be checked.",
)
@click.option("-o", "--output", "fmt", type=click.Choice(("text", "json")), default="text", show_default=True)
def validate(
    files: tuple[str, ...],
    platforms: tuple[str, ...],
    strict: bool,
    target_version: str | None,
    gpu_memory_gib: float | None,
    pipeline: str | None,
    model_config: Path | None,
    fmt: str,
) -> int:
    """Check deploy FILEs (default: the bundled MiniCPM-o 4.5 turn profile) as vllm-omni would read them.

    Findings point at file:line:col. Exit 0 when no errors (and, with --strict, no warnings), 1
    otherwise, 2 on usage errors.
    """
    from omni_deploy.validate.context import Options, model_shape_from_config
    from omni_deploy.validate.report import REPORTERS
    from omni_deploy.validate.runner import validate_file

    target = target_version or default_target_version()
    if not is_known_target(target):
        raise click.BadParameter(
            f"{target!r} is not a version (e.g. 0.30.0) or 'main'", param_hint="--target-version"
        )
    chosen = None if not platforms else (PLATFORMS if "all" in platforms else tuple(dict.fromkeys(platforms)))
    shape = None
    if model_config is not None:
        try:
            shape = model_shape_from_config(model_config)
        except (ValueError, KeyError, TypeError) as exc:
            raise click.BadParameter(
                f"cannot read the Talker's shape from it: {exc}", param_hint="--model-config"
            ) from None
    options = Options(chosen, strict, target, gpu_memory_gib, pipeline, shape)
    reports = [validate_file(name, options) for name in (files or (str(default_deploy_file()),))]
    click.echo(REPORTERS[fmt](reports))
    failed = any(not r.valid for r in reports)
    return 1 if failed else 0
