"""Escaping for each output format, one function per format, so text from a file (a path, a key, a
value) can never act on whatever reads the output.

- `for_terminal`: text for people. Control characters (C0 but tab, DEL, C1), bidirectional
  overrides and lone surrogates become visible escapes (`\\x1b`, `\\n`, `\\u202e`), so a value can
  neither move the cursor, retitle the window, hide text nor start a new line. A field that
  would begin a line with `::` (after blanks) gets a backslash: a GitHub Actions log runs any
  such line as a workflow command.
- `for_xml`: text for XML 1.0 (JUnit): the characters XML 1.0 cannot hold at all (most C0
  controls, lone surrogates, U+FFFE/U+FFFF) become the same visible escapes; ElementTree then
  escapes markup (`<`, `&`, quotes, newlines in attributes) itself.
- `for_workflow_data` / `for_workflow_property`: the GitHub Actions toolkit's escaping of a
  workflow command's message and of its properties (`%`, CR, LF; also `:` and `,` in
  properties), after `for_terminal`'s (the log viewer renders ANSI sequences).
- `for_sarif`: message text for SARIF (JSON escapes the rest, but a lone surrogate is not
  Unicode a consumer can decode); `sarif_uri`: a path as a URI reference, percent-encoded.
- `for_markdown`: a table cell of Markdown (a pull-request comment): `|` and backslashes escaped,
  HTML's `<`, `>` and `&` as entities (no tags, no images), line breaks as spaces.
- `yaml_comment`: a file name or note inside a `#` comment of YAML we write for vllm-omni or
  Kubernetes: JSON-quoted, ASCII only, so no newline can end the comment and start a key.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path

_BIDI = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
_TERMINAL = re.compile(f"[\x00-\x08\x0a-\x1f\x7f-\x9f{_BIDI}\ud800-\udfff]")
_XML_BAD = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
_COMMAND_START = re.compile(r"^(\s*):(?=:)")


def _visible(char: str) -> str:
    if char in _NAMED:
        return _NAMED[char]
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


MAX_SHOWN = 2000  # characters of one message or hint shown (a 1.9 MB value is not worth 1.9 MB)


def capped(text: str, limit: int = MAX_SHOWN) -> str:
    """`text` cut to `limit` characters, saying how many more there were."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text) - limit} more characters)"


def no_command_start(text: str) -> str:
    """A line that starts with `::` (a GitHub Actions workflow command) made inert: `:\\:`."""
    return _COMMAND_START.sub(r"\1\\:", text)


def for_terminal(text: object) -> str:
    """Text from a file made safe to print: controls visible, no line that starts with `::`."""
    escaped = _TERMINAL.sub(lambda m: _visible(m.group()), str(text))
    return _COMMAND_START.sub(r"\1\\:", escaped)


def diff_line(line: str) -> str:
    """One line of a unified diff for a terminal: its line ending kept, every other control
    character visible (a value's ESC cannot act), and never a `::` start (a diff body line starts
    with " ", "+" or "-", a header with "---"/"+++"/"@@", so only a name could)."""
    body = line.rstrip("\r\n")
    return for_terminal(body) + line[len(body) :]


def for_xml(text: object) -> str:
    """Text XML 1.0 can hold (the characters it cannot are shown as visible escapes)."""
    return _XML_BAD.sub(lambda m: _visible(m.group()), str(text))


def for_workflow_data(text: object) -> str:
    """A workflow command's message (`::error ...::MESSAGE`)."""
    value = str(text).replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")  # the toolkit's
    return _TERMINAL.sub(lambda m: _visible(m.group()), value)  # what is left would reach the log viewer


def for_workflow_property(text: object) -> str:
    """A workflow command's property value (`file=`, `title=`)."""
    return for_workflow_data(text).replace(":", "%3A").replace(",", "%2C")


def for_sarif(text: object) -> str:
    """SARIF message text: JSON escapes controls; lone surrogates are made visible."""
    return re.sub("[\ud800-\udfff]", lambda m: _visible(m.group()), str(text))


def sarif_uri(path: Path) -> str:
    """A path as a SARIF artifact URI: relative with forward slashes, else a file: URI,
    percent-encoded either way (spaces, `#`, `?`, `%`, controls, non-ASCII)."""
    from urllib.parse import quote

    if path.is_absolute():
        return path.as_uri()
    return quote(path.as_posix(), safe="/", errors="surrogateescape")


def for_markdown(text: object) -> str:
    """One Markdown table cell that cannot end the row, open a tag or load an image."""
    value = for_terminal(text).replace("\\", "\\\\").replace("|", "\\|")
    return value.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("`", "\\`")


_YAML_UNSAFE = re.compile(f"[\x00-\x1f\x7f-\x9f\u2028\u2029\ufeff{_BIDI}\ud800-\udfff]")


def yaml_comment(text: object) -> str:
    """A name or note inside a YAML `#` comment: as it is when it is one plain line, else one
    JSON-quoted ASCII line (YAML ends a comment at \\n, \\r, NEL, U+2028 and U+2029)."""
    value = str(text)
    return value if not _YAML_UNSAFE.search(value) else json.dumps(value, ensure_ascii=True)


_SHELL_CONTROL = re.compile(f"[\x00-\x1f\x7f-\x9f{_BIDI}\ud800-\udfff]")


def shell_word(word: str) -> str:
    """One word of a command line we print: shlex's quoting, or bash's `$'...'` with visible
    escapes when the word holds a control character, so a newline in a value (an --env value, a
    pass-through flag) can never print a line of its own, yet the word pastes back as it was."""
    import shlex

    if not _SHELL_CONTROL.search(word):
        return shlex.quote(word)
    body = word.replace("\\", "\\\\").replace("'", "\\'")
    return "$'" + _SHELL_CONTROL.sub(lambda m: _visible(m.group()), body) + "'"


def control_free(text: str) -> bool:
    """Whether `text` holds no control character (nothing shell_word would escape)."""
    return not _SHELL_CONTROL.search(text)


def shell_join(argv: Sequence[str]) -> str:
    """A command line to print (shlex.join, with shell_word's escapes)."""
    return " ".join(shell_word(word) for word in argv)
