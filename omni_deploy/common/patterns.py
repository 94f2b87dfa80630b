"""Glob patterns matched in linear time: `*` and `?` within a name, `[...]` classes, `**` across folders.

Regular-expression translations of globs backtrack: `**a**a**a**b` against a long name, or `*a*a*b`
through fnmatch, costs time exponential in the number of stars. Here a pattern is a short list of
tokens and a name is matched by keeping the set of token positions it may be at (a Thompson NFA),
so one match costs at most len(name) x len(tokens) steps, whatever the pattern.

A pattern that cannot mean anything (an unclosed `[`, a `[z-a]` range, an empty `[!]`) is refused
with BadPattern (a usage error), never passed on to a regex engine that would raise.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

MAX_PATTERN = 1024  # characters of one pattern
MAX_PATTERNS = 1000  # patterns one setting may list


class BadPattern(ValueError):
    """A glob pattern that is malformed or too long (a usage error: exit 2, cli.EXIT_CODES)."""


@dataclass(frozen=True)
class _Class:
    ranges: tuple[tuple[str, str], ...]
    negated: bool

    def matches(self, char: str) -> bool:
        inside = any(low <= char <= high for low, high in self.ranges)
        return inside != self.negated and char != "/"


# Tokens: a one-character string (a literal), "?" as _ANY, "*" as _STAR (not across "/"), "**" as
# _DEEP (anything), "**/" as _DIRS (nothing, or anything that ends in "/"), or a _Class.
_ANY, _STAR, _DEEP, _DIRS = object(), object(), object(), object()
_Token = object


def _class(pattern: str, start: int) -> tuple[_Class, int]:
    """The class opening at pattern[start] == "[", and the index after its "]"."""
    i = start + 1
    negated = i < len(pattern) and pattern[i] in "!^"
    if negated:
        i += 1
    ranges: list[tuple[str, str]] = []
    first = True
    while i < len(pattern) and (first or pattern[i] != "]"):
        first = False
        low = pattern[i]
        if i + 2 < len(pattern) and pattern[i + 1] == "-" and pattern[i + 2] != "]":
            high = pattern[i + 2]
            if high < low:
                raise BadPattern(f"invalid pattern {shown(pattern)}: the range {low}-{high} is reversed")
            ranges.append((low, high))
            i += 3
        else:
            ranges.append((low, low))
            i += 1
    if i >= len(pattern):
        raise BadPattern(f"invalid pattern {shown(pattern)}: '[' at {start + 1} is never closed with ']'")
    return _Class(tuple(ranges), negated), i + 1


def shown(pattern: str, limit: int = 80) -> str:
    """The pattern for a message: quoted, cut, control characters escaped (by repr)."""
    return repr(pattern if len(pattern) <= limit else pattern[:limit] + "...")


@lru_cache(maxsize=4096)
def compile_glob(pattern: str, *, across: bool = True) -> tuple[object, ...]:
    """The tokens of `pattern`. `across`: `**` spans folders (relative paths); else it is `*`."""
    if len(pattern) > MAX_PATTERN:
        raise BadPattern(f"pattern {shown(pattern)} is longer than {MAX_PATTERN} characters")
    tokens: list[object] = []
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if char == "*":
            j = i
            while j < len(pattern) and pattern[j] == "*":
                j += 1
            deep = across and j - i >= 2
            if deep and pattern.startswith("/", j) and (i == 0 or pattern[i - 1] == "/"):
                token, j = _DIRS, j + 1
            else:
                token = _DEEP if deep else _STAR
            if not tokens or tokens[-1] is not token:  # runs of stars are one star
                tokens.append(token)
            i = j
        elif char == "?":
            tokens.append(_ANY)
            i += 1
        elif char == "[":
            cls, i = _class(pattern, i)
            tokens.append(cls)
        else:
            tokens.append(char)
            i += 1
    return tuple(tokens)


def _closure(tokens: tuple[object, ...], states: set[int]) -> set[int]:
    """States reachable without reading: a star (of any kind) may match nothing."""
    out = set(states)
    stack = list(states)
    while stack:
        state = stack.pop()
        if state % 2:
            continue  # inside a "**/": it must read a "/" to leave
        index = state // 2
        if index < len(tokens) and tokens[index] in (_STAR, _DEEP, _DIRS):
            nxt = 2 * (index + 1)
            if nxt not in out:
                out.add(nxt)
                stack.append(nxt)
    return out


def _moves(token: object, index: int, inside: bool, char: str) -> tuple[int, ...]:
    """The states token `index` leads to on reading `char` (from inside a "**/" when `inside`)."""
    after = 2 * (index + 1)
    if token is _DIRS:
        return (2 * index + 1, after) if char == "/" else (2 * index + 1,)
    if inside:
        return ()
    if token is _DEEP or (token is _STAR and char != "/"):
        return (2 * index,)
    if token is _ANY:
        return (after,) if char != "/" else ()
    if isinstance(token, _Class):
        return (after,) if token.matches(char) else ()
    return (after,) if token == char else ()


def _step(tokens: tuple[object, ...], states: set[int], char: str) -> set[int]:
    after: set[int] = set()
    for state in states:
        index, inside = divmod(state, 2)
        if index < len(tokens):
            after.update(_moves(tokens[index], index, bool(inside), char))
    return _closure(tokens, after)


def matches(pattern: str, name: str, *, across: bool = True) -> bool:
    """Whether the whole of `name` matches `pattern` (see compile_glob for `across`)."""
    tokens = compile_glob(pattern, across=across)
    states = _closure(tokens, {0})
    for char in name:
        states = _step(tokens, states, char)
        if not states:
            return False
    return 2 * len(tokens) in states


def check(patterns: list[str] | tuple[str, ...], what: str) -> None:
    """Refuse (BadPattern) a list of patterns that is too long or holds a malformed one."""
    if len(patterns) > MAX_PATTERNS:
        raise BadPattern(f"{what}: {len(patterns)} patterns; at most {MAX_PATTERNS} are read")
    for pattern in patterns:
        compile_glob(pattern)
