"""concise: one line per finding, then the summary: for grep, editors' problem matchers and scripts."""

from __future__ import annotations

from typing import TYPE_CHECKING

from omni_deploy.validate.reporters.base import Reporter, ReportOptions, server_lines, summary, visible_line

if TYPE_CHECKING:  # annotations only: REPORTERS (validate's --output choices) loads no checks
    from omni_deploy.validate.runner import FileReport


def concise(reports: list[FileReport], options: ReportOptions | None = None) -> str:
    """One line per finding (`file:line:col: severity[CODE] path: message`), then the summary:
    for grep, editors' problem matchers and scripts."""
    # A base file's finding is in the report of every overlay given that includes it: shown once.
    lines = [f.text() for f in dict.fromkeys(f for r in reports for f in r.findings)]
    if not (options and options.quiet):
        lines += [visible_line(line) for line in server_lines(reports)]
        lines.append(summary(reports))
    return "\n".join(lines)


class Concise(Reporter):
    name = "concise"

    def render(self, reports: list[FileReport], options: ReportOptions) -> str:
        return concise(reports, options)
