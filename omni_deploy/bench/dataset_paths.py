"""The one way a file of a dataset folder (a Seed-TTS checkout, a laid-out inputs folder) is named,
read, copied or hashed.

A dataset is somebody else's tree (git carries symlinks), so a path it names is checked twice: its
spelling (relative, no `..`, no backslash, no NUL) and where it leads once every link is followed,
which must stay inside the folder (a WAV linked to ~/.aws/credentials would otherwise be copied,
vouched for by a manifest and sent to a server). What is read must be a regular file (no FIFO that
blocks, no device) of bounded size, opened non-blocking and checked on the open descriptor. Copies
keep the source's permission bits (a 0600 file stays private), and the bytes hashed for one check
are bounded as a whole. Every failure, OSError included (ENAMETOOLONG, ELOOP), is an InputsError.
"""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from omni_deploy.common import guarded
from omni_deploy.common.errors import OmniDeployError

MAX_FILE_BYTES = 64 * 1024 * 1024  # one reference WAV: seed-tts-eval's are a few hundred KiB
MAX_HASHED_BYTES = 2 * 1024 * 1024 * 1024  # all bytes one manifest check may hash
_BLOCK = 1 << 20


class InputsError(OmniDeployError):
    """The Seed-TTS inputs cannot be laid out, or a folder is not what a sweep can run on (exit 1)."""


def spelt_inside(name: str, where: str) -> PurePosixPath:
    """`name` as a relative path that cannot leave its folder by its spelling."""
    rel = PurePosixPath(name)
    if not name or "\x00" in name or "\\" in name or rel.is_absolute() or ".." in rel.parts:
        raise InputsError(f"{where}: {name!r} is not a path inside the folder")
    return rel


def inside(root: Path, name: str, where: str) -> Path:
    """root/name, refused unless it lies inside `root` also once every symlink is followed."""
    path = root / spelt_inside(name, where)
    try:
        base, real = os.path.realpath(root), os.path.realpath(path)
    except (OSError, ValueError) as exc:
        raise InputsError(f"{where}: {name!r}: {_why(exc)}") from None
    if real != base and not real.startswith(base.rstrip("/") + "/"):
        raise InputsError(
            f"{where}: {name!r} leads outside {root} through a symbolic link; only files inside "
            "the folder are read"
        )
    return path


def _why(exc: BaseException) -> str:
    return (exc.strerror if isinstance(exc, OSError) else None) or str(exc)


def problem(path: Path) -> str | None:
    """Why `path` is not a regular file to read ("missing", "a FIFO (named pipe)", "File name too
    long"), or None; checked without opening it, so a FIFO never blocks."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return "missing"
    except (OSError, ValueError) as exc:
        return _why(exc)
    return None if stat.S_ISREG(mode) else guarded.kind_of(mode)


@dataclass
class _Opened:
    fd: int
    size: int
    mode: int


def _open(path: Path, shown: str, limit: int) -> _Opened:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except (OSError, ValueError) as exc:
        raise InputsError(f"cannot read {shown}: {_why(exc)}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise InputsError(
                f"cannot read {shown}: it is {guarded.kind_of(info.st_mode)}; only regular files are read"
            )
        if info.st_size > limit:
            raise InputsError(f"cannot read {shown}: it has {info.st_size} bytes; the limit is {limit}")
    except BaseException:
        os.close(fd)
        raise
    return _Opened(fd, info.st_size, stat.S_IMODE(info.st_mode))


def copy(source: Path, target: Path, shown: str, limit: int = MAX_FILE_BYTES) -> None:
    """Copy a regular file of at most `limit` bytes; the copy's mode is the source's (never wider)."""
    opened = _open(source, shown, limit)
    try:
        out = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o600)
        try:
            os.fchmod(out, opened.mode & 0o666)
            copied = 0
            while chunk := os.read(opened.fd, _BLOCK):
                copied += len(chunk)
                if copied > limit:  # it grew since the check
                    raise InputsError(
                        f"cannot read {shown}: it has more than {limit} bytes; the limit is {limit}"
                    )
                os.write(out, chunk)
        finally:
            os.close(out)
    except OSError as exc:
        raise InputsError(f"cannot copy {shown}: {_why(exc)}") from None
    finally:
        os.close(opened.fd)


class HashBudget:
    """The bytes one check may still hash, shared by every file it hashes."""

    def __init__(self, total: int = MAX_HASHED_BYTES) -> None:
        self.left = total

    def take(self, size: int, shown: str) -> None:
        if size > self.left:
            raise InputsError(
                f"cannot hash {shown}: the files to check exceed {MAX_HASHED_BYTES} bytes in all (the limit)"
            )
        self.left -= size


def sha256(path: Path, shown: str, budget: HashBudget | None = None, limit: int = MAX_FILE_BYTES) -> str:
    """The SHA-256 of a regular file of at most `limit` bytes, within the shared `budget`."""
    opened = _open(path, shown, limit)
    digest = hashlib.sha256()
    try:
        if budget is not None:
            budget.take(opened.size, shown)
        read = 0
        while chunk := os.read(opened.fd, _BLOCK):
            read += len(chunk)
            if read > limit:
                raise InputsError(
                    f"cannot read {shown}: it has more than {limit} bytes; the limit is {limit}"
                )
            digest.update(chunk)
    except OSError as exc:
        raise InputsError(f"cannot read {shown}: {_why(exc)}") from None
    finally:
        os.close(opened.fd)
    return digest.hexdigest()
