"""Reporters for validate: text for people, JSON for CI."""

from __future__ import annotations

import json
from collections.abc import Callable

from omni_deploy.validate.findings import ERROR, INFO, WARNING
from omni_deploy.validate.runner import FileReport


def text(reports: list[FileReport]) -> str:
    lines = [f.text() for r in reports for f in r.findings]
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
    return json.dumps({"files": [r.as_dict() for r in reports]}, indent=2)


REPORTERS: dict[str, Callable[[list[FileReport]], str]] = {"text": text, "json": as_json}
