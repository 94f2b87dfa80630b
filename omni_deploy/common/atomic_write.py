"""The one way omni-deploy writes a file: never half a file, never through a planted link.

`write_atomic(path, data, *, link=..., mode=..., fsync=..., existing=...)` writes `data` to a fresh,
unguessable temporary name in the target's folder (`.NAME.<12 hex>.partial`, created with
O_EXCL|O_NOFOLLOW, so a planted link, even a dangling one, makes it fail instead of writing where
the link points), then puts it in place in one step: a reader (or a crash) sees the old file or the
new one, never half of either. Every caller states the policy:

- `link`: what a symlink at `path` means. "replace": the link itself is replaced by the new file,
  its target untouched (files we own: caches, records, reports, exported models). "follow": the
  link is resolved and its target rewritten, so the link stays a link to the new text (a user's
  file that `--fix` or a generator edits in place).
- `mode`: the permission bits of the new file, set exactly (whatever the umask); or `KEEP`: the
  existing file's owner, group and permission bits (run as root, `--fix` must not hand a 4242:4343
  0640 file to root). With KEEP the file must exist, and when its owner cannot be kept nothing is
  written (PermissionError).
- `fsync`: flush the data and then the rename (the folder) to disk before returning; for a user's
  file, where losing the edit to a crash would lose their text. Files we can rebuild skip it.
- `existing`: "replace" (rename over whatever is there) or "refuse": the file appears complete
  or not at all, and FileExistsError if the name is taken, a link included (a hard link of the
  finished temporary file, which fails atomically if the name is taken).

`create_new` / `open_new` create a file that must not exist (O_EXCL|O_NOFOLLOW, exact mode), for
files written as they grow (a server log) or written once in a folder we just made.

Standard library only, so the speaker side and the vLLM plugin can use it too.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path
from typing import Final, Literal

_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)

KEEP: Final = "keep"
"""`mode=KEEP`: the new file keeps the existing file's owner, group and permission bits."""


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


def _keep_owner(fd: int, info: os.stat_result) -> None:
    now = os.fstat(fd)
    if (now.st_uid, now.st_gid) == (info.st_uid, info.st_gid):
        return
    try:
        os.fchown(fd, info.st_uid, info.st_gid)
    except PermissionError:
        raise PermissionError(
            f"the new file could not keep the owner {info.st_uid}:{info.st_gid} of the old"
        ) from None


def _temporary(target: Path, data: bytes, mode: int | Literal["keep"], fsync: bool) -> Path:
    """The finished temporary file beside `target`, with its final owner and mode."""
    keep = os.stat(target) if mode == KEEP else None
    temp = target.with_name(f".{target.name}.{secrets.token_hex(6)}.partial")
    fd = open_new(temp, 0o600 if keep is not None else int(mode))
    try:
        _write_all(fd, data)
        if keep is not None:
            _keep_owner(fd, keep)
            os.fchmod(fd, keep.st_mode & 0o7777)  # after the chown, which clears set-id bits
        if fsync:
            os.fsync(fd)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            temp.unlink()
        raise
    os.close(fd)
    return temp


def _fsync_folder(folder: Path) -> None:
    with contextlib.suppress(OSError):  # the rename itself on disk, where the system allows it
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def write_atomic(
    path: Path | str,
    data: bytes,
    *,
    link: Literal["replace", "follow"],
    mode: int | Literal["keep"],
    fsync: bool,
    existing: Literal["replace", "refuse"] = "replace",
) -> None:
    """Write `data` to `path` completely or not at all, under the policy the module docstring
    describes (the keywords have no defaults where a wrong guess would surprise a caller)."""
    if existing == "refuse" and (mode == KEEP or link == "follow"):
        raise ValueError(
            "existing='refuse' writes a new file: there is no old mode to keep or link to follow"
        )
    target = Path(os.path.realpath(path)) if link == "follow" else Path(path)
    temp = _temporary(target, data, mode, fsync)
    try:
        if existing == "refuse":
            os.link(temp, target, follow_symlinks=False)
        else:
            os.replace(temp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            temp.unlink()
        raise
    if existing == "refuse":
        with contextlib.suppress(OSError):
            temp.unlink()
    if fsync:
        _fsync_folder(target.parent)
