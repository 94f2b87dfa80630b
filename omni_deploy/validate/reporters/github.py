"""github: GitHub Actions workflow commands, so each finding becomes an annotation on its line of
a pull request."""

from __future__ import annotations

from typing import TYPE_CHECKING

from omni_deploy.common.output import escape
from omni_deploy.validate.findings import ERROR, INFO, WARNING
from omni_deploy.validate.reporters.base import Reporter, ReportOptions, relative, summary

if TYPE_CHECKING:  # annotations only: REPORTERS (validate's --output choices) loads no checks
    from omni_deploy.validate.runner import FileReport


def github(reports: list[FileReport]) -> str:
    """GitHub Actions workflow commands: each finding becomes an annotation on its line."""
    command: dict[str, str] = {ERROR: "error", WARNING: "warning", INFO: "notice"}
    lines = []
    for finding in (f for r in reports for f in r.findings):
        props = [f"file={escape.for_workflow_property(relative(finding.file).as_posix())}"]
        if finding.line:
            props += [f"line={finding.line}", f"col={max(1, finding.column)}"]
        props.append(f"title={escape.for_workflow_property(f'{finding.code} {finding.path}')}")
        message = finding.message + (f" ({finding.hint})" if finding.hint else "")
        lines.append(f"::{command[finding.severity]} {','.join(props)}::{escape.for_workflow_data(message)}")
    lines.append(summary(reports))  # as plain log text
    return "\n".join(lines)


class GitHub(Reporter):
    name = "github"

    def render(self, reports: list[FileReport], options: ReportOptions) -> str:
        return github(reports)
