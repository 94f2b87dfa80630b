"""The test cache (.cache/, or $OMNI_DEPLOY_TEST_CACHE) shared by concurrent test processes.

pytest-xdist runs the suite in several worker processes, and each would otherwise download, unpack
or export the same thing at once into the same place: what one worker half-wrote, another read. So
each cache entry is made under an exclusive lock of its own (flock: released by the kernel when a
process dies), and a file or folder appears under its final name only when whole (a rename).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path


@contextlib.contextmanager
def locked(cache: Path, name: str) -> Iterator[None]:
    """Hold `cache/.NAME.lock` exclusively (another process waits here until it is released)."""
    cache.mkdir(parents=True, exist_ok=True)
    fd = os.open(cache / f".{name}.lock", os.O_CREAT | os.O_RDWR | getattr(os, "O_CLOEXEC", 0), 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def made_once(path: Path, make: Callable[[Path], object]) -> Path:
    """`path` in the cache, made by `make(temporary)` once, whoever asks first; `make` writes a file
    or a folder at the temporary path, which is renamed to `path` only when `make` returned."""
    if path.exists():
        return path
    with locked(path.parent, path.name):
        if path.exists():  # made by another process while this one waited
            return path
        scratch = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
        try:
            partial = scratch / path.name
            make(partial)
            os.rename(partial, path)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    return path
