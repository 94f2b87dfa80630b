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


def keep_to_user_files(findings: list[Finding], top: Path, named: str) -> list[Finding]:
    """Findings that point into an installed package's file (not the named one) move to the named
    file, saying where the value is."""
    out = []
    for finding in findings:
        if finding.line and installed(finding.file) and not _same(finding.file, top):
            where = f"{finding.file}:{finding.line}:{finding.column}"
            finding = replace(
                finding, file=named, line=0, column=0, message=f"{finding.message} (set in {where})"
            )
        out.append(finding)
    return out
