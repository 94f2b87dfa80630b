"""What every reporter shares: the one signature, the options, and the lines several formats print
(the server check's account, the summary)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, TextIO

from omni_deploy.validate.findings import ERROR, INFO, WARNING, Finding

if TYPE_CHECKING:  # annotations only: REPORTERS (validate's --output choices) loads no checks
    from omni_deploy.validate.runner import FileReport
    from omni_deploy.validate.server_check.run import ServerRun


@dataclass(frozen=True)
class ReportOptions:
    """How a reporter draws: for people at a terminal, or plain into a pipe. The formats for
    programs (json, sarif, github, junit) have one shape and ignore these."""

    color: bool = False
    width: int | None = None  # wrap messages to this many columns; None: never wrap
    quiet: bool = False  # the findings only: no summary, nothing at all when there are none
    statistics: bool = False  # counts per code instead of the findings
    sources: dict[str, str] = field(default_factory=dict)  # file texts not on disk (stdin), by name


class Reporter(ABC):
    """One `--format`: `name` is what the option takes; `paints` says whether `options.color`
    applies (the documents for programs never carry colour)."""

    name: ClassVar[str]
    paints: ClassVar[bool] = False

    @abstractmethod
    def render(self, reports: list[FileReport], options: ReportOptions) -> str:
        """The whole document for every file's report ("" when there is nothing to say)."""

    def emit(self, reports: list[FileReport], stream: TextIO, options: ReportOptions) -> None:
        """Write the document to `stream`; nothing at all when it is empty (text or concise, --quiet)."""
        import click

        document = self.render(reports, options)
        if document:
            click.echo(document, file=stream, color=options.color if self.paints else None)


def server_run(reports: list[FileReport]) -> ServerRun | None:
    return next((r.server for r in reports if r.server is not None), None)


def visible_line(line: str) -> str:
    from omni_deploy.common.output.frames import visible

    return visible(line)


def server_lines(reports: list[FileReport]) -> list[str]:
    """Whether the server check ran, on what, and which files it could not decide (and why)."""
    run = server_run(reports)
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


def plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def counts(findings: list[Finding], zeros: bool = True) -> str:
    by = {s: sum(1 for f in findings if f.severity == s) for s in (ERROR, WARNING, INFO)}
    words = [plural(n, s) for s, n in by.items() if n or zeros]
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
        f"ok: {plural(files, 'file')}" if not invalid else f"invalid: {invalid} of {plural(files, 'file')}"
    )
    codes = f" ({_by_code(findings)})" if findings else ""
    return f"{status}; {counts(findings)}{codes}"


def relative(file: str) -> Path:
    """The path relative to the working directory (the checkout in CI) where it lies below it."""
    path = Path(file)
    if path.is_absolute():
        try:
            return path.relative_to(Path.cwd())
        except ValueError:
            return path
    return path
