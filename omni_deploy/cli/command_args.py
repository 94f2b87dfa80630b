"""The options of `diff`, `render`, `rule` and `schema`, declared once (each field is its option:
omni_deploy/common/cli_fields.py; the command builds the dataclass by keyword). Their FILE, A, B
and CODE stay Click arguments: a field declares an option, not a positional argument."""

from __future__ import annotations

from dataclasses import dataclass

from omni_deploy.common import cli_fields as cf
from omni_deploy.common.cli_fields import option, shared_option


@dataclass(frozen=True, kw_only=True)
class DiffArgs:
    platform: str = option(
        "--platform",
        type=cf.platform("none"),
        default="cuda",
        show_default=True,
        help="Compare as a server on this platform sees them; 'none': before any platform section.",
    )
    fmt: str = shared_option(
        "output",
        ("text", "json"),
        default="text",
        help="text for people, json for programs (docs/json-output.md).",
    )
    target_version: str | None = option(
        "--target-version",
        metavar="OLD..NEW",
        default=None,
        help="Compare one FILE as vllm-omni OLD and NEW see it (two releases omni-deploy knows): values "
        "from the bases each release bundles, defaults, findings, Code2Wav behaviour.",
    )


@dataclass(frozen=True, kw_only=True)
class RenderArgs:
    platform: str = option(
        "--platform",
        type=cf.platform("none"),
        default="none",
        show_default=True,
        help="Apply this platform's section as vllm-omni does at start-up. 'none' prints exactly "
        "what vllm-omni's resolve_deploy_yaml returns.",
    )
    show_origin: bool = option(
        "--show-origin", default=False, is_flag=True, help="Show the file:line:col and layer of each value."
    )
    fmt: str = shared_option(
        "output",
        ("yaml", "json"),
        default="yaml",
        help="yaml (loadable by vllm-omni) or json (config and origins, docs/json-output.md).",
    )
    stdin_filename: str | None = shared_option("stdin_filename")


@dataclass(frozen=True, kw_only=True)
class RuleArgs:
    all_codes: bool = option(  # the field is the option's name: --all fills all_codes
        "--all", default=False, is_flag=True, help="Every code's page (docs/findings.md)."
    )


@dataclass(frozen=True, kw_only=True)
class SchemaArgs:
    reference: bool = option(
        "--reference", default=False, is_flag=True, help="Print docs/deploy-reference.md (Markdown) instead."
    )
    findings: bool = option(
        "--findings",
        default=False,
        is_flag=True,
        help="Print docs/findings.md (every finding code, Markdown) instead.",
    )
