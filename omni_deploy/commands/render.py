"""`omni-deploy render`: print the merged deploy config, base_config resolved."""

from __future__ import annotations

import click

from omni_deploy.config.render import (
    to_json,
    to_json_with_origins,
    to_yaml,
    to_yaml_with_origins,
)
from omni_deploy.config.stage_schema import PLATFORMS
from omni_deploy.config.yaml_loader import display_path


@click.command()
@click.argument("file", required=False, metavar="[FILE]")
@click.option(
    "--platform",
    type=click.Choice(("none", *PLATFORMS)),
    default="none",
    show_default=True,
    help="Apply this platform's section as vllm-omni does at start-up. 'none' prints exactly "
    "what vllm-omni's resolve_deploy_yaml returns.",
)
@click.option("--show-origin", is_flag=True, help="Show the file:line:col and layer of each value.")
@click.option("-o", "--output", "fmt", type=click.Choice(("yaml", "json")), default="yaml", show_default=True)
def render(file: str | None, platform: str, show_origin: bool, fmt: str) -> int:
    """Print the effective deploy config of FILE (default: the bundled MiniCPM-o 4.5 turn config).

    The YAML output loads in vllm-omni as a deploy config and renders again to the same result.
    Nothing is written to disk.
    """
    from omni_deploy.bundled import deploy_file_name
    from omni_deploy.deployment import Deployment

    deployment = Deployment.load(deploy_file_name(file))
    applied = deployment.on(platform) if platform != "none" else None
    config = applied.config if applied is not None else deployment.config
    if fmt == "json":
        click.echo(to_json_with_origins(config) if show_origin else to_json(config))
        return 0
    chain = " <- ".join(display_path(p) for p in deployment.chain)
    header = f"# Rendered by omni-deploy from {chain}"
    header += f"; platform {platform} applied\n" if platform != "none" else "\n"
    for skipped in applied.skipped if applied else []:
        header += (
            f"# note: platforms.{platform} entry for stage_id {skipped.stage_id!r} at "
            f"{skipped.origin.location} matches no stage and is skipped\n"
        )
    click.echo(to_yaml_with_origins(config, header) if show_origin else to_yaml(config, header), nl=False)
    return 0
