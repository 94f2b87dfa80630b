"""The run directory: rendered config, launch record and server log, never over a user file.

Private to the user (directories 0700, files 0600): the record and the log can hold hosts,
paths and whatever the server prints.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from pathlib import Path
from typing import Any

from omni_deploy.errors import OmniDeployError, UsageProblem


class RunDirError(OmniDeployError):
    pass


class RunDirTaken(RunDirError, UsageProblem):
    """--run-dir names something that is not an empty directory (never overwritten: exit 2)."""


def default_runs_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "omni-deploy" / "runs"


PRIVATE_DIR = 0o700
REPORT_SUBDIR = "speaker"  # where the server's processes write their speaker reports
PRIVATE_FILE = 0o600


def make_run_dir(requested: Path | None) -> Path:
    """A new, empty directory: `requested` (which must not exist or be empty) or a fresh one."""
    try:
        return _make_run_dir(requested)
    except OSError as exc:
        where = requested if requested is not None else default_runs_root()
        raise RunDirError(
            f"cannot create the run directory {where}: {exc.strerror or exc}",
        ) from None


def _make_run_dir(requested: Path | None) -> Path:
    if requested is not None:
        if requested.exists() and (not requested.is_dir() or any(requested.iterdir())):
            raise RunDirTaken(
                f"--run-dir {requested} exists and is not an empty directory; it is never overwritten"
            )
        requested.mkdir(mode=PRIVATE_DIR, parents=True, exist_ok=True)
        requested.chmod(PRIVATE_DIR)  # also when it existed empty, and whatever the umask
        return requested
    root = default_runs_root()
    root.mkdir(mode=PRIVATE_DIR, parents=True, exist_ok=True)
    while True:
        path = root / f"{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"
        try:
            path.mkdir(mode=PRIVATE_DIR)
        except FileExistsError:
            continue
        path.chmod(PRIVATE_DIR)
        return path


def open_private(path: Path, flags: int) -> int:
    """A descriptor for a file only the user can read (0600 whatever the umask)."""
    fd = os.open(path, flags | getattr(os, "O_CLOEXEC", 0), PRIVATE_FILE)
    os.fchmod(fd, PRIVATE_FILE)
    return fd


def write_new(path: Path, text: str) -> None:
    """Create `path` (0600); refuse if it exists (exclusive create)."""
    fd = open_private(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    with open(fd, "w", encoding="utf-8") as handle:
        handle.write(text)


def write_record(run_dir: Path, record: dict[str, Any]) -> Path:
    path = run_dir / "launch.json"
    write_new(path, json.dumps(record, indent=2, default=str) + "\n")
    return path


def add_to_record(run_dir: Path, fields: dict[str, Any]) -> None:
    """Add fields to our own launch.json (written by write_record in a directory we made)."""
    path = run_dir / "launch.json"
    record = json.loads(path.read_text(encoding="utf-8"))
    record.update(fields)
    partial = path.with_name(path.name + ".partial")
    fd = open_private(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    with open(fd, "w", encoding="utf-8") as handle:
        handle.write(json.dumps(record, indent=2, default=str) + "\n")
    os.replace(partial, path)
