"""`omni-deploy schema`: the JSON Schema of deploy files, or the generated key or finding-code reference."""

from __future__ import annotations

from typing import Any

import click

from omni_deploy.cli.command_args import SchemaArgs
from omni_deploy.cli.options_from_dataclass import options_from, picked


@click.command(short_help="The deploy files' JSON Schema, or a reference page.")
@options_from(SchemaArgs)
def schema(**kwargs: Any) -> int:
    """Print the JSON Schema (2020-12) of vllm-omni deploy files, generated from omni-deploy's knowledge.

    Editors use it through a first line `# yaml-language-server: $schema=<path or URL>`.
    """
    args = SchemaArgs(**picked(SchemaArgs, kwargs))
    if args.reference and args.findings:
        raise click.UsageError("give --reference or --findings, not both")
    if args.findings:
        from omni_deploy.validate.rule_pages import findings_markdown

        click.echo(findings_markdown(), nl=False)
    elif args.reference:
        from omni_deploy.knowledge.reference_doc import reference_markdown

        click.echo(reference_markdown(), nl=False)
    else:
        from omni_deploy.knowledge.schema import schema_text

        click.echo(schema_text(), nl=False)
    return 0
