"""`omni-deploy render`: print the merged deploy config, base_config resolved."""

from __future__ import annotations

from typing import Any

import click

from omni_deploy.cli.command_args import RenderArgs
from omni_deploy.cli.file_options import file_argument
from omni_deploy.cli.options_from_dataclass import options_from, picked
from omni_deploy.config.render import to_json, to_yaml, to_yaml_with_origins
from omni_deploy.config.yaml_loader import display_path


@click.command(short_help="The merged deploy config, base_config resolved.")
@file_argument()
@options_from(RenderArgs)
def render(file: str | None, **kwargs: Any) -> int:
    """Print the effective deploy config of FILE (default: the bundled MiniCPM-o 4.5 turn config).

    The YAML output loads in vllm-omni as a deploy config and renders again to the same result.
    Nothing is written to disk.
    """
    from omni_deploy.cli.file_options import load_deployment, read_one_input

    args = RenderArgs(**picked(RenderArgs, kwargs))
    deployment = load_deployment(read_one_input(file, args.stdin_filename))
    applied = deployment.on(args.platform) if args.platform != "none" else None
    config = applied.config if applied is not None else deployment.config
    if args.fmt == "json":
        click.echo(_json(deployment, args.platform, config, args.show_origin))
        return 0
    from omni_deploy.common.output.escape import yaml_comment  # a file name never ends the comment

    chain = " <- ".join(yaml_comment(display_path(p)) for p in deployment.chain)
    header = f"# Rendered by omni-deploy from {chain}"
    header += f"; platform {args.platform} applied\n" if args.platform != "none" else "\n"
    for skipped in applied.skipped if applied else []:
        header += (
            f"# note: platforms.{args.platform} entry for stage_id {yaml_comment(repr(skipped.stage_id))} at "
            f"{yaml_comment(skipped.origin.location)} matches no stage and is skipped\n"
        )
    click.echo(
        to_yaml_with_origins(config, header) if args.show_origin else to_yaml(config, header), nl=False
    )
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
