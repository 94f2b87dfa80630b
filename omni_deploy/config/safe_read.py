"""Read a user's file without being blocked, flooded or fooled: the one way YAML and JSON come in.

Only regular files are read: a FIFO would block forever, `/dev/zero` never ends, a directory is
not text. The file is opened non-blocking and checked on the open descriptor (no race with a
rename), read up to a size cap, and decoded as strict UTF-8 with the position of the first bad
byte. Pseudo-file systems (/proc, /sys, /dev) are refused outright: `base_config:
/proc/self/environ` must not turn the environment into error messages.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

from omni_deploy import codes
from omni_deploy.codes import Code
from omni_deploy.errors import ConfigError, Location

# Deploy files and benchmark results are a few KiB; PyYAML reads about 1 MiB/s.
MAX_FILE_BYTES = 2 * 1024 * 1024
MAX_JSON_DEPTH = 64
_PSEUDO_ROOTS = ("/proc", "/sys", "/dev")


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _refuse(name: str, why: str, code: Code = codes.E107) -> ConfigError:
    return ConfigError(f"cannot read {name}: {why}", Location(name), code=code)


def read_bytes(path: Path, name: str | None = None, limit: int = MAX_FILE_BYTES) -> bytes:
    """The bytes of a regular file of at most `limit` bytes, or a ConfigError that says why not."""
    name = name or str(path)
    real = os.path.realpath(path)  # never raises, also not on symlink loops
    if any(real == root or real.startswith(root + "/") for root in _PSEUDO_ROOTS):
        raise _refuse(name, f"{real} is a system pseudo-file, not a deploy file")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise ConfigError(f"no such file: {name}", Location(name), code=codes.E107) from None
    except OSError as exc:
        raise _refuse(name, exc.strerror or str(exc)) from None
    except ValueError as exc:  # embedded NUL in the name
        raise _refuse(name, str(exc)) from None
    try:
        return _read_regular(fd, name, limit)
    except OSError as exc:
        raise _refuse(name, exc.strerror or str(exc)) from None
    finally:
        os.close(fd)


def _read_regular(fd: int, name: str, limit: int) -> bytes:
    """All of an open regular file, read in chunks so that a file growing past `limit` stops."""
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        raise _refuse(name, f"it is {_kind(info.st_mode)}; only regular files are read")
    if info.st_size > limit:
        raise _refuse(name, f"it has {info.st_size} bytes; the limit is {limit}", code=codes.E109)
    chunks = []
    size = 0
    while chunk := os.read(fd, 65536):
        size += len(chunk)
        if size > limit:
            raise _refuse(name, f"it has more than {limit} bytes", code=codes.E109)
        chunks.append(chunk)
    return b"".join(chunks)


def decode_utf8(data: bytes, name: str) -> str:
    """Strict UTF-8 (a leading BOM is dropped); a bad byte is reported at its line and column."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        before = data[: exc.start]
        line = before.count(b"\n") + 1
        column = len(before) - (before.rfind(b"\n") + 1) + 1
        raise ConfigError(
            f"not UTF-8: byte 0x{data[exc.start]:02x} cannot start or continue a character",
            Location(name, line, column),
            code=codes.E108,
            hint="save the file as UTF-8",
        ) from None
    return text.removeprefix("\ufeff")


def read_text(path: Path, name: str | None = None, limit: int = MAX_FILE_BYTES) -> str:
    name = name or str(path)
    return decode_utf8(read_bytes(path, name, limit), name)


def _no_constant(token: str) -> Any:
    raise ValueError(f"{token} is not a JSON number")


def _depth(value: Any) -> int:
    """Nesting depth, iteratively (a recursive walk is what deep input is meant to break)."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, level = stack.pop()
        deepest = max(deepest, level)
        if isinstance(item, dict):
            stack.extend((v, level + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, level + 1) for v in item)
    return deepest


def parse_json(text: str, name: str, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """Strict JSON: NaN/Infinity refused, nesting capped, huge integers refused, all as findings."""
    try:
        value = json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"not valid JSON: {exc.msg}", Location(name, exc.lineno, exc.colno), code=codes.E101
        ) from None
    except RecursionError:
        raise ConfigError(
            f"JSON nested deeper than {max_depth} levels", Location(name), code=codes.E109
        ) from None
    except ValueError as exc:  # NaN/Infinity, or an integer beyond Python's digit limit
        raise ConfigError(f"not valid JSON: {exc}", Location(name), code=codes.E101) from None
    if _depth(value) > max_depth:
        raise ConfigError(f"JSON nested deeper than {max_depth} levels", Location(name), code=codes.E109)
    return value


def read_json(path: Path, name: str | None = None, limit: int = MAX_FILE_BYTES) -> Any:
    name = name or str(path)
    return parse_json(read_text(path, name, limit), name)
