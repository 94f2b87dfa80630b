"""Run the server in its own session, wait for /health, forward signals, and never leave it behind.

- The child starts in a new session, so its whole process tree is one process group.
- SIGINT and SIGTERM sent to us are forwarded to that group; SIGHUP (the terminal closed) is
  forwarded as SIGTERM. Every forwarded stop is escalated to SIGKILL of the group after
  `stop_grace` seconds: a server that ignores signals cannot keep us waiting.
- The tree dies with us: the child has Linux's parent-death signal (SIGKILL), and a small watchdog
  process kills the whole group when we die, also of SIGKILL (workers have no parent-death signal).
- After readiness, /v1/models must list the model we started: a foreign server that answers on
  the port (ours then dies with EADDRINUSE) is never reported as ready.
- Readiness: GET /health answers 200 (any other answer or a connection error is not ready), polled
  while checking that the child is still alive.
- Before ready: if the child dies we exit at once with its code and the tail of its log; past the
  ready timeout we terminate the tree (TERM, a grace period, KILL) and exit with EXIT_READY_TIMEOUT.
- After ready: we exit with the child's code, 128 + N when it died of signal N.
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

EXIT_READY_TIMEOUT = 124
EXIT_SERVER_ERROR = 4
TAIL_LINES = 40
_PR_SET_PDEATHSIG = 1

# Runs in its own session beside the server: waits for its parent (omni-deploy) to die, then kills
# the server's process group. Started with a parent-death signal, and it checks its parent at
# start in case omni-deploy died before the signal was set.
_WATCHDOG = """
import ctypes, os, signal, sys, time
group, parent = int(sys.argv[1]), int(sys.argv[2])
def kill(*_):
    try:
        os.killpg(group, signal.SIGKILL)
    finally:
        os._exit(0)
signal.signal(signal.SIGTERM, kill)
signal.signal(signal.SIGINT, signal.SIG_IGN)
signal.signal(signal.SIGHUP, signal.SIG_IGN)
ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM, 0, 0, 0)
if os.getppid() != parent:
    kill()
while True:
    time.sleep(3600)
"""


def _die_with_parent(parent: int) -> Any:
    """A preexec_fn: the child gets SIGKILL when its parent dies (Linux; elsewhere a no-op)."""

    def setup() -> None:
        if not sys.platform.startswith("linux"):
            return
        import ctypes

        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:
            os._exit(1)  # the parent is already gone

    return setup


def exit_code(returncode: int) -> int:
    return 128 - returncode if returncode < 0 else returncode


def probe_url(url: str, timeout: float = 2.0) -> tuple[int | None, bytes]:
    """(status, body) of a GET; (None, b"") when nothing answered."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, b""
    except (urllib.error.URLError, OSError, ValueError):
        return None, b""


def local_url(host: str, port: int) -> str:
    """Where to reach a server bound to `host` from this machine."""
    if host in ("", "0.0.0.0"):
        host = "127.0.0.1"
    elif host == "::":
        host = "::1"
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{port}"


@dataclass
class Supervisor:
    argv: list[str]
    env: dict[str, str]
    log_path: Path
    base_url: str
    ready_timeout: float
    stop_grace: float = 10.0
    poll_interval: float = 0.5
    out: IO[str] = field(default_factory=lambda: sys.stdout)
    expected_model: str | None = None  # /v1/models must list it once /health answers
    secrets: list[str] = field(default_factory=list)  # scrubbed from what the server prints
    on_ready: Callable[[], None] | None = None  # called once, after readiness (serve reads the log)
    _tail: collections.deque[str] = field(default_factory=lambda: collections.deque(maxlen=TAIL_LINES))
    _wake: threading.Event = field(default_factory=threading.Event)
    _kill_at: float | None = None  # when a forwarded stop turns into SIGKILL
    child: subprocess.Popen[bytes] | None = None
    # How the run ended, beside the exit code, for the CLI's exit-code map.
    forwarded: list[str] = field(default_factory=list)
    timed_out: bool = False
    # Told after each /health poll before ready: seconds waited and what /health answered.
    on_wait: Callable[[float, str], None] | None = None
    foreign: str | None = None  # what answered instead of our server, when one did
    watchdog: subprocess.Popen[bytes] | None = None

    def say(self, message: str) -> None:
        # The terminal may be gone (SIGHUP): supervising matters more than being heard.
        with contextlib.suppress(OSError, ValueError):
            print(f"omni-deploy: {message}", file=self.out, flush=True)

    def _pump(self, stream: IO[bytes], log: IO[bytes]) -> None:
        from omni_deploy.redact import scrub

        for raw in iter(stream.readline, b""):
            line = scrub(raw.decode("utf-8", "replace").rstrip("\n"), self.secrets)
            with contextlib.suppress(OSError, ValueError):
                log.write((line + "\n").encode("utf-8", "replace"))
                log.flush()
            self._tail.append(line)
            with contextlib.suppress(OSError, ValueError):
                print(line, file=self.out, flush=True)

    def _forward(self, signum: int, _frame: Any) -> None:
        self.forwarded.append(signal.Signals(signum).name)
        if self.child is not None and self.child.poll() is None:
            sent = signal.SIGTERM if signum == signal.SIGHUP else signum
            if self._kill_at is not None:
                self.say("stopped again; killing the server's process group now")
                self._kill_at = 0.0
            else:
                self.say(
                    f"forwarding {signal.Signals(sent).name} to the server (process group "
                    f"{self.child.pid}); SIGKILL after {self.stop_grace:g} s"
                )
                self._kill_at = time.monotonic() + self.stop_grace
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(self.child.pid, sent)
        self._wake.set()

    def _escalate_if_due(self) -> None:
        if self._kill_at is not None and time.monotonic() >= self._kill_at and self.child is not None:
            if self.child.poll() is None:
                self.say(f"the server did not stop within {self.stop_grace:g} s; killing its process group")
            self._kill_group(signal.SIGKILL)
            self._kill_at = None

    def _wait_until_exit(self) -> None:
        assert self.child is not None
        while self.child.poll() is None:
            self._escalate_if_due()
            self._wake.wait(0.2)
            self._wake.clear()

    def _start_watchdog(self) -> None:
        assert self.child is not None
        if not sys.platform.startswith("linux"):
            return
        with contextlib.suppress(OSError):
            self.watchdog = subprocess.Popen(
                [sys.executable, "-c", _WATCHDOG, str(self.child.pid), str(os.getpid())],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )

    def _stop_watchdog(self) -> None:
        if self.watchdog is not None and self.watchdog.poll() is None:
            self.watchdog.kill()  # SIGKILL: its SIGTERM handler would kill the (gone) group
            self.watchdog.wait()

    def _kill_group(self, signum: int) -> None:
        assert self.child is not None
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.child.pid, signum)

    def terminate_tree(self) -> None:
        assert self.child is not None
        self._kill_group(signal.SIGTERM)
        try:
            self.child.wait(timeout=self.stop_grace)
        except subprocess.TimeoutExpired:
            self.say(f"the server did not stop within {self.stop_grace:g} s; killing it")
        self._kill_group(signal.SIGKILL)
        self.child.wait()

    def run(self) -> int:
        handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
        from omni_deploy.serve.rundir import open_private

        log_fd = open_private(self.log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        with open(log_fd, "ab") as log:
            self.child = subprocess.Popen(
                self.argv,
                env=self.env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                preexec_fn=_die_with_parent(os.getpid()),
            )
            self._start_watchdog()
            assert self.child.stdout is not None
            pump = threading.Thread(target=self._pump, args=(self.child.stdout, log), daemon=True)
            pump.start()
            for sig in handlers:
                signal.signal(sig, self._forward)
            try:
                return self._supervise(pump)
            finally:
                for sig, handler in handlers.items():
                    signal.signal(sig, handler)
                if self.child.poll() is None:
                    self.terminate_tree()
                # Workers the server left behind go with it.
                self._kill_group(signal.SIGKILL)
                self._stop_watchdog()
                pump.join(timeout=5)

    def _supervise(self, pump: threading.Thread) -> int:
        assert self.child is not None
        started = time.monotonic()
        deadline = started + self.ready_timeout
        self.say(f"started the server (pid {self.child.pid}); waiting for {self.base_url}/health")
        while True:
            self._escalate_if_due()
            if self.child.poll() is not None:
                pump.join(timeout=5)
                code = exit_code(self.child.returncode)
                self.say(f"the server exited with code {code} before it was ready; last lines of its log:")
                for line in list(self._tail):
                    with contextlib.suppress(OSError, ValueError):
                        print(f"  | {line}", file=self.out)
                return code
            if self._kill_at is None and time.monotonic() > deadline:
                self.say(f"not ready after {self.ready_timeout:g} s; stopping the server and its workers")
                self.terminate_tree()
                self.timed_out = True
                return EXIT_READY_TIMEOUT
            status, _ = probe_url(f"{self.base_url}/health")
            if status == 200 and self._kill_at is None:
                break
            if self.on_wait is not None:
                self.on_wait(time.monotonic() - started, f"/health {status}" if status else "no answer yet")
            self._wake.wait(self.poll_interval)
            self._wake.clear()
        elapsed = time.monotonic() - started
        served = served_models(self.base_url)
        if self.expected_model is not None and self.expected_model not in (served or []):
            listed = ", ".join(served) if served else "nothing"
            self.foreign = f"{self.base_url} serves {listed}, not {self.expected_model}"
            self.say(
                f"{self.base_url} answers /health but serves {listed}, not {self.expected_model}: "
                "another server holds the port; stopping ours"
            )
            self.terminate_tree()
            return EXIT_SERVER_ERROR
        shown = ", ".join(served) if served else ("none" if served is not None else "unknown")
        self.say(f"ready after {elapsed:.1f} s at {self.base_url} (serving: {shown}); log: {self.log_path}")
        if self.on_ready is not None:
            self.on_ready()
        self._wait_until_exit()
        pump.join(timeout=5)
        code = exit_code(self.child.returncode)
        self.say(f"the server exited with code {code}")
        return code


def served_models(base_url: str) -> list[str] | None:
    """The model ids /v1/models lists; None when it does not answer with a model list."""
    status, body = probe_url(f"{base_url}/v1/models")
    if status != 200:
        return None
    try:
        data = json.loads(body)
        return [str(m["id"]) for m in data["data"] if isinstance(m, dict) and "id" in m]
    except (ValueError, KeyError, TypeError):
        return None
