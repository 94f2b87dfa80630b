"""Reporters for validate, picked by name: text for people, JSON for programs, SARIF for code
scanning, GitHub workflow commands for annotations on a pull request, JUnit XML for CI dashboards.

Each reporter takes every file's report and returns the whole document; none of them decides
the exit code.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omni_deploy import __version__
from omni_deploy.output.json_doc import dumps
from omni_deploy.server_check.run import ServerRun
from omni_deploy.validate.findings import ERROR, INFO, WARNING, Finding
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
    from omni_deploy.codes import CODES

    code = CODES.get(code_id)
    if code is None:  # tests/test_codes.py keeps this from happening; say so rather than crash
        return Rule(code_id, "warning", "finding code missing from omni_deploy/codes.py")
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


def _server_run(reports: list[FileReport]) -> ServerRun | None:
    return next((r.server for r in reports if r.server is not None), None)


def server_lines(reports: list[FileReport]) -> list[str]:
    """Whether the server check ran, on what, and which files it could not decide (and why)."""
    run = _server_run(reports)
    if run is None:
        return []
    if not run.ran:
        return [f"server check: not run ({run.reason})"]
    undecided = [(name, v.undecided) for name, v in run.verdicts.items() if v.undecided]
    lines = [
        f"server check: vllm-omni {run.version}'s start-up config code ({run.path}) decided "
        f"{len(run.verdicts) - len(undecided)} of {len(run.verdicts)} file(s) in {run.seconds:.1f} s "
        f"({run.interpreter})" + (f"; {run.reason}" if run.reason else "")
    ]
    lines += [f"server check: {name}: not decided: {why}" for name, why in undecided]
    return lines


def text(reports: list[FileReport]) -> str:
    lines = [f.text() for r in reports for f in r.findings]
    lines += server_lines(reports)
    counts = {
        s: sum(1 for r in reports for f in r.findings if f.severity == s) for s in (ERROR, WARNING, INFO)
    }
    files = len(reports)
    invalid = sum(1 for r in reports if not r.valid)
    status = "ok" if not invalid else f"{invalid} of {files} file{'s' if files != 1 else ''} invalid"
    lines.append(
        f"{status}: {counts[ERROR]} error(s), {counts[WARNING]} warning(s), {counts[INFO]} info "
        f"in {files} file{'s' if files != 1 else ''}"
    )
    return "\n".join(lines)


def as_json(reports: list[FileReport]) -> str:
    document: dict[str, Any] = {"files": [r.as_dict() for r in reports]}
    run = _server_run(reports)
    if run is not None:
        document["server_check"] = run.as_dict()
        for entry, report in zip(document["files"], reports, strict=True):
            verdict = run.verdicts.get(report.file)
            entry["server_check"] = {
                "decided": bool(verdict and verdict.decided),
                "reason": (verdict.undecided if verdict else run.reason or "not checked") or None,
            }
    return dumps(document)


def _relative(file: str) -> Path:
    """The path relative to the working directory (the checkout in CI) where it lies below it."""
    path = Path(file)
    if path.is_absolute():
        try:
            return path.relative_to(Path.cwd())
        except ValueError:
            return path
    return path


def _uri(file: str) -> str:
    """A path as SARIF wants it: relative with forward slashes, else a file: URI."""
    path = _relative(file)
    return path.as_uri() if path.is_absolute() else path.as_posix()


def _sarif_result(finding: Finding, index: int) -> dict[str, Any]:
    physical: dict[str, Any] = {"artifactLocation": {"uri": _uri(finding.file)}}
    if finding.line:
        physical["region"] = {"startLine": finding.line, "startColumn": max(1, finding.column)}
    message = finding.message + (f" ({finding.hint})" if finding.hint else "")
    return {
        "ruleId": finding.code,
        "ruleIndex": index,
        "level": _SARIF_LEVEL[finding.severity],
        "message": {"text": f"{finding.path}: {message}"},
        "locations": [
            {
                "physicalLocation": physical,
                "logicalLocations": [{"fullyQualifiedName": finding.path, "kind": "member"}],
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


def _escape_data(value: str) -> str:
    return value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(value: str) -> str:
    return _escape_data(value).replace(":", "%3A").replace(",", "%2C")


def github(reports: list[FileReport]) -> str:
    """GitHub Actions workflow commands: each finding becomes an annotation on its line."""
    command: dict[str, str] = {ERROR: "error", WARNING: "warning", INFO: "notice"}
    lines = []
    for finding in (f for r in reports for f in r.findings):
        props = [f"file={_escape_property(_relative(finding.file).as_posix())}"]
        if finding.line:
            props += [f"line={finding.line}", f"col={max(1, finding.column)}"]
        props.append(f"title={_escape_property(f'{finding.code} {finding.path}')}")
        message = finding.message + (f" ({finding.hint})" if finding.hint else "")
        lines.append(f"::{command[finding.severity]} {','.join(props)}::{_escape_data(message)}")
    lines.append(text(reports).splitlines()[-1])  # the summary line, as plain log text
    return "\n".join(lines)


def junit(reports: list[FileReport]) -> str:
    """JUnit XML: one test case per file, failing with its errors (warnings go to system-out)."""
    from xml.etree import ElementTree  # only here: validate's start-up stays light

    suite = ElementTree.Element("testsuite", name="omni-deploy validate")
    failures = 0
    for report in reports:
        case = ElementTree.SubElement(suite, "testcase", classname="omni-deploy.validate", name=report.file)
        errors = [f for f in report.findings if f.severity == ERROR]
        others = [f for f in report.findings if f.severity != ERROR]
        if errors:
            failures += 1
            failure = ElementTree.SubElement(
                case, "failure", type=errors[0].code, message=f"{len(errors)} error(s)"
            )
            failure.text = "\n".join(f.text() for f in errors)
        if others:
            ElementTree.SubElement(case, "system-out").text = "\n".join(f.text() for f in others)
    suite.set("tests", str(len(reports)))
    suite.set("failures", str(failures))
    suite.set("errors", "0")
    ElementTree.indent(suite)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ElementTree.tostring(suite, encoding="unicode")


REPORTERS: dict[str, Callable[[list[FileReport]], str]] = {
    "text": text,
    "json": as_json,
    "sarif": sarif,
    "github": github,
    "junit": junit,
}
