"""Write files without ever writing through someone else's link or over someone else's file.

- `create_new`: the file must not exist; created with O_EXCL|O_NOFOLLOW (a planted symlink, even
  a dangling one, makes it fail instead of writing where the link points).
- `replace_atomic`: the new content goes to a fresh, unguessable temporary name in the same
  folder (O_EXCL|O_NOFOLLOW), then is renamed over the target in one step: a reader sees the old
  file or the new one, never half; a symlink at the target is replaced, its target untouched.
- `publish_new`: like replace_atomic, but refuses when the target exists (a hard link of the
  finished temporary file, which fails atomically if the name is taken).

Standard library only, so the speaker side can use it too.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path

_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


def open_new(path: Path | str, mode: int = 0o600) -> int:
    """A descriptor of a file created now (FileExistsError if the name is taken, also by a link)."""
    fd = os.open(path, _CREATE, mode)
    try:
        os.fchmod(fd, mode)  # whatever the umask
    except OSError:
        os.close(fd)
        raise
    return fd


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def create_new(path: Path | str, data: bytes, mode: int = 0o600) -> None:
    fd = open_new(path, mode)
    try:
        _write_all(fd, data)
    finally:
        os.close(fd)


def _temporary(path: Path, data: bytes, mode: int) -> Path:
    temp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.partial")
    try:
        create_new(temp, data, mode)
    except BaseException:
        with contextlib.suppress(OSError):
            temp.unlink()
        raise
    return temp


def replace_atomic(path: Path | str, data: bytes, mode: int = 0o644) -> None:
    target = Path(path)
    temp = _temporary(target, data, mode)
    try:
        os.replace(temp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            temp.unlink()
        raise


def publish_new(path: Path | str, data: bytes, mode: int = 0o644) -> None:
    """Write `path` completely or not at all; FileExistsError if it exists (a link included)."""
    target = Path(path)
    temp = _temporary(target, data, mode)
    try:
        os.link(temp, target, follow_symlinks=False)
    finally:
        with contextlib.suppress(OSError):
            temp.unlink()
