"""Find processes a test run left behind, also those that were detached into their own session.

Every process the test session starts inherits SESSION_MARKER in its environment (servers start
new sessions and outlive their parent when supervision fails, so the process tree alone would not
find them). At the end of the session any live process carrying the marker, other than the test
process itself, is a leftover.
"""

from __future__ import annotations

import contextlib
import os
import signal
import uuid
from pathlib import Path

SESSION_MARKER = "OMNI_DEPLOY_TEST_SESSION"


def mark_session() -> str:
    """This test process's marker. A pytest-xdist worker gets one of its own (the controller's, plus
    the worker's name): each worker checks only what its own tests started, never another worker
    (whose process carries the controller's marker) nor that worker's servers still running."""
    token = os.environ.get(SESSION_MARKER) or uuid.uuid4().hex
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker and not token.endswith(f"-{worker}"):
        token = f"{token}-{worker}"
    os.environ[SESSION_MARKER] = token
    return token


def _alive(proc: Path) -> bool:
    with contextlib.suppress(OSError):
        return "State:\tZ" not in (proc / "status").read_text()
    return False


def leftovers(token: str) -> list[tuple[int, str]]:
    """(pid, command) of live processes of this session, except this process and its parents."""
    needle = f"{SESSION_MARKER}={token}".encode()
    mine = {os.getpid(), os.getppid()}
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) in mine:
            continue
        try:
            environ = (proc / "environ").read_bytes()
        except OSError:
            continue
        if needle in environ.split(b"\0") and _alive(proc):
            with contextlib.suppress(OSError):
                command = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
                if not _own_multiprocessing_helper(proc, command):
                    found.append((int(proc.name), command.strip()[:200]))
    return found


def _own_multiprocessing_helper(proc: Path, command: str) -> bool:
    """The resource tracker (or forkserver) that a spawn start in this process started: it belongs
    to the test process itself and ends when that process does (it reads EOF on its pipe)."""
    if not any(f"multiprocessing.{name} import main" in command for name in _HELPERS):
        return False
    with contextlib.suppress(OSError, ValueError, IndexError):
        parent = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
        return parent == os.getpid()
    return False


_HELPERS = ("resource_tracker", "forkserver")


def kill_all(found: list[tuple[int, str]]) -> None:
    for pid, _ in found:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
