"""Near misses: an unknown key one slip (two for long names) from a known one is a typo.

Bounded by the input: a name far longer or shorter than a known one cannot be a slip from it, so
only known names within the allowed slips in length are compared, and the comparison is banded
(only cells within that many slips of the diagonal) with an early stop, so a 200 KB key costs
about as much as a short one.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache


def distance(a: str, b: str, cutoff: int | None = None) -> int:
    """Edits (insert, delete, substitute, swap two neighbours) that turn `a` into `b`.

    With `cutoff`, any answer above it is reported as cutoff + 1, and only the band of cells
    within `cutoff` of the diagonal is computed (O(len * cutoff))."""
    if cutoff is None:
        cutoff = max(len(a), len(b))
    if abs(len(a) - len(b)) > cutoff:
        return cutoff + 1
    far = cutoff + 1
    previous: list[int] = []
    row = [j if j <= cutoff else far for j in range(len(b) + 1)]
    for i in range(1, len(a) + 1):
        previous, above = row, previous
        row = [far] * (len(b) + 1)
        row[0] = i if i <= cutoff else far
        low, high = max(1, i - cutoff), min(len(b), i + cutoff)
        best = row[0]
        for j in range(low, high + 1):
            cost = 0 if a[i - 1] == b[j - 1] else 1
            value = min(previous[j] + 1, row[j - 1] + 1, previous[j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                value = min(value, above[j - 2] + 1)
            row[j] = min(value, far)
            best = min(best, row[j])
        if best > cutoff:
            return far
    return min(row[-1], far)


def allowed(name: str) -> int:
    """How many slips still read as this name: one, two from 8 characters on."""
    return 2 if len(name) >= 8 else 1


@lru_cache(maxsize=64)
def _by_length(known: frozenset[str]) -> dict[int, list[tuple[str, str]]]:
    """Known names by length, each sorted, with its lower-case form (computed once per set)."""
    out: dict[int, list[tuple[str, str]]] = {}
    for candidate in sorted(known):
        out.setdefault(len(candidate), []).append((candidate, candidate.lower()))
    return out


def near_miss(name: str, known: Iterable[str]) -> str | None:
    """The known name `name` most likely misspells, if any (ties: the first in sorted order)."""
    names = frozenset(known)
    if name in names:
        return None
    table = _by_length(names)
    lowered = name.lower()
    best: tuple[int, str] | None = None
    # Only names within two characters of its length can be within two slips of it.
    for length in range(max(0, len(name) - 2), len(name) + 3):
        for candidate, lower in table.get(length, ()):
            slips = allowed(candidate)
            if abs(length - len(name)) > slips:
                continue
            d = distance(lowered, lower, slips)
            if d <= slips and (best is None or d < best[0] or (d == best[0] and candidate < best[1])):
                best = (d, candidate)
    return best[1] if best else None
