"""Reporters for validate, picked by name: text for people, JSON for programs, SARIF for code
scanning, GitHub workflow commands for annotations on a pull request, JUnit XML for CI dashboards.

Each reporter takes every file's report and returns the whole document; none of them decides
the exit code.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omni_deploy import __version__
from omni_deploy.common.output import escape
from omni_deploy.common.output.json_doc import dumps
from omni_deploy.validate.findings import ERROR, INFO, WARNING, Finding
from omni_deploy.validate.runner import FileReport
from omni_deploy.validate.server_check.run import ServerRun

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


def _server_run(reports: list[FileReport]) -> ServerRun | None:
    return next((r.server for r in reports if r.server is not None), None)


def visible_line(line: str) -> str:
    from omni_deploy.common.output.frames import visible

    return visible(line)


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


@dataclass(frozen=True)
class TextOptions:
    """How the text reporter draws: for people at a terminal, or plain into a pipe."""

    color: bool = False
    width: int | None = None  # wrap messages to this many columns; None: never wrap
    quiet: bool = False  # the findings only: no summary, nothing at all when there are none
    statistics: bool = False  # counts per code instead of the findings
    sources: dict[str, str] = field(default_factory=dict)  # file texts not on disk (stdin), by name


_PAINT: dict[str, str] = {ERROR: "red", WARNING: "yellow", INFO: "cyan"}


class _Painter:
    def __init__(self, on: bool) -> None:
        self.on = on

    def __call__(self, text: str, fg: str | None = None, bold: bool = False) -> str:
        if not self.on:
            return text
        import click

        return click.style(text, fg=fg, bold=bold)

    def frame_piece(self, severity: str) -> Callable[[str, str], str]:
        def paint(kind: str, text: str) -> str:
            return self(text, "blue", True) if kind == "gutter" else self(text, _PAINT[severity], True)

        return paint


class _Sources:
    """Each file's lines, read once, for the code frames (a file that cannot be read has none, nor
    one that does not read as a deploy file: common/output/frames.frame_lines; lines pass the redactor)."""

    def __init__(self, given: dict[str, str]) -> None:
        self._lines: dict[str, list[str]] = {name: _frame_lines(text) for name, text in given.items()}

    def lines(self, file: str) -> list[str]:
        if file not in self._lines:
            from omni_deploy.common.errors import ConfigError
            from omni_deploy.config.safe_read import read_text

            try:
                self._lines[file] = _frame_lines(read_text(Path(file)))
            except (ConfigError, OSError):
                self._lines[file] = []
        return self._lines[file]


def _frame_lines(text: str) -> list[str]:
    from omni_deploy.common.output.frames import frame_lines
    from omni_deploy.knowledge.keys import by_place

    return frame_lines(text, {*by_place("top"), "stage_id"})  # stage_id: a bare list of stages (E104)


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def _counts(findings: list[Finding], zeros: bool = True) -> str:
    by = {s: sum(1 for f in findings if f.severity == s) for s in (ERROR, WARNING, INFO)}
    words = [_plural(n, s) for s, n in by.items() if n or zeros]
    return ", ".join(words) or "no findings"


def _by_code(findings: list[Finding]) -> str:
    from collections import Counter

    counted = Counter(f.code for f in findings)
    return ", ".join(f"{code} {n}" for code, n in sorted(counted.items()))


def summary(reports: list[FileReport]) -> str:
    """The last line: `ok:` or `invalid:`, files, counts by severity and by code."""
    findings = list(dict.fromkeys(f for r in reports for f in r.findings))  # as shown: each once
    files = len(reports)
    invalid = sum(1 for r in reports if not r.valid)
    status = (
        f"ok: {_plural(files, 'file')}" if not invalid else f"invalid: {invalid} of {_plural(files, 'file')}"
    )
    codes = f" ({_by_code(findings)})" if findings else ""
    return f"{status}; {_counts(findings)}{codes}"


def _fixable(findings: list[Finding]) -> int:
    return sum(1 for f in findings if f.fix is not None)


def _grouped(reports: list[FileReport]) -> dict[str, list[Finding]]:
    """Findings by the file they are in (in the order files come up), each once."""
    groups: dict[str, list[Finding]] = {}
    for finding in dict.fromkeys(f for r in reports for f in r.findings):
        groups.setdefault(finding.file, []).append(finding)
    return groups


def _wrap(text: str, width: int | None, indent: int) -> list[str]:
    if width is None or len(text) <= width:
        return [text]
    import textwrap

    return textwrap.wrap(
        text,
        width=max(40, width),
        subsequent_indent=" " * indent,
        break_long_words=False,
        break_on_hyphens=False,
    ) or [text]


def _finding_lines(finding: Finding, sources: _Sources, paint: _Painter, width: int | None) -> list[str]:
    from omni_deploy.common.output.frames import frame, visible

    head = f"{finding.severity}[{finding.code}]"
    lines = _wrap(f"{head}: {visible(finding.message)}", width, 2)
    lines[0] = paint(head, _PAINT[finding.severity], True) + lines[0][len(head) :]
    where = visible(f"{finding.file}:{finding.line}:{finding.column}" if finding.line else finding.file)
    arrow = f"  {paint('-->', 'blue', True)} {where}"
    path = visible(finding.path)
    if width is not None and 7 + len(where) + len(path) > width:
        lines += [arrow, f"      {path}"]  # a long location and a long path: one line each
    else:
        lines.append(f"{arrow} {path}")
    drawn = (
        frame(sources.lines(finding.file), finding.line, finding.column, finding.hint or "",
              paint.frame_piece(finding.severity))
        if finding.line
        else []
    )  # fmt: skip
    lines += ["  " + line for line in drawn]
    equals = paint("=", "blue", True)
    if finding.hint and not drawn:
        lines.append(f"  {equals} help: {visible(finding.hint)}")
    if finding.fix is not None:
        lines.append(f"  {equals} fix: {visible(finding.fix.description)} (with --fix)")
    return lines


def drawn(finding: Finding, source: str, width: int | None = None) -> list[str]:
    """One finding as the text reporter draws it (no colour), its file's text given: for the
    code pages (`omni-deploy rule CODE`), which show what validate says of their example."""
    return _finding_lines(finding, _Sources({finding.file: source}), _Painter(False), width)


def statistics(reports: list[FileReport], paint: _Painter | None = None) -> list[str]:
    """One line per code: how often, its severity, [*] when --fix can fix it, its summary."""
    from collections import Counter

    from omni_deploy.common.codes import CODES

    paint = paint or _Painter(False)
    findings = list(dict.fromkeys(f for r in reports for f in r.findings))
    counted = Counter(f.code for f in findings)
    severity = {f.code: f.severity for f in findings}  # --strict makes warnings errors
    fixable = {f.code for f in findings if f.fix is not None}
    rows = []
    for code, count in sorted(counted.items(), key=lambda kv: (-kv[1], kv[0])):
        known = CODES.get(code)
        about = known.summary if known is not None else ""
        fix = "[*]" if code in fixable else "   "
        rows.append(f"{count:>5}  {paint(code, _PAINT[severity[code]], True)}  {fix}  {about}")
    return rows


def text(reports: list[FileReport], options: TextOptions | None = None) -> str:
    """Findings grouped by file, each with its code frame; then the summary (ruff, rustc)."""
    opts = options or TextOptions()
    paint = _Painter(opts.color)
    findings = list(dict.fromkeys(f for r in reports for f in r.findings))
    lines: list[str] = []
    if opts.statistics:
        lines += statistics(reports, paint)
    else:
        from omni_deploy.common.output.frames import visible

        sources = _Sources(opts.sources)
        for file, group in _grouped(reports).items():
            lines.append(paint(f"{visible(file)}: {_counts(group, zeros=False)}", bold=True))
            for finding in group:
                lines += _finding_lines(finding, sources, paint, opts.width)
                lines.append("")
    if opts.quiet:
        while lines and not lines[-1]:
            lines.pop()
        return "\n".join(lines)
    lines += [visible_line(line) for line in server_lines(reports)]
    verdict = summary(reports)
    ok = all(r.valid for r in reports)
    word, rest = verdict.split(":", 1)
    lines.append(paint(word + ":", "green" if ok else "red", True) + rest)
    if _fixable(findings):
        lines.append(f"[*] {_fixable(findings)} fixable with `validate --fix` (`--diff` shows the change).")
    return "\n".join(lines)


def concise(reports: list[FileReport], options: TextOptions | None = None) -> str:
    """One line per finding (`file:line:col: severity[CODE] path: message`), then the summary:
    for grep, editors' problem matchers and scripts."""
    lines = [f.text() for r in reports for f in r.findings]
    if not (options and options.quiet):
        lines += [visible_line(line) for line in server_lines(reports)]
        lines.append(summary(reports))
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
    """A path as SARIF wants it: relative with forward slashes, else a file: URI (percent-encoded)."""
    return escape.sarif_uri(_relative(file))


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


def github(reports: list[FileReport]) -> str:
    """GitHub Actions workflow commands: each finding becomes an annotation on its line."""
    command: dict[str, str] = {ERROR: "error", WARNING: "warning", INFO: "notice"}
    lines = []
    for finding in (f for r in reports for f in r.findings):
        props = [f"file={escape.for_workflow_property(_relative(finding.file).as_posix())}"]
        if finding.line:
            props += [f"line={finding.line}", f"col={max(1, finding.column)}"]
        props.append(f"title={escape.for_workflow_property(f'{finding.code} {finding.path}')}")
        message = finding.message + (f" ({finding.hint})" if finding.hint else "")
        lines.append(f"::{command[finding.severity]} {','.join(props)}::{escape.for_workflow_data(message)}")
    lines.append(summary(reports))  # as plain log text
    return "\n".join(lines)


def junit(reports: list[FileReport]) -> str:
    """JUnit XML: one test case per file, failing with its errors (warnings go to system-out)."""
    from xml.etree import ElementTree  # only here: validate's start-up stays light

    xml = escape.for_xml  # every text and attribute from a file: XML 1.0 characters only
    suite = ElementTree.Element("testsuite", name="omni-deploy validate")
    failures = 0
    for report in reports:
        case = ElementTree.SubElement(
            suite, "testcase", classname="omni-deploy.validate", name=xml(report.file)
        )
        errors = [f for f in report.findings if f.severity == ERROR]
        others = [f for f in report.findings if f.severity != ERROR]
        if errors:
            failures += 1
            failure = ElementTree.SubElement(
                case, "failure", type=xml(errors[0].code), message=f"{len(errors)} error(s)"
            )
            failure.text = xml("\n".join(f.text() for f in errors))
        if others:
            ElementTree.SubElement(case, "system-out").text = xml("\n".join(f.text() for f in others))
    suite.set("tests", str(len(reports)))
    suite.set("failures", str(failures))
    suite.set("errors", "0")
    ElementTree.indent(suite)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ElementTree.tostring(suite, encoding="unicode")


REPORTERS: dict[str, Callable[[list[FileReport]], str]] = {
    "text": text,
    "concise": concise,
    "json": as_json,
    "sarif": sarif,
    "github": github,
    "junit": junit,
}
