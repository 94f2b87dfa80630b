"""Run the server in its own session, wait until it is ready, forward signals, and never leave it behind.

- The child starts in a new session, so its process tree is one process group, and carries a
  marker variable (RUN_MARKER=<token>) that every descendant inherits: a daemon that leaves the
  group with setsid() is still ours.
- SIGINT and SIGTERM sent to us are forwarded to that group; SIGHUP (the terminal closed) is
  forwarded as SIGTERM. Every forwarded stop is escalated to SIGKILL of the group after
  `stop_grace` seconds: a server that ignores signals cannot keep us waiting.
- The tree dies with us: the child has Linux's parent-death signal (SIGKILL), and a small watchdog
  process kills the group and every marked process when we die, also of SIGKILL. With
  `adopt_orphans` (the serve command) we are a child subreaper: orphaned descendants become our
  children, and any left at the end are stopped too (the process-tree calls are
  `common/process_tree.py`'s).
- Readiness: our own child alive, GET /health answering 200 and, when a model is expected,
  GET /v1/models listing it, polled until the deadline (a server may answer /health before its
  model list; another server on the port never lists ours). Once /health answers, /v1/models has
  `models_grace` seconds to list the model (vLLM serves both from one app, so the gap is short):
  past it, what /v1/models listed is said and we exit EXIT_SERVER_ERROR, however far off the
  ready deadline is (a server of another model, or one whose list never comes, is no wait). The
  probes are `common/probes.py`'s (a loopback address is never asked through a proxy).
- Before ready: a child that exits, with any code, 0 included, is an error (its code, the tail
  of its log); past the deadline the tree is stopped (TERM, a grace period, KILL): a foreign
  server seen on the port is named (EXIT_SERVER_ERROR), else EXIT_READY_TIMEOUT.
- After ready: we exit with the child's code, 128 + N when it died of signal N.
- The server's output goes through `log_pump.LogPump` (bounded lines, a bounded total, secrets
  scrubbed), so a server can never block on a full pipe nor make us grow.
- At the end every process we started is accounted for: the group, marked processes in other
  sessions, adopted orphans, the watchdog; what had to be killed is said.
"""

from __future__ import annotations

import collections
import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from omni_deploy.common.probes import probe_url, served_models
from omni_deploy.common.process_tree import (
    EXIT_READY_TIMEOUT,
    EXIT_SERVER_ERROR,
    RUN_MARKER,
    become_subreaper,
    command_line,
    die_with_parent,
    exit_code,
    marked_processes,
    own_children,
    proc_stat,
)
from omni_deploy.serve.log_pump import LogPump

TAIL_LINES = 40
REAP_EVERY = 5.0  # seconds between collections of adopted orphans that exited

# Runs in its own session beside the server: waits for its parent (omni-deploy) to die, then kills
# the server's process group and every process carrying the run's marker (daemons in sessions of
# their own). Started with a parent-death signal, and it checks its parent at start in case
# omni-deploy died before the signal was set.
_WATCHDOG = """
import ctypes, os, signal, sys, time
group, parent, marker = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3].encode()
def marked():
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) != os.getpid():
            try:
                with open(f"/proc/{name}/environ", "rb") as handle:
                    if marker in handle.read().split(b"\\0"):
                        found.append(int(name))
            except OSError:
                pass
    return found
def kill(*_):
    try:
        os.killpg(group, signal.SIGKILL)
    except OSError:
        pass
    for _ in range(3):
        for pid in marked():
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.1)
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
    expected_model: str | None = None  # /v1/models must list it before the server counts as ready
    secrets: list[str] = field(default_factory=list)  # scrubbed from what the server prints
    on_ready: Callable[[], None] | None = None  # called once, after readiness (serve reads the log)
    adopt_orphans: bool = False  # become a child subreaper and stop leftover children at the end
    _tail: collections.deque[str] = field(default_factory=lambda: collections.deque(maxlen=TAIL_LINES))
    _wake: threading.Event = field(default_factory=threading.Event)
    _kill_at: float | None = None  # when a forwarded stop turns into SIGKILL
    child: subprocess.Popen[bytes] | None = None
    # How the run ended, beside the exit code, for the CLI's exit-code map.
    forwarded: list[str] = field(default_factory=list)
    timed_out: bool = False
    exited_before_ready: bool = False
    # Told after each poll before ready: seconds waited and what the server answered.
    on_wait: Callable[[float, str], None] | None = None
    foreign: str | None = None  # what answered instead of our server, when one did
    models_grace: float = 15.0  # seconds /v1/models has to list the model once /health answers
    _health_since: float | None = None  # when /health first answered 200 without our model listed
    _last_answer: str = "no answer yet"
    watchdog: subprocess.Popen[bytes] | None = None
    marker: str = field(default_factory=lambda: uuid.uuid4().hex)
    leftovers: list[str] = field(default_factory=list)  # processes stopped at the end: "pid (command)"
    _next_reap: float = 0.0

    def say(self, message: str) -> None:
        from omni_deploy.common.output.escape import for_terminal  # it quotes what the server answered

        # The terminal may be gone (SIGHUP): supervising matters more than being heard.
        with contextlib.suppress(OSError, ValueError):
            print(f"omni-deploy: {for_terminal(message)}", file=self.out, flush=True)

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
            self._reap_adopted()
            self._wake.wait(0.2)
            self._wake.clear()

    def _start_watchdog(self) -> None:
        assert self.child is not None
        if not sys.platform.startswith("linux"):
            return
        with contextlib.suppress(OSError):
            self.watchdog = subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    _WATCHDOG,
                    str(self.child.pid),
                    str(os.getpid()),
                    f"{RUN_MARKER}={self.marker}",
                ],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
                env={k: v for k, v in os.environ.items() if k != RUN_MARKER},
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

    def _others(self) -> list[int]:
        """Processes of the run still alive outside the group: marked ones, and adopted children."""
        assert self.child is not None
        skip = {self.child.pid, os.getpid()}
        if self.watchdog is not None:
            skip.add(self.watchdog.pid)
        found = set(marked_processes(self.marker))
        if self.adopt_orphans:
            found.update(own_children())
        return sorted(
            pid
            for pid in found - skip
            if (state := proc_stat(pid)) is not None and state[0] not in ("Z", "X")
        )

    def _reap_adopted(self, now: bool = False) -> None:
        """Adopted orphans that exited: collect them (a subreaper that never waits fills up with
        zombies); every few seconds only, since it reads /proc."""
        if not self.adopt_orphans or self.child is None:
            return
        if not now and time.monotonic() < self._next_reap:
            return
        self._next_reap = time.monotonic() + REAP_EVERY
        for pid in own_children():
            state = proc_stat(pid)
            if (
                pid != self.child.pid
                and (self.watchdog is None or pid != self.watchdog.pid)
                and state
                and state[0] == "Z"
            ):
                with contextlib.suppress(ChildProcessError, OSError):
                    os.waitpid(pid, os.WNOHANG)

    def _account_for_everything(self) -> None:
        """Stop what the server left in other sessions: TERM, the grace period, then KILL."""
        left = self._others()
        if not left:
            return
        self.leftovers = [f"{pid} ({command_line(pid)})" for pid in left]
        self.say(
            f"stopping {len(left)} process(es) the server left outside its group: {', '.join(self.leftovers)}"
        )
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for pid in left:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, sig)
            deadline = time.monotonic() + (min(self.stop_grace, 5.0) if sig == signal.SIGTERM else 5.0)
            while time.monotonic() < deadline:
                self._reap_adopted(now=True)
                left = [p for p in left if (s := proc_stat(p)) is not None and s[0] not in ("Z", "X")]
                if not left:
                    break
                time.sleep(0.05)
        self._reap_adopted(now=True)

    def run(self) -> int:
        handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
        from omni_deploy.serve.rundir import open_private

        if self.adopt_orphans:
            become_subreaper()
        log_fd = open_private(self.log_path)
        with open(log_fd, "ab") as log:
            self.child = subprocess.Popen(
                self.argv,
                env={**self.env, RUN_MARKER: self.marker},
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                preexec_fn=die_with_parent(os.getpid()),
            )
            self._start_watchdog()
            assert self.child.stdout is not None
            pump = LogPump(log, self.out, self.secrets, self._tail)
            reader = threading.Thread(target=pump.run, args=(self.child.stdout.fileno(),), daemon=True)
            reader.start()
            for sig in handlers:
                signal.signal(sig, self._forward)
            try:
                return self._supervise(reader)
            finally:
                for sig, handler in handlers.items():
                    signal.signal(sig, handler)
                if self.child.poll() is None:
                    self.terminate_tree()
                # Workers the server left behind go with it, in its group or elsewhere.
                self._kill_group(signal.SIGKILL)
                self._account_for_everything()
                self._stop_watchdog()
                reader.join(timeout=5)

    def _answer(self) -> tuple[bool, str]:
        """(ready, what the server answered) for one poll."""
        status, _ = probe_url(f"{self.base_url}/health")
        if status != 200:
            return False, f"/health {status}" if status else "no answer yet"
        if self.expected_model is None:
            return True, "/health 200"
        served = served_models(self.base_url)
        if served is not None and self.expected_model in served:
            return True, "/health 200"
        listed = ", ".join(served) if served else ("nothing" if served is not None else "no model list")
        if served:  # someone serves other models here: remembered, said at the deadline
            self.foreign = f"{self.base_url} serves {listed}, not {self.expected_model}"
        if self._health_since is None:
            self._health_since = time.monotonic()
        return False, f"/health 200, /v1/models lists {listed}"

    def _models_overdue(self) -> str | None:
        """What was seen, when /health has answered for `models_grace` s without our model listed."""
        if self._health_since is None or time.monotonic() - self._health_since < self.models_grace:
            return None
        seen = self.foreign or f"{self.base_url} answers /health but its /v1/models lists {self._last_answer}"
        return f"{seen} after {self.models_grace:g} s (want {self.expected_model})"

    def _supervise(self, reader: threading.Thread) -> int:
        assert self.child is not None
        started = time.monotonic()
        deadline = started + self.ready_timeout
        waiting_for = f"{self.base_url}/health" + (
            f" and {self.expected_model} in /v1/models" if self.expected_model else ""
        )
        self.say(f"started the server (pid {self.child.pid}); waiting for {waiting_for}")
        while True:
            self._escalate_if_due()
            self._reap_adopted()
            if self.child.poll() is not None:
                reader.join(timeout=5)
                code = exit_code(self.child.returncode)
                self.exited_before_ready = not self.forwarded
                self.say(f"the server exited with code {code} before it was ready; last lines of its log:")
                for line in list(self._tail):
                    with contextlib.suppress(OSError, ValueError):
                        print(f"  | {line}", file=self.out)
                return code
            if self._kill_at is None and time.monotonic() > deadline:
                if self.foreign is not None:
                    self.say(f"{self.foreign}: another server holds the port; stopping ours")
                    self.terminate_tree()
                    return EXIT_SERVER_ERROR
                self.say(
                    f"not ready after {self.ready_timeout:g} s (last seen: {self._last_answer}); "
                    "stopping the server and its workers"
                )
                self.terminate_tree()
                self.timed_out = True
                return EXIT_READY_TIMEOUT
            ready, answer = self._answer()
            self._last_answer = answer.rsplit("/v1/models lists ", 1)[-1]
            if ready and self._kill_at is None and self.child.poll() is None:
                break
            overdue = self._models_overdue() if self._kill_at is None else None
            if overdue is not None:
                self.say(f"{overdue}; stopping the server and its workers")
                self.terminate_tree()
                return EXIT_SERVER_ERROR
            if self.on_wait is not None:
                from omni_deploy.common.output.escape import for_terminal  # model ids come from the server

                self.on_wait(time.monotonic() - started, for_terminal(answer))
            self._wake.wait(self.poll_interval)
            self._wake.clear()
        elapsed = time.monotonic() - started
        served = served_models(self.base_url)
        shown = ", ".join(served) if served else ("none" if served is not None else "unknown")
        self.say(f"ready after {elapsed:.1f} s at {self.base_url} (serving: {shown}); log: {self.log_path}")
        if self.on_ready is not None:
            self.on_ready()
        self._wait_until_exit()
        reader.join(timeout=5)
        code = exit_code(self.child.returncode)
        self.say(f"the server exited with code {code}")
        return code
