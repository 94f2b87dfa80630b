"""The run directory: rendered config, launch record and server log, never over a user file."""

from __future__ import annotations

import json
import os
import secrets
import time
from pathlib import Path
from typing import Any

from omni_deploy.errors import OmniDeployError


class RunDirError(OmniDeployError):
    pass


def default_runs_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "omni-deploy" / "runs"


def make_run_dir(requested: Path | None) -> Path:
    """A new, empty directory: `requested` (which must not exist or be empty) or a fresh one."""
    if requested is not None:
        if requested.exists() and (not requested.is_dir() or any(requested.iterdir())):
            raise RunDirError(
                f"--run-dir {requested} exists and is not an empty directory; it is never overwritten"
            )
        requested.mkdir(parents=True, exist_ok=True)
        return requested
    root = default_runs_root()
    root.mkdir(parents=True, exist_ok=True)
    while True:
        path = root / f"{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"
        try:
            path.mkdir()
            return path
        except FileExistsError:
            continue


def write_new(path: Path, text: str) -> None:
    """Create `path`; refuse if it exists (exclusive create)."""
    with open(path, "x", encoding="utf-8") as handle:
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
    partial.write_text(json.dumps(record, indent=2, default=str) + "\n", encoding="utf-8")
    os.replace(partial, path)
