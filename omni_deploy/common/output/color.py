"""Whether to colour: `--color` first, then NO_COLOR / FORCE_COLOR, then whether the stream is a terminal.

Kept free of rich so that deciding costs nothing; rich is imported only when something is drawn.
"""

from __future__ import annotations

import os
from typing import TextIO

COLOR_MODES = ("auto", "always", "never")

_mode = "auto"


def set_mode(mode: str) -> None:
    global _mode
    if mode not in COLOR_MODES:
        raise ValueError(f"colour mode must be one of {', '.join(COLOR_MODES)}, not {mode!r}")
    _mode = mode


def mode() -> str:
    return _mode


def wanted(stream: TextIO) -> bool:
    if _mode != "auto":
        return _mode == "always"
    # https://no-color.org: any non-empty value turns colour off; FORCE_COLOR is its opposite.
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    try:
        return stream.isatty() and os.environ.get("TERM") != "dumb"
    except (AttributeError, ValueError):
        return False
