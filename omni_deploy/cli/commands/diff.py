"""`omni-deploy diff`: what a server would see differently between two deploy files."""

from __future__ import annotations

import sys
from typing import Any

import click

from omni_deploy.cli.command_args import DiffArgs
from omni_deploy.cli.diff_values import shown_origin, shown_value
from omni_deploy.cli.options_from_dataclass import options_from, picked

# A file that cannot be loaded exits 2, as `diff` does, so that 1 always means "they differ".
EXIT_TROUBLE = 2


@click.command(short_help="What a server sees differently in two files or releases.")
@click.argument("a", metavar="A", type=click.Path(dir_okay=False))
@click.argument("b", metavar="[B]", type=click.Path(dir_okay=False), required=False)
@options_from(DiffArgs)
def diff(a: str, b: str | None, **kwargs: Any) -> int:
    """Show the effective difference of deploy files A and B: each value that differs after the
    base_config chains are merged and the platform applied, with both values and the file:line
    each came from.

    With --target-version OLD..NEW and one FILE (A): what a server of that file sees differently
    after upgrading vllm-omni from OLD to NEW: values from the bases each release bundles
    (minicpmo_4_5.yaml and the like, read from that release's own deploy folder), defaults that
    changed for keys the file leaves unset, keys no longer or newly read and values newly refused
    (validate's findings that one release gives only), and what vllm-omni's own Code2Wav does
    differently (TF32, reference prefetch, CAM++'s device).

    Stages are matched by stage_id, not by position. Exit 0 when the two are the same, 1 when they
    differ, 2 when a file cannot be loaded (like `diff`).

    Examples (what the benchmark overlay changes in the bundled turn profile; what upgrading
    changes for a file on vllm-omni's bundled minicpmo_4_5.yaml):
    omni-deploy diff deploy/minicpmo_4_5_turn.yaml deploy/turn-bench.yaml
    omni-deploy diff --target-version 0.30.0..0.32.0rc1 my-profile.yaml
    """
    from omni_deploy.common.errors import ConfigError
    from omni_deploy.config.diff import ADDED, CHANGED, REMOVED, diff_configs
    from omni_deploy.deployment.model import Deployment

    args = DiffArgs(**picked(DiffArgs, kwargs))
    applied = None if args.platform == "none" else args.platform
    if args.target_version is not None:
        if b is not None:
            raise click.UsageError("--target-version OLD..NEW compares one FILE; give A only")
        from omni_deploy.cli.upgrade_diff import upgrade

        return upgrade(a, args.target_version, applied, args.fmt)
    if b is None:
        raise click.UsageError("give two files A and B, or one FILE with --target-version OLD..NEW")
    try:
        left, right = Deployment.load(a), Deployment.load(b)
        configs = [d.on(applied).config if applied else d.config for d in (left, right)]
    except ConfigError as exc:
        click.echo(f"omni-deploy: error: {exc}", err=True)
        return EXIT_TROUBLE
    changes = diff_configs(*configs)
    counts = {kind: sum(1 for c in changes if c.kind == kind) for kind in (CHANGED, ADDED, REMOVED)}
    if args.fmt == "json":
        _print_json(left, right, applied, changes, counts)
    else:
        _print_text(left, right, applied, changes, counts)
    return 1 if changes else 0


def _print_json(
    left: Any, right: Any, applied: str | None, changes: list[Any], counts: dict[str, int]
) -> None:
    from omni_deploy.common.output.json_doc import dumps
    from omni_deploy.config.yaml_loader import display_path

    sides = {
        name: {"file": display_path(e.top), "chain": [display_path(p) for p in e.chain]}
        for name, e in (("a", left), ("b", right))
    }
    body = {
        **sides,
        "platform": applied,
        "identical": not changes,
        "summary": counts,
        "changes": [c.as_dict() for c in changes],
    }
    click.echo(dumps(body))


def _print_text(
    left: Any, right: Any, applied: str | None, changes: list[Any], counts: dict[str, int]
) -> None:
    """Both files' headers, then each change with both values and where each came from (escaped
    for the terminal: paths and origins come from the files)."""
    from omni_deploy.common.output import color
    from omni_deploy.common.output.escape import for_terminal
    from omni_deploy.config.diff import ADDED, CHANGED, REMOVED
    from omni_deploy.config.yaml_loader import display_path

    colored = color.wanted(sys.stdout)
    where = f"platform {applied}" if applied else "no platform applied"
    click.echo(
        click.style(f"--- a: {for_terminal(display_path(left.top))} ({where})", bold=True), color=colored
    )
    click.echo(
        click.style(f"+++ b: {for_terminal(display_path(right.top))} ({where})", bold=True), color=colored
    )
    mark = {CHANGED: "~", ADDED: "+", REMOVED: "-"}
    for change in changes:
        click.echo(f"{mark[change.kind]} {for_terminal(change.path)}")
        for side, node, fg in (("a", change.a, "red"), ("b", change.b, "green")):
            if node is not None:
                line = f"    {side}: {shown_value(node)}  ({shown_origin(node)})"
                click.echo(click.style(line, fg=fg), color=colored)
    summary = ", ".join(f"{n} {kind}" for kind, n in counts.items())
    click.echo("identical" if not changes else summary)
