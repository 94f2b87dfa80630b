"""Tables for people: columns aligned by rich, fitted to the terminal, plain when piped.

On a terminal the table is fitted to its width (long cells fold, numbers never do); into a pipe or
a file nothing is folded, so `grep` and `awk` see one row per line.
"""

from __future__ import annotations

import io
import os
import shutil
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TextIO

from omni_deploy.output import color

UNBOUNDED = 10_000


@dataclass(frozen=True)
class Column:
    header: str
    numeric: bool = False  # right-aligned and never folded
    style: str | None = None  # rich style of the cells, shown only with colour
    wrap: bool = False  # a numeric cell that may break at its spaces on a narrow terminal


def width_for(stream: TextIO) -> int:
    """The terminal's width for a terminal; COLUMNS if set; else no limit."""
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):
        tty = False
    if tty:
        return shutil.get_terminal_size().columns
    columns = os.environ.get("COLUMNS", "")
    return int(columns) if columns.isdigit() and int(columns) > 0 else UNBOUNDED


def _cell(value: Any) -> str:
    return "-" if value is None else str(value)


def to_text(
    columns: Sequence[Column],
    rows: Sequence[Sequence[Any]],
    *,
    title: str | None = None,
    stream: TextIO | None = None,
    indent: int = 0,
) -> str:
    """The table as text for `stream` (default stdout): its width and, on a terminal, colour."""
    from rich import box
    from rich.console import Console
    from rich.padding import Padding
    from rich.table import Table

    target = stream if stream is not None else sys.stdout
    colored = color.wanted(target)
    table = Table(
        title=title,
        title_justify="left",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
        header_style="bold" if colored else "",
        title_style="bold" if colored else "",
    )
    for column in columns:
        table.add_column(
            column.header,
            justify="right" if column.numeric else "left",
            no_wrap=column.numeric and not column.wrap,
            overflow="fold",
            min_width=len(column.header) if column.numeric and not column.wrap else None,
            style=column.style if colored else None,
        )
    for row in rows:
        table.add_row(*(_cell(v) for v in row))
    buffer = io.StringIO()
    console = Console(
        file=buffer,
        width=max(20, width_for(target) - indent),
        force_terminal=colored,
        no_color=not colored,
        color_system="standard" if colored else None,
        highlight=False,
        emoji=False,
        markup=False,
        soft_wrap=False,
    )
    console.print(Padding(table, (0, 0, 0, indent)) if indent else table)
    lines = [line.rstrip() for line in buffer.getvalue().splitlines()]
    return "\n".join(lines)
