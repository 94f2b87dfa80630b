"""Replace a file's contents atomically: a temporary file beside it, then a rename over it.

A reader (or a crash) sees the old file or the new one, never half of either. The new file keeps
the old one's permission bits; a symlink is followed, so the link stays a link to the new text.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


def replace_file(path: Path, data: bytes) -> None:
    real = Path(os.path.realpath(path))
    mode = os.stat(real).st_mode & 0o7777
    fd, temporary = tempfile.mkstemp(dir=real.parent, prefix=f".{real.name}.", suffix=".omni-deploy")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temporary, mode)
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
