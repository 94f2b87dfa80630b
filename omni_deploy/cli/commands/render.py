"""`omni-deploy render`: print the merged deploy config, base_config resolved."""

from __future__ import annotations

from typing import Any

import click

from omni_deploy.cli.file_options import file_argument, stdin_filename_option
from omni_deploy.cli.params import PlatformType, output_option
from omni_deploy.config.render import to_json, to_yaml, to_yaml_with_origins
from omni_deploy.config.yaml_loader import display_path


@click.command(short_help="The merged deploy config, base_config resolved.")
@file_argument()
@click.option(
    "--platform",
    type=PlatformType("none"),
    default="none",
    show_default=True,
    help="Apply this platform's section as vllm-omni does at start-up. 'none' prints exactly "
    "what vllm-omni's resolve_deploy_yaml returns.",
)
@click.option("--show-origin", is_flag=True, help="Show the file:line:col and layer of each value.")
@output_option(
    ("yaml", "json"), help="yaml (loadable by vllm-omni) or json (config and origins, docs/json-output.md)."
)
@stdin_filename_option()
def render(file: str | None, platform: str, show_origin: bool, fmt: str, stdin_filename: str | None) -> int:
    """Print the effective deploy config of FILE (default: the bundled MiniCPM-o 4.5 turn config).

    The YAML output loads in vllm-omni as a deploy config and renders again to the same result.
    Nothing is written to disk.
    """
    from omni_deploy.cli.file_options import load_deployment, read_one_input

    deployment = load_deployment(read_one_input(file, stdin_filename))
    applied = deployment.on(platform) if platform != "none" else None
    config = applied.config if applied is not None else deployment.config
    if fmt == "json":
        click.echo(_json(deployment, platform, config, show_origin))
        return 0
    from omni_deploy.common.output.escape import yaml_comment  # a file name never ends the comment

    chain = " <- ".join(yaml_comment(display_path(p)) for p in deployment.chain)
    header = f"# Rendered by omni-deploy from {chain}"
    header += f"; platform {platform} applied\n" if platform != "none" else "\n"
    for skipped in applied.skipped if applied else []:
        header += (
            f"# note: platforms.{platform} entry for stage_id {yaml_comment(repr(skipped.stage_id))} at "
            f"{yaml_comment(skipped.origin.location)} matches no stage and is skipped\n"
        )
    click.echo(to_yaml_with_origins(config, header) if show_origin else to_yaml(config, header), nl=False)
    return 0


def _json(deployment: Any, platform: str, config: Any, show_origin: bool) -> str:
    """One shape with or without --show-origin: `origins` is empty without it."""
    import json

    from omni_deploy.common.output.json_doc import dumps
    from omni_deploy.config.diff import origin_dict
    from omni_deploy.config.nodes import iter_leaves

    body = {
        "file": display_path(deployment.top),
        "chain": [display_path(p) for p in deployment.chain],
        "platform": None if platform == "none" else platform,
        "config": json.loads(to_json(config)),
        "origins": {path: origin_dict(leaf.origin) for path, leaf in iter_leaves(config)}
        if show_origin
        else {},
    }
    return dumps(body)
