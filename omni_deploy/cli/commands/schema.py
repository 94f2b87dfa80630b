"""`omni-deploy schema`: the JSON Schema of deploy files, or the generated key or finding-code reference."""

from __future__ import annotations

import click


@click.command(short_help="The deploy files' JSON Schema, or a reference page.")
@click.option("--reference", is_flag=True, help="Print docs/deploy-reference.md (Markdown) instead.")
@click.option(
    "--findings", is_flag=True, help="Print docs/findings.md (every finding code, Markdown) instead."
)
def schema(reference: bool, findings: bool) -> int:
    """Print the JSON Schema (2020-12) of vllm-omni deploy files, generated from omni-deploy's knowledge.

    Editors use it through a first line `# yaml-language-server: $schema=<path or URL>`.
    """
    if reference and findings:
        raise click.UsageError("give --reference or --findings, not both")
    if findings:
        from omni_deploy.validate.rule_pages import findings_markdown

        click.echo(findings_markdown(), nl=False)
    elif reference:
        from omni_deploy.knowledge.reference_doc import reference_markdown

        click.echo(reference_markdown(), nl=False)
    else:
        from omni_deploy.knowledge.schema import schema_text

        click.echo(schema_text(), nl=False)
    return 0
