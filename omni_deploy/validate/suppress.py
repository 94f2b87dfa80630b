"""Silencing findings: by code (`--ignore`, the project settings) or on the line itself.

A comment `# omni-deploy: ignore[W310]` (several: `ignore[W310,W302]`) silences those codes for
findings on its own line, or, standing alone on a line, for the line below it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from omni_deploy.validate.findings import Finding

_COMMENT = re.compile(r"#\s*omni-deploy:\s*ignore\[([A-Za-z0-9,\s]+)\]")


def _line_codes(file: str, text: str | None = None) -> dict[int, frozenset[str]]:
    """{line: codes silenced there} for one file (1-based lines); `text`: its content if given."""
    from omni_deploy.common import guarded

    try:  # guarded: a regular file only (a named pipe was read once, by the loader), capped
        lines = (guarded.read_text(file) if text is None else text).splitlines()
    except guarded.Refused:
        return {}
    out: dict[int, set[str]] = {}
    for number, line in enumerate(lines, start=1):
        match = _COMMENT.search(line)
        if not match:
            continue
        codes = {c.strip().upper() for c in match.group(1).split(",") if c.strip()}
        out.setdefault(number, set()).update(codes)
        if line.lstrip().startswith("#"):  # a comment line of its own covers the next line
            out.setdefault(number + 1, set()).update(codes)
    return {n: frozenset(c) for n, c in out.items()}


def _key(file: str) -> str:
    """One spelling per file: findings name it as shown, the caller as named."""
    try:
        return str(Path(file).resolve())
    except OSError:
        return file


def keep(
    findings: Iterable[Finding], ignore: frozenset[str], texts: dict[str, str] | None = None
) -> list[Finding]:
    """The findings neither `ignore` nor a comment on their line silences. `texts`: file contents
    that did not come from disk (stdin), by the file's name."""
    comments: dict[str, dict[int, frozenset[str]]] = {}  # per call: files change between runs
    given = {_key(name): text for name, text in (texts or {}).items()}

    def silenced(finding: Finding) -> bool:
        if finding.code in ignore:
            return True
        if not finding.line:
            return False
        if finding.file not in comments:
            comments[finding.file] = _line_codes(finding.file, given.get(_key(finding.file)))
        return finding.code in comments[finding.file].get(finding.line, frozenset())

    return [f for f in findings if not silenced(f)]
