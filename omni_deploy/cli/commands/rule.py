"""`omni-deploy rule CODE`: one finding code's page, as `ruff rule` prints a rule's."""

from __future__ import annotations

from typing import Any

import click

from omni_deploy.cli.command_args import RuleArgs
from omni_deploy.cli.options_from_dataclass import options_from, picked


@click.command(short_help="Explain a finding code: what, why, examples that fail and pass.")
@click.argument("code", required=False)
@options_from(RuleArgs)
def rule(code: str | None, **kwargs: Any) -> int:
    """Print the page of finding CODE (E350, w351, ...) in Markdown: what the check that reports it
    does, why, an example that fails and one that passes, and what validate says of the failing
    one (drawn as validate's text output draws it). Exit 2 for a code omni-deploy does not report.
    """
    from omni_deploy.validate.rule_pages import findings_markdown, page, pages

    args = RuleArgs(**picked(RuleArgs, kwargs))
    if args.all_codes == (code is not None):
        raise click.UsageError("give one finding CODE or --all")
    if code is None:
        click.echo(findings_markdown(), nl=False)
        return 0
    found, wanted = pages(), code.strip().upper()
    if wanted not in found:
        import difflib

        close = difflib.get_close_matches(wanted, list(found), n=3, cutoff=0.5)
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        raise click.UsageError(f"unknown finding code {code!r}{hint}; every code: omni-deploy rule --all")
    click.echo(page(found[wanted]), nl=False)
    return 0
