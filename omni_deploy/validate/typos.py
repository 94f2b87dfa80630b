"""Near misses: an unknown key one slip (two for long names) from a known one is a typo."""

from __future__ import annotations

from collections.abc import Iterable


def distance(a: str, b: str) -> int:
    """Edits (insert, delete, substitute, swap two neighbours) that turn `a` into `b`."""
    rows = [list(range(len(b) + 1))]
    for i in range(1, len(a) + 1):
        row = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = 0 if a[i - 1] == b[j - 1] else 1
            row[j] = min(rows[-1][j] + 1, row[j - 1] + 1, rows[-1][j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                row[j] = min(row[j], rows[-2][j - 2] + 1)
        rows.append(row)
    return rows[-1][-1]


def allowed(name: str) -> int:
    """How many slips still read as this name: one, two from 8 characters on."""
    return 2 if len(name) >= 8 else 1


def near_miss(name: str, known: Iterable[str]) -> str | None:
    """The known name `name` most likely misspells, if any (ties: the first in sorted order)."""
    best: tuple[int, str] | None = None
    for candidate in sorted(set(known)):
        if candidate == name:
            return None
        d = distance(name.lower(), candidate.lower())
        if d <= allowed(candidate) and (best is None or d < best[0]):
            best = (d, candidate)
    return best[1] if best else None
