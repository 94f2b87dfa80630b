"""Numbers as operators type them on a command line: ASCII digits only, finite, within a range.

`int()` and `float()` also take '٣', '1_000', ' 12 ', 'nan' and 'inf', and a 5,000-digit integer
raises; these parsers accept only plain digits (with a length cap) and finite values, and say
what is wrong in a ValueError. The CLI's option types (cli.params.Count, Real) and anything that
parses a number from a user (bench ab's overrides, serve's --stage-id) use them.
"""

from __future__ import annotations

import math
import re

MAX_DIGITS = 18  # below 2**63: no count or port needs more
_DIGITS = f"[0-9]{{1,{MAX_DIGITS}}}"
_INTEGER = re.compile(f"[-+]?{_DIGITS}")
_REAL = re.compile(rf"[-+]?({_DIGITS}(\.[0-9]{{0,{MAX_DIGITS}}})?|\.{_DIGITS})([eE][-+]?[0-9]{{1,3}})?")


def parse_count(text: str, low: int = 0, high: int | None = None) -> int:
    """A whole number written in ASCII digits within [low, high]; ValueError says what is wrong."""
    word = str(text).strip()
    if not _INTEGER.fullmatch(word):
        raise ValueError(f"{text!r} is not a whole number (digits 0-9, at most {MAX_DIGITS})")
    value = int(word)
    if value < low or (high is not None and value > high):
        wanted = f"at least {low}" if high is None else f"between {low} and {high}"
        raise ValueError(f"{value} must be {wanted}")
    return value


def parse_real(text: str, low: float = 0.0, high: float | None = None, low_open: bool = False) -> float:
    """A finite decimal number within its range (NaN, infinity and other spellings refused)."""
    word = str(text).strip()
    if not _REAL.fullmatch(word):
        raise ValueError(f"{text!r} is not a plain finite number (such as 30 or 2.5)")
    value = float(word)
    if not math.isfinite(value):
        raise ValueError(f"{text!r} is not a finite number")
    if value < low or (low_open and value == low) or (high is not None and value > high):
        bound = f"more than {low:g}" if low_open else f"at least {low:g}"
        limit = f" and at most {high:g}" if high is not None else ""
        raise ValueError(f"{value:g} must be {bound}{limit}")
    return value


SECONDS_LIMIT = 7 * 24 * 3600.0  # a week: longer than any start-up or stop a server takes


MAX_VERSION_CHARS = 64  # "0.30.0rc1.dev123+g1234abcd.d20260101" and room to spare
MAX_VERSION_NUMBER = 9  # digits of one number in a version


def version_problem(text: str) -> str | None:
    """What is wrong with a version string from outside (an option, the environment, a settings
    file, a package's metadata, an interpreter's answer) before anything parses it, or None.
    A 5,000-digit version makes int() raise (and packaging with it): refused with a message."""
    if len(text) > MAX_VERSION_CHARS:
        return f"a version of {len(text)} characters (at most {MAX_VERSION_CHARS})"
    if re.search(f"[0-9]{{{MAX_VERSION_NUMBER + 1},}}", text):
        return f"a version with a number of more than {MAX_VERSION_NUMBER} digits"
    if not text.isprintable():
        return "a version with control characters"
    return None


MAX_TERMINAL_SIZE = 100_000  # columns or lines: a larger COLUMNS or LINES is no terminal's


def terminal_size(text: str) -> int | None:
    """A terminal size from the environment (COLUMNS, LINES): 1 to MAX_TERMINAL_SIZE in ASCII
    digits, else None, as if unset. int() takes '٣' and ' 80 ' and raises on 5,000 digits; rich
    and shutil's callers read these variables too, so start-up drops what this refuses."""
    if not (text.isascii() and text.isdigit()) or len(text) > len(str(MAX_TERMINAL_SIZE)):
        return None
    value = int(text)
    return value if 0 < value <= MAX_TERMINAL_SIZE else None
