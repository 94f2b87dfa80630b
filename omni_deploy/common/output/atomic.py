"""Replace a file's contents atomically: a temporary file beside it, then a rename over it.

A reader (or a crash) sees the old file or the new one, never half of either. The new file keeps
the old one's owner, group and permission bits (run as root, `--fix` must not hand a 4242:4343
0640 file to root); when the owner cannot be kept, nothing is written (OSError). A symlink is
followed, so the link stays a link to the new text.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


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


def replace_file(path: Path, data: bytes) -> None:
    real = Path(os.path.realpath(path))
    info = os.stat(real)
    mode = info.st_mode & 0o7777
    fd, temporary = tempfile.mkstemp(dir=real.parent, prefix=f".{real.name}.", suffix=".omni-deploy")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            _keep_owner(handle.fileno(), info)
            os.fchmod(handle.fileno(), mode)  # after the chown, which clears set-id bits
            os.fsync(handle.fileno())
        os.replace(temporary, real)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    with contextlib.suppress(OSError):  # the rename itself on disk, where the system allows it
        folder = os.open(real.parent, os.O_RDONLY)
        try:
            os.fsync(folder)
        finally:
            os.close(folder)
