"""What `omni-deploy serve` is asked for, its options parsed; the defaults of its options.

Import-light (the command module reads its option defaults from here).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from omni_deploy.common import defaults
from omni_deploy.launch.options import LaunchOptions


@dataclass
class ServeRequest:
    """What the serve command was asked for, options parsed (platform chosen, target version known)."""

    file: str
    platform: str
    target_version: str
    launch: LaunchOptions
    run_dir: Path | None = None
    dry_run: bool = False
    skip_preflight: bool = False
    no_wait: bool = False
    ready_timeout: float = defaults.READY_TIMEOUT_S
    stop_grace: float = defaults.STOP_GRACE_S
    fmt: str = "text"
    ignore: frozenset[str] = frozenset()  # the project's settings, as validate applies them
    strict: bool = False
    target_from: str = ""  # where target_version came from (an option, a variable, a file, a default)
