"""Run the server in its own session, wait for /health, forward signals, and never leave it behind.

- The child starts in a new session, so its whole process tree is one process group.
- SIGINT and SIGTERM sent to us are forwarded to that group; we then wait for the child's exit.
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
TAIL_LINES = 40


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
    _tail: collections.deque[str] = field(default_factory=lambda: collections.deque(maxlen=TAIL_LINES))
    _wake: threading.Event = field(default_factory=threading.Event)
    child: subprocess.Popen[bytes] | None = None
    # How the run ended, beside the exit code, for the CLI's exit-code map.
    forwarded: list[str] = field(default_factory=list)
    timed_out: bool = False
    # Told after each /health poll before ready: seconds waited and what /health answered.
    on_wait: Callable[[float, str], None] | None = None

    def say(self, message: str) -> None:
        print(f"omni-deploy: {message}", file=self.out, flush=True)

    def _pump(self, stream: IO[bytes], log: IO[bytes]) -> None:
        for raw in iter(stream.readline, b""):
            log.write(raw)
            log.flush()
            line = raw.decode("utf-8", "replace").rstrip("\n")
            self._tail.append(line)
            print(line, file=self.out, flush=True)

    def _forward(self, signum: int, _frame: Any) -> None:
        self.forwarded.append(signal.Signals(signum).name)
        if self.child is not None and self.child.poll() is None:
            self.say(
                f"forwarding {signal.Signals(signum).name} to the server (process group {self.child.pid})"
            )
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.child.pid, signum)
        self._wake.set()

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
        handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
        with open(self.log_path, "ab") as log:
            self.child = subprocess.Popen(
                self.argv,
                env=self.env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
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
                pump.join(timeout=5)

    def _supervise(self, pump: threading.Thread) -> int:
        assert self.child is not None
        started = time.monotonic()
        deadline = started + self.ready_timeout
        self.say(f"started the server (pid {self.child.pid}); waiting for {self.base_url}/health")
        while True:
            if self.child.poll() is not None:
                pump.join(timeout=5)
                code = exit_code(self.child.returncode)
                self.say(f"the server exited with code {code} before it was ready; last lines of its log:")
                for line in list(self._tail):
                    print(f"  | {line}", file=self.out)
                return code
            if time.monotonic() > deadline:
                self.say(f"not ready after {self.ready_timeout:g} s; stopping the server and its workers")
                self.terminate_tree()
                self.timed_out = True
                return EXIT_READY_TIMEOUT
            status, _ = probe_url(f"{self.base_url}/health")
            if status == 200:
                break
            if self.on_wait is not None:
                self.on_wait(time.monotonic() - started, f"/health {status}" if status else "no answer yet")
            self._wake.wait(self.poll_interval)
            self._wake.clear()
        elapsed = time.monotonic() - started
        status, body = probe_url(f"{self.base_url}/v1/models")
        served = "unknown"
        if status == 200:
            with contextlib.suppress(ValueError, AttributeError):
                served = ", ".join(m.get("id", "?") for m in json.loads(body).get("data", [])) or "none"
        self.say(f"ready after {elapsed:.1f} s at {self.base_url} (serving: {served}); log: {self.log_path}")
        while self.child.poll() is None:
            self._wake.wait(0.5)
            self._wake.clear()
        pump.join(timeout=5)
        code = exit_code(self.child.returncode)
        self.say(f"the server exited with code {code}")
        return code
