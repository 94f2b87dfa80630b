"""The run directory: rendered config, launch record and server log, never over a user file.

Private to the user (directories 0700, files 0600): the record and the log can hold hosts,
paths and whatever the server prints. Every file is created with O_EXCL|O_NOFOLLOW
(omni_deploy.common.atomic_write), so a symlink planted in the directory, even a dangling one, is never
written through; the record is rewritten atomically (a fresh temporary name, then a rename). Path
lengths are checked before anything is created, so a name the file system cannot hold leaves no
half-made folder behind. Two runs given the same --run-dir: the second is told so, never a crash.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from pathlib import Path
from typing import Any

from omni_deploy.common import guarded
from omni_deploy.common.atomic_write import create_new, open_new, write_atomic
from omni_deploy.common.errors import OmniDeployError, UsageProblem


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
# The longest name written inside: the record's temporary file (atomic_write's naming).
_LONGEST_INSIDE = len(".launch.json.") + 12 + len(".partial")


def check_path_length(path: Path) -> None:
    """Refuse, before creating anything, a folder whose files the file system could not name."""
    full = os.path.abspath(path)
    try:
        path_max = os.pathconf("/", "PC_PATH_MAX")
        name_max = os.pathconf("/", "PC_NAME_MAX")
    except (OSError, ValueError):
        path_max, name_max = 4096, 255
    too_long = [part for part in Path(full).parts if len(part.encode("utf-8", "surrogateescape")) > name_max]
    if too_long:
        raise RunDirError(
            f"--run-dir: a folder name of {len(too_long[0])} characters is longer than {name_max}"
        )
    if len(full.encode("utf-8", "surrogateescape")) + 1 + _LONGEST_INSIDE >= path_max:
        raise RunDirError(
            f"--run-dir: the path has {len(full)} characters; with the files inside it must stay "
            f"under {path_max - _LONGEST_INSIDE - 1}"
        )


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
        check_path_length(requested)
        if os.path.islink(requested):
            raise RunDirError(f"--run-dir {requested} is a symlink; name the directory itself")
        if requested.exists() and (not requested.is_dir() or any(requested.iterdir())):
            raise RunDirTaken(
                f"--run-dir {requested} exists and is not an empty directory; it is never overwritten"
            )
        requested.mkdir(mode=PRIVATE_DIR, parents=True, exist_ok=True)
        requested.chmod(PRIVATE_DIR)  # also when it existed empty, and whatever the umask
        return requested
    root = default_runs_root()
    check_path_length(root / "00000000-000000-000000")
    root.mkdir(mode=PRIVATE_DIR, parents=True, exist_ok=True)
    while True:
        path = root / f"{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"
        try:
            path.mkdir(mode=PRIVATE_DIR)
        except FileExistsError:
            continue
        path.chmod(PRIVATE_DIR)
        return path


def open_private(path: Path) -> int:
    """A descriptor for a new file only the user can read (0600 whatever the umask), created with
    O_EXCL|O_NOFOLLOW: an existing file or a link in its place is refused, never opened."""
    try:
        return open_new(path, PRIVATE_FILE)
    except FileExistsError:
        raise RunDirError(f"{path} already exists; a run directory's files are never reused") from None


def write_new(path: Path, text: str) -> None:
    """Create `path` (0600); an existing file or link there is refused, never written through."""
    try:
        create_new(path, text.encode("utf-8"), PRIVATE_FILE)
    except FileExistsError:
        raise RunDirError(
            f"{path} already exists: another run is using {path.parent}; give each run its own --run-dir"
        ) from None


def write_record(run_dir: Path, record: dict[str, Any]) -> Path:
    path = run_dir / "launch.json"
    write_new(path, json.dumps(record, indent=2, default=str) + "\n")
    return path


def read_record(run_dir: Path) -> dict[str, Any]:
    """Our own launch.json, read without following a link put in its place."""
    path = run_dir / "launch.json"
    try:
        record = json.loads(guarded.read_text(path, str(path), 16 * 1024 * 1024))
    except guarded.Refused as refused:
        raise RunDirError(str(refused)) from None
    except ValueError as exc:
        raise RunDirError(f"{path}: not the launch record omni-deploy wrote ({exc})") from None
    if not isinstance(record, dict):
        raise RunDirError(f"{path}: not the launch record omni-deploy wrote")
    return record


def add_to_record(run_dir: Path, fields: dict[str, Any]) -> None:
    """Add fields to our own launch.json (written by write_record in a directory we made)."""
    record = read_record(run_dir)
    record.update(fields)
    write_atomic(
        run_dir / "launch.json",
        (json.dumps(record, indent=2, default=str) + "\n").encode(),
        link="replace",
        mode=PRIVATE_FILE,
        fsync=False,
    )
