"""`omni-deploy diff --target-version OLD..NEW FILE`: one file as two vllm-omni releases see it
(the I/O edge: loading, validating each side, printing; explain/upgrade.py compares).

Each release's bundled bases are read from that release's own deploy folder (the installed
package when it is that release, else its wheel in the knowledge cache, fetched with `pip download
--no-deps` the first time, as `python -m omni_deploy.knowledge.generate` does).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import click

# A file that cannot be loaded exits 2, as `diff` does, so that 1 always means "they differ".
EXIT_TROUBLE = 2


def versions(text: str) -> tuple[str, str]:
    """OLD and NEW of `OLD..NEW`, each a release omni-deploy knows (a usage error otherwise)."""
    from omni_deploy.cli.params import TargetVersionType

    old, sep, new = text.partition("..")
    if not sep or not old.strip() or not new.strip():
        raise click.BadParameter(f"{text!r}: give two releases as OLD..NEW", param_hint="'--target-version'")
    kind = TargetVersionType()
    return kind.convert(old, None, None), kind.convert(new, None, None)


def _deploy_dir(version: str) -> Path:
    from omni_deploy.common import codes
    from omni_deploy.common.bundled import release_deploy_dir
    from omni_deploy.common.errors import ConfigError, Location

    found = release_deploy_dir(version)
    if found is not None:
        return found
    click.echo(f"omni-deploy: reading vllm-omni {version}'s bundled deploy files from its wheel", err=True)
    from omni_deploy.knowledge.generate import wheel_tree

    try:
        return wheel_tree(version) / "vllm_omni" / "deploy"
    except (OSError, Exception) as exc:  # pip or the unpacking failed: said, not raised
        raise ConfigError(
            f"vllm-omni {version}'s bundled deploy files are not here and could not be fetched ({exc})",
            Location(version),
            code=codes.E107,
            hint=f"install vllm-omni {version}, or run `pip download --no-deps vllm-omni=={version}` into "
            "$OMNI_DEPLOY_TEST_CACHE (default .cache/)",
        ) from None


def load_as(name: str, version: str) -> Any:
    """FILE with every base vllm-omni bundles read from `version`'s own deploy folder (a bare name
    that is no file here is looked up there too)."""
    from omni_deploy.common.bundled import is_vllm_omni_bundled
    from omni_deploy.common.errors import ConfigError
    from omni_deploy.config.chain import locate_top_file
    from omni_deploy.deployment.model import Deployment

    def rebase(path: Path) -> Path:
        return _deploy_dir(version) / path.name if is_vllm_omni_bundled(path) else path

    try:
        top = rebase(locate_top_file(name))
    except ConfigError:
        if os.sep in name or "/" in name or not (_deploy_dir(version) / name).is_file():
            raise
        top = _deploy_dir(version) / name
    return Deployment.load(str(top), rebase=rebase)


def upgrade(name: str, spec: str, platform: str | None, fmt: str) -> int:
    from omni_deploy.common.errors import ConfigError
    from omni_deploy.explain.upgrade import upgrade_diff
    from omni_deploy.validate.context import Options
    from omni_deploy.validate.runner import validate_deployment

    old, new = versions(spec)
    platforms = (platform,) if platform else None
    try:
        left, right = load_as(name, old), load_as(name, new)
        findings = [
            validate_deployment(d, Options(target_version=v, platforms=platforms)).findings
            for d, v in ((left, old), (right, new))
        ]
        result = upgrade_diff(left, right, old, new, platform, dict(os.environ), *findings)
    except ConfigError as exc:
        click.echo(f"omni-deploy: error: {exc}", err=True)
        return EXIT_TROUBLE
    if fmt == "json":
        _print_json(left, right, result)
    else:
        _print_text(left, right, result)
    return 0 if result.identical else 1


def _side(deployment: Any) -> dict[str, Any]:
    from omni_deploy.config.yaml_loader import display_path

    return {"file": display_path(deployment.top), "chain": [display_path(p) for p in deployment.chain]}


def _print_json(left: Any, right: Any, result: Any) -> None:
    from omni_deploy.common.output.json_doc import dumps

    body = {
        "a": _side(left),
        "b": _side(right),
        "platform": result.platform,
        "identical": result.identical,
        "summary": _summary(result),
        "changes": [c.as_dict() for c in result.config],
        "upgrade": {
            "from": result.old,
            "to": result.new,
            "defaults": [d.as_dict() for d in result.defaults],
            "findings_new": [f.as_dict() for f in result.refused],
            "findings_gone": [f.as_dict() for f in result.cleared],
            "behaviour": [b.as_dict() for b in result.behaviour],
        },
    }
    click.echo(dumps(body))


def _summary(result: Any) -> dict[str, int]:
    from omni_deploy.config.diff import ADDED, CHANGED, REMOVED

    counts = {kind: sum(1 for c in result.config if c.kind == kind) for kind in (CHANGED, ADDED, REMOVED)}
    return {
        **counts,
        "defaults": len(result.defaults),
        "findings_new": len(result.refused),
        "findings_gone": len(result.cleared),
        "behaviour": len(result.behaviour),
    }


def _print_text(left: Any, right: Any, result: Any) -> None:
    """Both loads' headers, then each part; what came from files is escaped for the terminal."""
    from omni_deploy.common.output import color
    from omni_deploy.common.output.escape import for_terminal
    from omni_deploy.config.yaml_loader import display_path

    colored = color.wanted(sys.stdout)
    where = f"platform {result.platform}" if result.platform else "no platform applied"
    for mark, version, side in (("---", result.old, left), ("+++", result.new, right)):
        chain = " <- ".join(for_terminal(display_path(p)) for p in side.chain)
        click.echo(click.style(f"{mark} vllm-omni {version}: {chain} ({where})", bold=True), color=colored)
    _values_text(result, colored)
    if result.defaults:
        click.echo("defaults of keys the file leaves unset:")
        for d in result.defaults:
            click.echo(f"  {for_terminal(d.line(result.old, result.new))}")
    for title, findings in (
        (f"findings only vllm-omni {result.new} gives:", result.refused),
        (f"findings only vllm-omni {result.old} gives:", result.cleared),
    ):
        if findings:
            click.echo(title)
            click.echo("\n".join(f"  {f.text()}" for f in findings))
    _behaviour_text(result)
    summary = _summary(result)
    click.echo("identical" if result.identical else ", ".join(f"{n} {k}" for k, n in summary.items()))


def _values_text(result: Any, colored: bool) -> None:
    from omni_deploy.cli.diff_values import shown_origin, shown_value
    from omni_deploy.common.output.escape import for_terminal
    from omni_deploy.config.diff import ADDED, CHANGED, REMOVED

    mark = {CHANGED: "~", ADDED: "+", REMOVED: "-"}
    if result.config:
        click.echo("values:")
    for change in result.config:
        click.echo(f"{mark[change.kind]} {for_terminal(change.path)}")
        for version, node, fg in ((result.old, change.a, "red"), (result.new, change.b, "green")):
            if node is not None:
                line = f"    {version}: {shown_value(node)}  ({shown_origin(node)})"
                click.echo(click.style(line, fg=fg), color=colored)


def _behaviour_text(result: Any) -> None:
    from omni_deploy.common.output.escape import for_terminal

    if result.behaviour:
        click.echo("vllm-omni's own Code2Wav:")
    for b in result.behaviour:
        click.echo(f"  {b.platform} {b.topic}:")
        for version, entry in ((result.old, b.old), (result.new, b.new)):
            said = (
                "-" if entry is None else str(entry["says"]) + (f"  [{entry['at']}]" if entry["at"] else "")
            )
            click.echo(f"    {version}: {for_terminal(said)}")
