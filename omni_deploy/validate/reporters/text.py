"""text: findings grouped by file, each with its code frame, then the summary (as ruff and rustc
draw them): for people at a terminal."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from omni_deploy.validate.findings import ERROR, INFO, WARNING, Finding
from omni_deploy.validate.reporters.base import (
    Reporter,
    ReportOptions,
    counts,
    server_lines,
    summary,
    visible_line,
)

if TYPE_CHECKING:  # annotations only: REPORTERS (validate's --output choices) loads no checks
    from omni_deploy.validate.runner import FileReport

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


def text(reports: list[FileReport], options: ReportOptions | None = None) -> str:
    """Findings grouped by file, each with its code frame; then the summary (ruff, rustc)."""
    opts = options or ReportOptions()
    paint = _Painter(opts.color)
    findings = list(dict.fromkeys(f for r in reports for f in r.findings))
    lines: list[str] = []
    if opts.statistics:
        lines += statistics(reports, paint)
    else:
        from omni_deploy.common.output.frames import visible

        sources = _Sources(opts.sources)
        for file, group in _grouped(reports).items():
            lines.append(paint(f"{visible(file)}: {counts(group, zeros=False)}", bold=True))
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


class Text(Reporter):
    name = "text"
    paints = True

    def render(self, reports: list[FileReport], options: ReportOptions) -> str:
        return text(reports, options)
