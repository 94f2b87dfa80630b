"""Where a finding about several values (a sum, a relation) should point: at the value the file
being validated (the outermost overlay) set, when it set one; never into an installed package's
file that the user did not name."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TypeVar

from omni_deploy.config.nodes import Origin
from omni_deploy.validate.findings import Finding

T = TypeVar("T")


def installed(file: str) -> bool:
    """A file inside an installed package (site-packages, dist-packages)."""
    parts = Path(file).resolve().parts
    return "site-packages" in parts or "dist-packages" in parts


def _same(file: str, other: Path) -> bool:
    try:
        return Path(file).resolve() == other.resolve()
    except OSError:
        return False


def pick(origins: list[Origin | None], top: Path) -> int | None:
    """Index of the value to point at: the last one the top file set, else the last one outside an
    installed package; None when every value lives in an installed package's file."""
    for wanted in (lambda o: _same(o.file, top), lambda o: not installed(o.file)):
        chosen = [i for i, o in enumerate(origins) if o is not None and o.layer != "default" and wanted(o)]
        if chosen:
            return chosen[-1]
    return None


def spelled(origin: Origin | None) -> str:
    if origin is None or origin.layer == "default":
        return "by default"
    return f"at {Path(origin.file).name}:{origin.line}"


def reach_point(top: Path, text: str | None = None) -> tuple[int, int]:
    """(line, column) of the named file's own `base_config:` key, through which a base file's values
    are reached; (0, 0) where there is none to read."""
    import re

    from omni_deploy.common import guarded

    try:
        lines = (guarded.read_text(str(top)) if text is None else text).splitlines()
    except (guarded.Refused, OSError):
        return 0, 0
    for number, line in enumerate(lines, start=1):
        match = re.match(r"^(base_config)\s*:", line) or re.match(r"^(['\"]base_config['\"])\s*:", line)
        if match:
            return number, 1
    return 0, 0


def keep_to_user_files(
    findings: list[Finding], top: Path, named: str, text: str | None = None
) -> list[Finding]:
    """Findings that point into an installed package's file (not the named one) move to the named
    file, at its `base_config:` line (every finding has a line:col), saying where the value is."""
    out = []
    reach: tuple[int, int] | None = None
    for finding in findings:
        if finding.line and installed(finding.file) and not _same(finding.file, top):
            reach = reach if reach is not None else reach_point(top, text)
            where = f"{finding.file}:{finding.line}:{finding.column}"
            finding = replace(
                finding,
                file=named,
                line=reach[0],
                column=reach[1],
                message=f"{finding.message} (set in {where})",
                fix=None,  # never a fix into an installed file
            )
        out.append(finding)
    return out
