"""Programs we start and only read from (the server check's child, the version probe, nvidia-smi):
started, bounded and ended one way.

- Each starts in a process group (session) of its own, marked in its environment with a token
  of ours (CHILD_MARK), so that it and everything it forked, also a descendant that left the
  group with setsid, can be found and ended: on every exit path of `run`, at interpreter exit,
  and on SIGTERM, SIGHUP or SIGINT of ours (a CI time-out's `kill -TERM` of validate must not
  leave the child running in its own session).
- Its stdout is read through a pipe, bounded in bytes and in lines *before* it is kept: past
  either bound the child is ended and the reason said; stderr keeps only its last bytes.
- A wall-clock limit; past it, the same end.
- A descendant that drops both (a new session *and* an empty environment) is still found: this
  process becomes its descendants' subreaper (Linux), so such an orphan becomes our child; what
  we adopted while a child ran is ended and reaped with it, until nothing new is adopted.

Standard library only; of omni_deploy, only common/process_tree (standard library too).
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

CHILD_MARK = "OMNI_DEPLOY_CHILD_MARK"
_ours: dict[int, str] = {}  # process group (the child's pid) -> its mark, while it may be alive
_lock = threading.Lock()
_installed = False
_subreaper = False  # orphans of our children's trees are adopted by us (become_subreaper)
_ADOPTION_ROUNDS = 50  # an adopted process that had children of its own: theirs are adopted next
_FORWARDED = (signal.SIGTERM, signal.SIGHUP)
POLL_S = 0.2  # how often the read loop looks whether the child is still there
DRAIN_S = 0.5  # what is read after the child exited, before its descendants are ended


@dataclass(frozen=True)
class Ran:
    returncode: int | None  # None: ended by us (time, output bound)
    stdout: bytes  # at most max_bytes, in whole lines up to max_lines
    stderr_tail: bytes  # the last `tail` bytes of stderr
    why_stopped: str | None = None  # "timed out after 10 s", "printed more than N bytes", ...
    seconds: float = 0.0


def run(
    argv: Sequence[str],
    *,
    stdin: bytes = b"",
    env: Mapping[str, str] | None = None,
    cwd: str | Path | None = None,
    timeout: float,
    max_bytes: int,
    max_lines: int,
    tail: int = 4000,
    preexec: Callable[[], None] | None = None,
) -> Ran:
    """Run `argv` to its end or a bound (see the module docstring); OSError if it cannot start.
    Whatever happens, the child's process group and every process carrying its mark are ended."""
    _install_handlers()
    before = _children_now()
    mark = uuid.uuid4().hex
    child_env = dict(os.environ if env is None else env)
    child_env[CHILD_MARK] = mark
    started = time.monotonic()
    process = subprocess.Popen(
        list(argv),
        stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=child_env,
        cwd=cwd,
        preexec_fn=preexec,
        start_new_session=True,  # a group of its own: it and its children are ended together
    )
    with _lock:
        _ours[process.pid] = mark
    try:
        out, err, why = _read(process, stdin, started + timeout, timeout, max_bytes, max_lines, tail)
    finally:
        end(process)
        _end_adopted(before)
    code = None if why is not None else process.returncode
    return Ran(code, out, err, why, time.monotonic() - started)


@dataclass
class _Kept:
    """stdout bounded in bytes and lines as it arrives, and stderr's last `tail` bytes."""

    max_bytes: int
    max_lines: int
    tail: int
    out: bytearray = field(default_factory=bytearray)
    err: bytearray = field(default_factory=bytearray)
    lines: int = 0

    def add_err(self, chunk: bytes) -> None:
        self.err += chunk
        del self.err[: -self.tail]

    def add_out(self, chunk: bytes) -> str | None:
        """Keep `chunk`; past a bound, keep up to it and say which (the child is then ended)."""
        room = self.max_bytes - len(self.out)
        self.lines += chunk[:room].count(b"\n")
        if self.lines > self.max_lines:
            whole = bytes(self.out + chunk).split(b"\n")[: self.max_lines]
            self.out = bytearray(b"\n".join(whole) + b"\n")
            return f"printed more than {self.max_lines} lines"
        if len(chunk) > room:
            self.out += chunk[:room]
            return f"printed more than {self.max_bytes} bytes"
        self.out += chunk
        return None

    def result(self, why: str | None) -> tuple[bytes, bytes, str | None]:
        return bytes(self.out), bytes(self.err[-self.tail :]), why


def _read(
    process: subprocess.Popen[bytes],
    data: bytes,
    deadline: float,
    timeout: float,
    max_bytes: int,
    max_lines: int,
    tail: int,
) -> tuple[bytes, bytes, str | None]:
    assert process.stdout is not None and process.stderr is not None
    if process.stdin is not None:
        _feed(process.stdin, data)
    out_fd, err_fd = process.stdout.fileno(), process.stderr.fileno()
    kept = _Kept(max_bytes, max_lines, tail)
    timed_out = f"timed out after {timeout:g} s"
    open_fds = {out_fd, err_fd}
    drained_by: float | None = None  # once the child is gone: what it forked may hold the pipes
    while open_fds:
        now = time.monotonic()
        if now >= deadline:
            return kept.result(timed_out)
        if drained_by is None and process.poll() is not None:
            drained_by = now + DRAIN_S
        if drained_by is not None and now >= drained_by:
            break  # the child exited; a descendant keeps its pipes open: end() ends it
        ready, _, _ = select.select(list(open_fds), [], [], min(deadline - now, POLL_S))
        for fd in ready:
            chunk = os.read(fd, 65536)
            if not chunk:
                open_fds.discard(fd)
            elif fd == err_fd:
                kept.add_err(chunk)
            elif (why := kept.add_out(chunk)) is not None:
                return kept.result(why)
    return kept.result(_wait(process, deadline, timed_out))


def _wait(process: subprocess.Popen[bytes], deadline: float, timed_out: str) -> str | None:
    try:
        process.wait(timeout=max(0.1, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:  # it closed its streams but goes on
        return timed_out
    return None


def _feed(pipe: object, data: bytes) -> None:
    """Write the request on a thread: a child that never reads must not block us (the pipe fills)."""

    def write() -> None:
        with contextlib.suppress(OSError, ValueError):
            pipe.write(data)  # type: ignore[attr-defined]
        with contextlib.suppress(OSError, ValueError):
            pipe.close()  # type: ignore[attr-defined]

    threading.Thread(target=write, daemon=True).start()


def end(process: subprocess.Popen[bytes]) -> None:
    """End the child, its process group and every process with its mark; reap the child."""
    with _lock:
        mark = _ours.pop(process.pid, None)
    _end_group(process.pid, mark)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=5)
    for stream in (process.stdout, process.stderr):
        if stream is not None:
            with contextlib.suppress(OSError):
                stream.close()


def _end_group(pgid: int, mark: str | None) -> None:
    # SIGKILL, not SIGTERM first: these children only answer questions; nothing of theirs to save.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
    if mark is not None:
        for pid in marked(mark):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)


def _children_now() -> set[int]:
    from omni_deploy.common.process_tree import own_children

    return set(own_children()) if _subreaper else set()


def _end_adopted(before: set[int]) -> None:
    """End and reap the orphans we adopted as subreaper since `before` (not a child still ours)."""
    if not _subreaper:
        return
    from omni_deploy.common.process_tree import own_children

    for _ in range(_ADOPTION_ROUNDS):
        with _lock:
            running = set(_ours)
        adopted = [pid for pid in own_children() if pid not in before and pid not in running]
        if not adopted:
            return
        for pid in adopted:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        for pid in adopted:  # reaped: a zombie of ours would be listed again
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(pid, 0)


def marked(mark: str) -> list[int]:
    """Live processes whose environment carries CHILD_MARK=mark (descendants that left the group)."""
    needle = f"{CHILD_MARK}={mark}".encode()
    found: list[int] = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return found  # not Linux: the process group is all we can end
    for name in entries:
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as handle:
                environ = handle.read(1 << 20)
        except OSError:
            continue
        if needle in environ.split(b"\0"):
            found.append(int(name))
    return found


def end_all() -> None:
    """End every child still running (interpreter exit, a signal)."""
    with _lock:
        left = list(_ours.items())
        _ours.clear()
    for pgid, mark in left:
        _end_group(pgid, mark)


def _on_signal(signum: int, _frame: FrameType | None) -> None:
    end_all()
    # Then die of the signal as we would have: the caller's shell sees 128 + signum.
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def _install_handlers() -> None:
    global _installed, _subreaper
    if _installed:
        return
    _installed = True
    import atexit

    from omni_deploy.common.process_tree import become_subreaper

    _subreaper = become_subreaper()

    atexit.register(end_all)
    if threading.current_thread() is not threading.main_thread():
        return  # signal handlers belong to the main thread; atexit still ends what is left
    for sig in _FORWARDED:
        with contextlib.suppress(ValueError, OSError):
            if signal.getsignal(sig) in (signal.SIG_DFL, None):
                signal.signal(sig, _on_signal)
    previous_int = signal.getsignal(signal.SIGINT)

    def on_interrupt(signum: int, frame: FrameType | None) -> None:
        end_all()
        if callable(previous_int):
            previous_int(signum, frame)  # Python's KeyboardInterrupt: the CLI says "interrupted"
        else:
            raise KeyboardInterrupt

    with contextlib.suppress(ValueError, OSError):
        signal.signal(signal.SIGINT, on_interrupt)
