"""Progress for long waits: a live line on a terminal (what, how far, how long), plain lines otherwise.

On a terminal rich draws a spinner or a bar with the elapsed time and removes it when done; into
a log file only changes of the status text are written, one line each, so CI logs show what the
wait was doing without a line per poll.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TextIO


def _is_tty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


class Reporter:
    """Handed to the code that waits or loops: `update` says what is happening, `advance` counts."""

    def __init__(self, description: str, stream: TextIO, live: Any = None, task: Any = None) -> None:
        self.description = description
        self.stream = stream
        self._live = live
        self._task = task
        self._last = ""

    def update(self, status: str) -> None:
        if self._live is not None:
            self._live.update(self._task, status=status)
        elif status != self._last:
            print(f"omni-deploy: {self.description}: {status}", file=self.stream, flush=True)
        self._last = status

    def advance(self, steps: int = 1) -> None:
        if self._live is not None:
            self._live.advance(self._task, steps)


@contextmanager
def progress(description: str, total: int | None = None, stream: TextIO | None = None) -> Iterator[Reporter]:
    """A progress display on `stream` (default stderr) for the duration of the block."""
    target = stream if stream is not None else sys.stderr
    if not _is_tty(target):
        yield Reporter(description, target)
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
    )

    from omni_deploy.common.output import color

    console = Console(file=target, force_terminal=True, no_color=not color.wanted(target), highlight=False)
    columns: list[Any] = [SpinnerColumn(), TextColumn("{task.description}")]
    if total is not None:
        columns += [BarColumn(), MofNCompleteColumn()]
    columns += [TimeElapsedColumn(), TextColumn("{task.fields[status]}")]
    with Progress(*columns, console=console, transient=True) as live:
        task = live.add_task(description, total=total, status="")
        yield Reporter(description, target, live, task)


class WaitReport:
    """What a long wait says while it waits: the elapsed time and the last answer, when the answer
    changes and at least every `every` seconds, as plain lines (safe to interleave with a server's
    log on the same terminal, and readable in a CI log)."""

    def __init__(self, what: str, limit: float, stream: TextIO | None = None, every: float = 15.0) -> None:
        self.what = what
        self.limit = limit
        self.stream = stream if stream is not None else sys.stderr
        self.every = every
        self._last_status: object = object()
        self._last_at = 0.0

    def __call__(self, elapsed: float, status: str) -> None:
        if status == self._last_status and elapsed - self._last_at < self.every:
            return
        self._last_status, self._last_at = status, elapsed
        print(
            f"omni-deploy: waiting for {self.what}: {status} after {elapsed:.0f} s (limit {self.limit:g} s)",
            file=self.stream,
            flush=True,
        )
