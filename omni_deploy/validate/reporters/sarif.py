"""sarif: SARIF 2.1.0 for code scanning (one run, one rule per finding code that occurs)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from omni_deploy import __version__
from omni_deploy.common.output import escape
from omni_deploy.validate.findings import ERROR, INFO, WARNING, Finding
from omni_deploy.validate.reporters.base import Reporter, ReportOptions, relative

if TYPE_CHECKING:  # annotations only: REPORTERS (validate's --output choices) loads no checks
    from omni_deploy.validate.runner import FileReport

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
_SARIF_LEVEL: dict[str, str] = {ERROR: "error", WARNING: "warning", INFO: "note"}


@dataclass(frozen=True)
class Rule:
    """What SARIF says about a finding code: its default severity, one line, help and where to read more."""

    code: str
    severity: str
    summary: str
    help: str = ""
    help_markdown: str = ""


def _rule(code_id: str) -> Rule:
    from omni_deploy.common.codes import CODES

    code = CODES.get(code_id)
    if code is None:  # tests/common/test_codes.py keeps this from happening; say so rather than crash
        return Rule(code_id, "warning", "finding code missing from omni_deploy/common/codes.py")
    example = f"tests/data/{code.example}"
    text = (
        f"{code.summary}.\n\nEvery omni-deploy finding code is listed in docs/findings.md; "
        f"{example} in the omni-deploy repository produces this one."
    )
    markdown = (
        f"{code.summary}.\n\nEvery omni-deploy finding code is listed in `docs/findings.md`; "
        f"`{example}` in the omni-deploy repository produces this one."
    )
    return Rule(code.id, code.severity, code.summary, text, markdown)


def _uri(file: str) -> str:
    """A path as SARIF wants it: relative with forward slashes, else a file: URI (percent-encoded)."""
    return escape.sarif_uri(relative(file))


def _sarif_result(finding: Finding, index: int) -> dict[str, Any]:
    physical: dict[str, Any] = {"artifactLocation": {"uri": _uri(finding.file)}}
    if finding.line:
        physical["region"] = {"startLine": finding.line, "startColumn": max(1, finding.column)}
    message = finding.message + (f" ({finding.hint})" if finding.hint else "")
    return {
        "ruleId": finding.code,
        "ruleIndex": index,
        "level": _SARIF_LEVEL[finding.severity],
        "message": {"text": escape.for_sarif(f"{finding.path}: {message}")},
        "locations": [
            {
                "physicalLocation": physical,
                "logicalLocations": [
                    {"fullyQualifiedName": escape.for_sarif(finding.path), "kind": "member"}
                ],
            }
        ],
    }


def _sarif_rule(rule: Rule) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": rule.code,
        "shortDescription": {"text": rule.summary},
        "fullDescription": {"text": rule.summary},
        "help": {"text": rule.help or rule.summary, "markdown": rule.help_markdown or rule.summary},
        "defaultConfiguration": {"level": _SARIF_LEVEL[rule.severity]},
        "properties": {"tags": ["omni-deploy", "vllm-omni"]},
    }
    return out


def sarif(reports: list[FileReport]) -> str:
    """SARIF 2.1.0: one run, one rule per finding code that occurs, results pointing at file:line:col."""
    findings = [f for r in reports for f in r.findings]
    rules: dict[str, Rule] = {}
    for finding in findings:
        if finding.code not in rules:
            rules[finding.code] = _rule(finding.code)
    order = sorted(rules)
    index = {code: i for i, code in enumerate(order)}
    document = {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "omni-deploy",
                        "version": __version__,
                        "semanticVersion": __version__,
                        "rules": [_sarif_rule(rules[code]) for code in order],
                    }
                },
                "results": [_sarif_result(f, index[f.code]) for f in findings],
                "columnKind": "unicodeCodePoints",
            }
        ],
    }
    return json.dumps(document, indent=2)


class Sarif(Reporter):
    name = "sarif"

    def render(self, reports: list[FileReport], options: ReportOptions) -> str:
        return sarif(reports)
