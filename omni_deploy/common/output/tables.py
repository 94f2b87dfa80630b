"""Tables for people: columns aligned by rich, fitted to the terminal, plain when piped.

On a terminal (or with COLUMNS set) the table is fitted to its width: a table too wide for it is
cut by columns into blocks that each fit, the key columns (`keys`: the first ones, which name a
row) repeated in every block; text cells may fold, numbers never do. Into a pipe or a file
nothing is cut or folded, so `grep` and `awk` see one row per line.
"""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TextIO

from omni_deploy.common.numbers import terminal_size
from omni_deploy.common.output import color

UNBOUNDED = 10_000
# Rows drawn at most: rich takes milliseconds a row, and a file can ask for 20,000 stages; the
# rest is counted on one line (JSON output has them all).
MAX_ROWS = 500


@dataclass(frozen=True)
class Column:
    header: str
    numeric: bool = False  # right-aligned and never folded
    style: str | None = None  # rich style of the cells, shown only with colour


def width_for(stream: TextIO) -> int:
    """The terminal's width for a terminal; COLUMNS if set; else no limit."""
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):
        tty = False
    # One rule with start-up's sanitize_environment (numbers.terminal_size): what it refuses is unset.
    columns = terminal_size(os.environ.get("COLUMNS", ""))
    if columns is not None:
        return columns  # as shutil.get_terminal_size reads it, without importing shutil
    if tty:
        try:
            size = os.get_terminal_size(stream.fileno()).columns
        except (OSError, ValueError, AttributeError):
            size = 0
        return size if size > 0 else 80  # a terminal that does not say: 80, as shutil assumes
    return UNBOUNDED


def _cell(value: Any) -> str:
    from omni_deploy.common.output.escape import capped, for_terminal  # cells hold values from files

    if value is None:
        return "-"
    return for_terminal(capped(str(value), MAX_CELL))  # a megabyte value is not a cell


MAX_CELL = 200  # characters of one cell (-o json has the whole value)


def to_text(
    columns: Sequence[Column],
    rows: Sequence[Sequence[Any]],
    *,
    title: str | None = None,
    stream: TextIO | None = None,
    indent: int = 0,
    keys: int = 0,
) -> str:
    """The table as text for `stream` (default stdout): its width and, on a terminal, colour.

    `keys`: how many leading columns name a row; with keys, a table wider than the width is cut
    into blocks of columns (each repeating the keys) rather than folding cells.
    """
    target = stream if stream is not None else sys.stdout
    colored = color.wanted(target)
    width = max(20, width_for(target) - indent)
    cells = [[_cell(v) for v in row] for row in rows[:MAX_ROWS]]
    blocks = _blocks(columns, cells, keys, width) if keys else [list(range(len(columns)))]
    drawn = [
        _draw([columns[i] for i in block], [[row[i] for i in block] for row in cells],
              title if n == 0 else None, colored, width, indent)
        for n, block in enumerate(blocks)
    ]  # fmt: skip
    if len(rows) > MAX_ROWS:
        drawn[-1] += (
            "\n" + " " * indent + f"... {len(rows) - MAX_ROWS} more row(s) not shown (-o json lists them all)"
        )
    return "\n\n".join(drawn)


def _blocks(columns: Sequence[Column], cells: list[list[str]], keys: int, width: int) -> list[list[int]]:
    """Column indexes per block: the keys, then as many further columns as fit in `width`."""
    if width >= UNBOUNDED:
        return [list(range(len(columns)))]
    natural = [
        max([len(c.header), *(len(row[i]) for row in cells)]) for i, c in enumerate(columns)
    ]  # a numeric cell is never folded; a header may wrap at its spaces, but stays as wide
    gap = 3  # between two columns: rich's padding on either side and the box's blank divider

    def fits(block: list[int]) -> bool:
        return sum(natural[i] for i in block) + gap * (len(block) - 1) <= width

    head = list(range(min(keys, len(columns))))
    blocks: list[list[int]] = [list(head)]
    for i in range(len(head), len(columns)):
        if len(blocks[-1]) > len(head) and not fits([*blocks[-1], i]):
            blocks.append(list(head))
        blocks[-1].append(i)
    return blocks


def _draw(
    columns: Sequence[Column],
    rows: Sequence[Sequence[str]],
    title: str | None,
    colored: bool,
    width: int,
    indent: int,
) -> str:
    from rich import box
    from rich.console import Console
    from rich.padding import Padding
    from rich.table import Table

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
            no_wrap=column.numeric,
            overflow="fold",
            min_width=len(max(column.header.split(), key=len, default="")) if column.numeric else None,
            style=column.style if colored else None,
        )
    for row in rows:
        table.add_row(*row)
    buffer = io.StringIO()
    console = Console(
        file=buffer,
        width=width,
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
