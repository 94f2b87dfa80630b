"""json: every file's report as one JSON document (schemas/output/), for programs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from omni_deploy.common.output.json_doc import dumps
from omni_deploy.validate.reporters.base import Reporter, ReportOptions, server_run

if TYPE_CHECKING:  # annotations only: REPORTERS (validate's --output choices) loads no checks
    from omni_deploy.validate.runner import FileReport


def as_json(reports: list[FileReport]) -> str:
    document: dict[str, Any] = {"files": [r.as_dict() for r in reports]}
    # A base file's finding is in the report of every overlay given that includes it: listed once,
    # under the first file that reports it (each file's `valid` still counts its own findings).
    seen: set[Any] = set()
    for entry, report in zip(document["files"], reports, strict=True):
        entry["findings"] = [
            d for f, d in zip(report.findings, entry["findings"], strict=True) if f not in seen
        ]
        seen.update(report.findings)
    run = server_run(reports)
    if run is not None:
        document["server_check"] = run.as_dict()
        for entry, report in zip(document["files"], reports, strict=True):
            verdict = run.verdicts.get(report.file)
            entry["server_check"] = {
                "decided": bool(verdict and verdict.decided),
                "reason": (verdict.undecided if verdict else run.reason or "not checked") or None,
            }
    return dumps(document)


class Json(Reporter):
    name = "json"

    def render(self, reports: list[FileReport], options: ReportOptions) -> str:
        return as_json(reports)
