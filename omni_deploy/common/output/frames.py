"""Code frames, as rustc and ruff draw them: a source line with a caret under the spot.

     |
  14 |     max_num_seq: 8
     |     ^^^^^^^^^^^ did you mean 'max_num_seqs'?

`visible` is the one function that makes user text safe for a terminal: every line of source,
message and file name shown by the text reporter passes through it.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Collection, Sequence
from functools import lru_cache

# YAML's line breaks (PyYAML's reader counts these): positions are counted over them.
LINE_BREAK = re.compile(r"\r\n|[\r\n\x85\u2028\u2029]")


def source_lines(text: str) -> list[str]:
    """The lines of a file as the YAML loader numbers them (1-based: lines[n - 1])."""
    return LINE_BREAK.split(text)


def frame_lines(text: str, top_keys: Collection[str]) -> list[str]:
    """The lines code frames may show of `text`: none unless it reads as a deploy file (one of
    `top_keys`, the keys vllm-omni reads, as a block or flow mapping's key), and each line through
    the redactor. A credential file that base_config names by mistake (an HF token file, a Docker
    config.json) is never echoed; a deploy file's own `token: ...` line shows <redacted>."""
    if not _is_deploy_text(text, tuple(sorted(top_keys))):
        return []
    from omni_deploy.common.redact import redact_line

    return [redact_line(line) for line in source_lines(text)]


@lru_cache(maxsize=4)
def _top_key_pattern(keys: tuple[str, ...]) -> re.Pattern[str]:
    names = "|".join(re.escape(k) for k in keys) or "(?!)"
    return re.compile(rf"""(?m)(?:^[ \t]*(?:-[ \t]+)?|[{{,][ \t\r\n]*)["']?(?:{names})["']?[ \t]*:""")


def _is_deploy_text(text: str, keys: tuple[str, ...]) -> bool:
    return bool(_top_key_pattern(keys).search(text))


def _escape(char: str) -> str:
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: str) -> str:
    """`text` with nothing a terminal would act on: control, format (bidirectional overrides,
    zero-width) and separator characters are shown as escapes (`\\x1b`, `\\u202e`)."""
    from omni_deploy.common.output.escape import no_command_start  # a line must not start a workflow command

    if text.isprintable():
        return no_command_start(text)
    return no_command_start("".join(c if c.isprintable() or c == " " else _escape(c) for c in text))


def cells(text: str) -> int:
    """Terminal columns `text` takes: wide East Asian characters two, combining marks none."""
    width = 0
    for char in text:
        if unicodedata.combining(char):
            continue
        width += 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1
    return width


def token_length(line: str, start: int) -> int:
    """Characters the YAML token at `start` (0-based) spans: a quoted scalar to its closing quote,
    a key to its colon, a plain value to a comment or the end of the line (at least 1)."""
    if start >= len(line):
        return 1
    quote = line[start]
    if quote in "\"'":
        i = start + 1
        while i < len(line):
            if quote == "'" and line.startswith("''", i):
                i += 2
                continue
            if quote == '"' and line[i] == "\\":
                i += 2
                continue
            if line[i] == quote:
                return i - start + 1
            i += 1
        return len(line) - start
    in_flow = any(c in line[:start] for c in "[{")
    end = start
    while end < len(line):
        char = line[end]
        after = line[end + 1 : end + 2]
        key_end = char == ":" and after in ("", " ", "\t")
        if key_end or (char == "#" and line[end - 1 : end] in (" ", "\t")):
            break
        if in_flow and char in ",]}":
            break
        end += 1
    return max(1, len(line[start:end].rstrip()))


FRAME_BEFORE = 80  # characters of a long line shown before the marked spot
FRAME_MARKED = 120  # characters of the marked token shown (and carets drawn)


def _window(source: str, column: int) -> tuple[str, int, int]:
    """The part of a source line a frame shows, the spot's start in it and the marked length: a
    line of megabytes is cut around the spot (`...` where cut), the token to FRAME_MARKED."""
    start = min(max(column - 1, 0), len(source))
    length = token_length(source, start)
    if len(source) <= FRAME_BEFORE + FRAME_MARKED:
        return source, start, length
    head = source[:start] if start <= FRAME_BEFORE else "..." + source[start - FRAME_BEFORE + 3 : start]
    shown = min(length, FRAME_MARKED)
    tail = source[start : start + shown] + ("..." if start + shown < len(source) else "")
    return head + tail, len(head), shown


def frame(
    lines: Sequence[str],
    line: int,
    column: int,
    label: str = "",
    paint: Callable[[str, str], str] | None = None,
) -> list[str]:
    """The frame of 1-based `line`:`column` in `lines`, or none when the line is not there.

    `paint(kind, text)` colours the pieces (kind: "gutter" or "caret"); default: plain.
    """
    if not 1 <= line <= len(lines):
        return []
    colour = paint or (lambda _kind, text: text)
    source, start, length = _window(lines[line - 1], column)
    shown_prefix = visible(source[:start])
    marked = visible(source[start : start + length]) or " "
    number = str(line)
    pad = " " * len(number)
    caret = " " * cells(shown_prefix) + "^" * max(1, cells(marked))
    tail = f" {visible(label)}" if label else ""
    return [
        colour("gutter", f"{pad} |"),
        colour("gutter", f"{number} |") + " " + visible(source),
        colour("gutter", f"{pad} |") + " " + colour("caret", caret + tail),
    ]
