"""The one guarded way in for anything the user or the environment names: files, folders, globs,
stdin, and the output of programs we probe.

A reader must never be blocked, flooded or fooled, so:

- Only regular files are read. A FIFO would block forever, `/dev/zero` never ends, a directory is
  not text. The exception is a pipe the user named as the argument itself (`-` is read by
  `read_stream`; `<(git show ...)` arrives as `/dev/fd/N`, a plain FIFO path may be named too):
  that is read, but a writer that sends nothing for FIFO_IDLE seconds ends it.
- Files are opened non-blocking and checked on the open descriptor (no race with a rename), read
  up to a size cap, and decoded as strict UTF-8 with the position of the first bad byte.
- Pseudo-file systems (/proc, /sys, /dev) are refused outright, also through a symlink:
  `base_config: /proc/self/environ` must not turn the environment into error messages.
- Folders and globs are walked iteratively, never following a symlinked folder, with a bound on
  depth and on the number of entries, so a tree 1,100 levels deep or a link cycle is a message.
- A probed program's output is read with a cap per stream and a time limit; its whole process
  group is killed when either is reached.

Standard library only: the speaker side (which imports nothing of the config side) uses it too.
Every refusal is one exception, `Refused`, whose `kind` the callers map to their own errors.
"""

from __future__ import annotations

import os
import re
import select
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

MAX_BYTES = 2 * 1024 * 1024  # deploy files and benchmark results are a few KiB
MAX_DEPTH = 64  # folder levels below a walked directory
MAX_FILES = 10_000  # files a walk or a glob may return
MAX_VISITED = 200_000  # entries a walk or a glob may look at
FIFO_IDLE = 30.0  # seconds a named pipe may stay silent
_PSEUDO_ROOTS = ("/proc", "/sys", "/dev")
# The user's own descriptors, named as arguments: a pipe or a file behind them is theirs to give.
_OWN_DESCRIPTORS = re.compile(r"^/(dev/fd|proc/self/fd)/\d+$|^/dev/std(in|out|err)$")


class Refused(Exception):
    """Something named cannot be read; `kind` says why in one word for the caller's mapping:
    missing, type, pseudo, size, encoding, depth, count, os."""

    def __init__(self, name: str, why: str, kind: str, line: int = 0, column: int = 0) -> None:
        super().__init__(f"cannot read {name}: {why}")
        self.name, self.why, self.kind, self.line, self.column = name, why, kind, line, column


def kind_of(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _pseudo(path: str) -> str | None:
    real = os.path.realpath(path)  # never raises, also not on symlink loops
    if any(real == root or real.startswith(root + "/") for root in _PSEUDO_ROOTS):
        return real
    return None


def _open(path: Path, name: str, nofollow: bool) -> int:
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    if nofollow:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        return os.open(path, flags)
    except FileNotFoundError:
        raise Refused(name, "no such file", "missing") from None
    except OSError as exc:
        raise Refused(name, exc.strerror or str(exc), "os") from None
    except ValueError as exc:  # an embedded NUL in the name
        raise Refused(name, str(exc), "os") from None


def read_bytes(
    path: Path | str,
    name: str | None = None,
    limit: int = MAX_BYTES,
    *,
    named: bool = False,
    nofollow: bool = False,
) -> bytes:
    """The bytes of a regular file of at most `limit` bytes, or Refused saying why not.

    `named`: the user named this path as the argument itself, so a pipe there is read too.
    `nofollow`: a symlink as the last component is refused (files of our own run directories).
    """
    name = name or str(path)
    text = str(path)
    own = named and bool(_OWN_DESCRIPTORS.match(text))
    if not own:
        real = _pseudo(text)
        if real is not None:
            raise Refused(name, f"{real} is a system pseudo-file, not a file to read", "pseudo")
    fd = _open(Path(path), name, nofollow)
    try:
        info = os.fstat(fd)
        if stat.S_ISFIFO(info.st_mode) and named:
            return _read_pipe(fd, name, limit)
        if not stat.S_ISREG(info.st_mode):
            raise Refused(name, f"it is {kind_of(info.st_mode)}; only regular files are read", "type")
        if info.st_size > limit:
            raise Refused(name, f"it has {info.st_size} bytes; the limit is {limit}", "size")
        return _read_all(fd, name, limit)
    except OSError as exc:
        raise Refused(name, exc.strerror or str(exc), "os") from None
    finally:
        os.close(fd)


def _read_all(fd: int, name: str, limit: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while True:
        chunk = os.read(fd, 65536)
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > limit:
            raise Refused(name, f"it has more than {limit} bytes; the limit is {limit}", "size")
        chunks.append(chunk)


def _read_pipe(fd: int, name: str, limit: int) -> bytes:
    """A pipe the user named: read to its end, with the cap, and an idle limit on the writer."""
    chunks: list[bytes] = []
    size = 0
    first = True
    while True:
        try:  # read first: Linux never reports a FIFO that never had a writer as readable
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            ready, _, _ = select.select([fd], [], [], FIFO_IDLE)
            if not ready:
                raise Refused(
                    name, f"it is a FIFO (named pipe) that sent nothing for {FIFO_IDLE:g} s", "type"
                ) from None
            continue
        if not chunk:
            if first:
                raise Refused(
                    name, "it is a FIFO (named pipe) with no writer; only regular files are read", "type"
                )
            return b"".join(chunks)
        first = False
        size += len(chunk)
        if size > limit:
            raise Refused(name, f"it has more than {limit} bytes; the limit is {limit}", "size")
        chunks.append(chunk)


def read_stream(stream: BinaryIO, name: str, limit: int = MAX_BYTES) -> bytes:
    """At most `limit` bytes of an open stream (stdin); more is Refused, without reading on."""
    data = stream.read(limit + 1)
    if len(data) > limit:
        raise Refused(name, f"it has more than {limit} bytes; the limit is {limit}", "size")
    return data


def decode(data: bytes, name: str) -> str:
    """Strict UTF-8 (a leading BOM is dropped); a bad byte is Refused at its line and column."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        before = data[: exc.start]
        line = before.count(b"\n") + 1
        column = len(before) - (before.rfind(b"\n") + 1) + 1
        why = f"not UTF-8: byte 0x{data[exc.start]:02x} cannot start or continue a character"
        raise Refused(name, why, "encoding", line, column) from None
    return text.removeprefix("\ufeff")


def read_text(
    path: Path | str, name: str | None = None, limit: int = MAX_BYTES, *, named: bool = False
) -> str:
    name = name or str(path)
    return decode(read_bytes(path, name, limit, named=named), name)


MAX_MODULE_BYTES = 4 * 1024 * 1024  # one Python module of an installed package


def installed_text(path: Path | str, limit: int = MAX_MODULE_BYTES) -> str | None:
    """The text of a file of an installed tree (vllm_omni's modules, a dist-info's files), or None
    when it is not one to read: the same guarded read as a named file's (regular files only,
    non-blocking open, size cap, strict UTF-8), since an installed tree is no more trusted."""
    try:
        return read_text(path, str(path), limit)
    except Refused:
        return None


def head(path: Path | str, limit: int) -> bytes | None:
    """At most the first `limit` bytes of a regular file (a METADATA's headers), None when it is
    not a regular file we may open; never blocks on a FIFO, never reads a device."""
    if _pseudo(str(path)) is not None:
        return None
    try:
        fd = _open(Path(path), str(path), nofollow=False)
    except Refused:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        chunks: list[bytes] = []
        size = 0
        while size < limit and (chunk := os.read(fd, min(65536, limit - size))):
            chunks.append(chunk)
            size += len(chunk)
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


def is_readable_file(path: Path | str) -> bool:
    """A regular file outside the pseudo-file systems, checked without opening it (no FIFO blocks)."""
    if _pseudo(str(path)) is not None:
        return False
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


# --- folders and globs ---------------------------------------------------------------------------


def _too_deep(root: str) -> Refused:
    return Refused(
        root, f"its folders nest deeper than {MAX_DEPTH} levels; name a folder nearer the files", "depth"
    )


def _too_many(root: str, what: str = "entries") -> Refused:
    limit = MAX_FILES if what == "files" else MAX_VISITED
    return Refused(root, f"it holds more than {limit} {what}; name a smaller folder", "count")


def _entries(folder: str) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(folder) as found:
            return sorted(found, key=lambda e: e.name)
    except OSError:
        return []  # unreadable or gone: nothing below it is found (as os.walk does)


def _is_dir(entry: os.DirEntry[str], follow: bool) -> bool:
    try:
        return entry.is_dir(follow_symlinks=follow)
    except OSError:
        return False


def walk(root: Path | str, suffixes: Sequence[str], *, hidden: bool = False) -> list[Path]:
    """Entries below `root` whose names end in one of `suffixes`, sorted per folder, depth first.

    Iterative; symlinked folders are not followed (no cycles); hidden folders and files are left
    out unless `hidden`. Entries that are not folders are returned whatever they are (FIFOs,
    links to devices), so the guarded reader can say why each cannot be read.
    """
    top = str(root)
    found: list[Path] = []
    visited = 0
    stack: list[tuple[str, int]] = [(top, 0)]
    while stack:
        folder, depth = stack.pop()
        below = []
        for entry in _entries(folder):
            visited += 1
            if visited > MAX_VISITED:
                raise _too_many(top)
            if entry.name.startswith(".") and not hidden:
                continue
            if _is_dir(entry, follow=False):
                if depth + 1 > MAX_DEPTH:
                    raise _too_deep(top)
                below.append(entry.path)
            elif entry.name.endswith(tuple(suffixes)) and not _is_dir(entry, follow=True):
                found.append(Path(entry.path))
                if len(found) > MAX_FILES:
                    raise _too_many(top, "files")
        stack.extend((path, depth + 1) for path in reversed(below))
    return found


_MAGIC = re.compile(r"[*?[]")


def has_magic(text: str) -> bool:
    return bool(_MAGIC.search(text))


def glob(pattern: str, base: Path | str | None = None) -> list[Path]:
    """What `pattern` matches (`*`, `?`, `[...]` per name, `**` for any folders), iteratively.

    Like `glob.glob(pattern, recursive=True)` for names: hidden names only where the pattern's
    part starts with a dot; `**` does not descend into symlinked folders or hidden ones. Bounded
    by MAX_DEPTH below the pattern's fixed prefix, MAX_FILES matches and MAX_VISITED entries; a
    folder reached twice (a symlink back to a parent) is walked once, known by device and inode.
    Names are matched in linear time (omni_deploy.common.patterns); a malformed pattern is refused
    (patterns.BadPattern). `base`: a folder taken literally (its name may hold `[` or `*`) that a
    relative `pattern` is below; results are spelt base/...
    """
    from omni_deploy.common.patterns import compile_glob

    compile_glob(pattern, across=False)  # refuse a malformed pattern before any walk
    if base is not None:
        literal = str(base).rstrip("/") or "/"
        found = _glob_parts(pattern, literal)
        return [Path(literal) / p if not p.is_absolute() else p for p in found]
    return _glob_parts(pattern, None)


def _glob_parts(pattern: str, literal: str | None) -> list[Path]:
    parts = pattern.split("/")
    fixed = 0
    while fixed < len(parts) - 1 and not has_magic(parts[fixed]):
        fixed += 1
    base = "/".join(parts[:fixed]) or ("/" if pattern.startswith("/") else ".")
    rest = parts[fixed:]
    on_disk = base if literal is None or pattern.startswith("/") else os.path.join(literal, base)
    if not rest or not has_magic("/".join(rest)):
        whole = pattern if literal is None or pattern.startswith("/") else os.path.join(literal, pattern)
        return [Path(pattern)] if os.path.lexists(whole) else []
    prefix = "" if fixed == 0 and not pattern.startswith("/") else base.rstrip("/") + "/"
    return _Glob(pattern, rest).run(on_disk, prefix)


class _Glob:
    """One glob's walk: a stack of (folder on disk, its spelling in the result, index of the
    pattern part to match next, depth below the fixed prefix), with the bounds counted."""

    def __init__(self, pattern: str, rest: list[str]) -> None:
        self.pattern, self.rest = pattern, rest
        self.matches: set[str] = set()
        self.visited = 0
        self.stack: list[tuple[str, str, int, int]] = []

    def run(self, base: str, prefix: str) -> list[Path]:
        self.stack.append((base, prefix, 0, 0))
        seen: set[tuple[int, int, int]] = set()
        while self.stack:
            folder, shown, index, depth = self.stack.pop()
            try:
                info = os.stat(folder)
            except (OSError, ValueError):
                continue
            key = (info.st_dev, info.st_ino, index)
            if key in seen:  # the same folder by another way (a symlink loop): walked once
                continue
            seen.add(key)
            if self.rest[index] == "**":
                self._any_folders(folder, shown, index, depth)
            else:
                self._one_name(folder, shown, index, depth)
            if len(self.matches) > MAX_FILES:
                raise _too_many(self.pattern, "files")
        return [Path(m.rstrip("/") or "/") for m in sorted(self.matches)]

    def _entries(self, folder: str) -> list[os.DirEntry[str]]:
        found = _entries(folder)
        self.visited += len(found)
        if self.visited > MAX_VISITED:
            raise _too_many(self.pattern)
        return found

    def _descend(self, entry: os.DirEntry[str], shown: str, index: int, depth: int) -> None:
        if depth + 1 > MAX_DEPTH:
            raise _too_deep(self.pattern)
        self.stack.append((entry.path, f"{shown}{entry.name}/", index, depth + 1))

    def _any_folders(self, folder: str, shown: str, index: int, depth: int) -> None:
        """`**`: this folder itself (the next part matched here), and every visible folder below."""
        if index == len(self.rest) - 1:
            if shown:
                self.matches.add(shown)
        else:
            self.stack.append((folder, shown, index + 1, depth))
        for entry in self._entries(folder):
            if not entry.name.startswith(".") and _is_dir(entry, follow=False):
                self._descend(entry, shown, index, depth)

    def _one_name(self, folder: str, shown: str, index: int, depth: int) -> None:
        from omni_deploy.common.patterns import matches

        part = self.rest[index]
        last = index == len(self.rest) - 1
        for entry in self._entries(folder):
            if entry.name.startswith(".") and not part.startswith("."):
                continue
            if not matches(part, entry.name, across=False):
                continue
            if last:
                self.matches.add(f"{shown}{entry.name}")
            elif _is_dir(entry, follow=True):
                self._descend(entry, shown, index + 1, depth)


# --- programs we probe ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Captured:
    returncode: int | None  # None: killed (time limit or output cap)
    stdout: str
    stderr: str
    why_stopped: str | None = None  # "timed out after 10 s", "printed more than N bytes"


def capture(argv: Sequence[str], *, timeout: float = 10.0, limit: int = 256 * 1024) -> Captured:
    """Run a program we only ask a question (nvidia-smi, the version probe), reading at most
    `limit` bytes of each stream for at most `timeout` seconds (omni_deploy/common/children.py): its
    whole process group, and what it forked, is ended however it ends."""
    from omni_deploy.common import children

    ran = children.run(list(argv), timeout=timeout, max_bytes=limit, max_lines=limit, tail=limit)
    return Captured(
        ran.returncode,
        ran.stdout.decode("utf-8", "replace"),
        ran.stderr_tail.decode("utf-8", "replace"),
        ran.why_stopped,
    )


def first_line(path: Path | str, limit: int = 4096) -> bytes | None:
    """The first line of a regular file (a #! line), None when it is not one we may open."""
    if not is_readable_file(path):
        return None
    try:
        fd = _open(Path(path), str(path), nofollow=False)
    except Refused:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return os.read(fd, limit).split(b"\n", 1)[0]
    except OSError:
        return None
    finally:
        os.close(fd)
