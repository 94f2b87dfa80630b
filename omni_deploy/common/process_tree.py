"""Control of a child's process tree (Linux): it dies with its parent, orphans come to us, and the
processes that carry a run's marker can be found; plus the exit status a finished child reports.

- A child given `die_with_parent` gets a signal (SIGKILL by default) when its parent dies.
- `become_subreaper`: orphaned descendants become our children (`own_children` lists them).
- A run's marker variable (RUN_MARKER=<token>) is inherited by every descendant: a daemon that
  leaves the process group with setsid() is still found by `marked_processes`.

Stdlib only: serve's Supervisor and bench's server starts both use it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from pathlib import Path
from typing import Any

EXIT_READY_TIMEOUT = 124
EXIT_SERVER_ERROR = 4
RUN_MARKER = "OMNI_DEPLOY_RUN"  # every process of the server's tree inherits it
_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36


def die_with_parent(parent: int, signum: int = signal.SIGKILL) -> Any:
    """A preexec_fn: the child gets `signum` when its parent dies (Linux; elsewhere a no-op)."""

    def setup() -> None:
        if not sys.platform.startswith("linux"):
            return
        import ctypes

        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signum, 0, 0, 0)
        if os.getppid() != parent:
            os._exit(1)  # the parent is already gone

    return setup


def become_subreaper() -> bool:
    """Make this process the reaper of its orphaned descendants (Linux); False where it cannot."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    try:
        return int(ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def exit_code(returncode: int) -> int:
    return 128 - returncode if returncode < 0 else returncode


def proc_stat(pid: int) -> tuple[str, int] | None:
    """(state, parent pid) of a process, None when it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return fields[0], int(fields[1])


def marked_processes(marker: str) -> list[int]:
    """Live processes (of our user: others' environments are unreadable) carrying the marker."""
    needle = f"{RUN_MARKER}={marker}".encode()
    found = []
    with contextlib.suppress(OSError):
        for name in os.listdir("/proc"):
            if not name.isdigit() or int(name) == os.getpid():
                continue
            try:
                environ = Path(f"/proc/{name}/environ").read_bytes()
            except OSError:
                continue
            state = proc_stat(int(name))
            if needle in environ.split(b"\0") and state is not None and state[0] not in ("Z", "X"):
                found.append(int(name))
    return found


def own_children() -> list[int]:
    """Processes whose parent is this one (after `become_subreaper`, adopted orphans too)."""
    me = os.getpid()
    children = []
    with contextlib.suppress(OSError):
        for name in os.listdir("/proc"):
            if name.isdigit():
                state = proc_stat(int(name))
                if state is not None and state[1] == me:
                    children.append(int(name))
    return children


def command_line(pid: int) -> str:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return "?"
    return raw.replace(b"\0", b" ").decode("utf-8", "replace").strip()[:120] or "?"
