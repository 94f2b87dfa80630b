"""`validate --fix`: apply the fixes findings carry (each has one right answer) to a file's text.

An edit replaces the exact text a fix names at its line and column and nothing else, so
comments, blank lines, quoting, line endings and indentation stay as they were. A fix whose text
is no longer at its place (the file changed since it was checked), or that overlaps another, is
left out, never guessed. Whether the fixed text may be written the caller asks `refusal` with the
report of that text validated (cli/fix.py); this module edits strings and reads reports, no more.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from omni_deploy.common.output.frames import LINE_BREAK
from omni_deploy.validate.findings import Finding, Fix

if TYPE_CHECKING:
    from omni_deploy.validate.runner import FileReport


@dataclass
class Edited:
    text: str
    applied: list[Fix] = field(default_factory=list)
    skipped: list[tuple[Fix, str]] = field(default_factory=list)  # (fix, why)


def _line_starts(text: str) -> list[int]:
    """Offset of each 1-based line (index 0 is line 1), counted over YAML's line breaks."""
    return [0, *(m.end() for m in LINE_BREAK.finditer(text))]


def apply(text: str, fixes: list[Fix]) -> Edited:
    """`text` with every fix that still matches applied (each once, last first)."""
    starts = _line_starts(text)
    spans: list[tuple[int, int, str, Fix]] = []
    skipped: list[tuple[Fix, str]] = []
    for fix in dict.fromkeys(fixes):  # an anchor's key reported once per alias: one edit
        if not 1 <= fix.line <= len(starts):
            skipped.append((fix, f"line {fix.line} is not in the file"))
            continue
        offset = starts[fix.line - 1] + fix.column - 1
        line_end = starts[fix.line] if fix.line < len(starts) else len(text)
        for old, new in fix.choices:
            end = offset + len(old)
            if end <= line_end and text[offset:end] == old and not _grows(text, end, old):
                spans.append((offset, end, new, fix))
                break
        else:
            skipped.append((fix, f"the text at line {fix.line}, column {fix.column} changed"))
    spans.sort(key=lambda s: s[0])
    kept: list[tuple[int, int, str, Fix]] = []
    for span in spans:
        if kept and span[0] < kept[-1][1]:
            skipped.append((span[3], "it overlaps another fix"))
            continue
        kept.append(span)
    out = text
    for start, end, new, _fix in reversed(kept):
        out = out[:start] + new + out[end:]
    return Edited(out, [s[3] for s in kept], skipped)


def _grows(text: str, end: int, old: str) -> bool:
    """Whether the token goes on past `old` (`max_num_seq` is not the start of `max_num_seqs`)."""
    if old[:1] in "\"'":
        return False
    return end < len(text) and (text[end].isalnum() or text[end] in "_-.")


def fixes_in(findings: list[Finding], file: str) -> list[Fix]:
    """The fixes of `findings` that edit `file` (a finding moved to another file keeps none)."""
    import os

    target = os.path.realpath(file)
    return [
        f.fix
        for f in findings
        if f.fix is not None and f.fix.file == f.file and os.path.realpath(f.fix.file) == target
    ]


def unified_diff(name: str, before: str, after: str) -> str:
    import difflib

    return "".join(
        difflib.unified_diff(
            before.splitlines(keepends=True), after.splitlines(keepends=True), f"a/{name}", f"b/{name}"
        )
    )


def refusal(after: FileReport, fixed: list[Finding]) -> str | None:
    """Why the fixed text must not be written, or None: it loads, and the fixed findings are gone."""
    if after.deployment is None:
        first = after.findings[0] if after.findings else None
        return (
            f"the fixed text does not load ({first.code}: {first.message})"
            if first
            else "the fixed text does not load"
        )
    # By file too: a base file's finding of the same code at the same place is another finding.
    still = {(f.file, f.code, f.line, f.column) for f in after.findings}
    left = [f for f in fixed if (f.file, f.code, f.line, f.column) in still]
    if left:
        return f"{left[0].code} at {left[0].line}:{left[0].column} is still there after the fix"
    return None
