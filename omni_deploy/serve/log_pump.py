"""The server's output, pumped to its log and the terminal.

It reads in chunks: a line longer than MAX_LINE is cut (memory per line is bounded), and after
MAX_LOG bytes the rest is drained and dropped (the log and the terminal are bounded), so a server
can never block on a full pipe nor make us grow. Secrets are scrubbed from every line.
"""

from __future__ import annotations

import collections
import contextlib
import os
from dataclasses import dataclass
from typing import IO

MAX_LINE = 16 * 1024  # bytes of one line of server output that are kept
MAX_LOG = 1024 * 1024 * 1024  # bytes of server output written to the log and the terminal


@dataclass
class LogPump:
    """The server's output: bounded lines, a bounded total, secrets scrubbed."""

    log: IO[bytes]
    out: IO[str]
    secrets: list[str]
    tail: collections.deque[str]
    written: int = 0
    dropped: int = 0

    def emit(self, raw: bytes, cut: bool = False) -> None:
        from omni_deploy.common.redact import scrub, without_partial_secret

        text = raw.decode("utf-8", "replace").rstrip("\r")
        if cut:  # a secret the cut fell inside must not leave its first half behind
            text = without_partial_secret(text, self.secrets)
        line = scrub(text, self.secrets)
        if cut:
            line += f" [... line longer than {MAX_LINE} bytes: the rest is not kept]"
        self.tail.append(line[:2000])
        data = (line + "\n").encode("utf-8", "replace")
        if self.written + len(data) > MAX_LOG:
            if not self.dropped:
                note = f"omni-deploy: the server printed more than {MAX_LOG} bytes; the rest is dropped"
                with contextlib.suppress(OSError, ValueError):
                    self.log.write((note + "\n").encode())
                    self.log.flush()
                    print(note, file=self.out, flush=True)
            self.dropped += len(data)
            return
        self.written += len(data)
        with contextlib.suppress(OSError, ValueError):
            self.log.write(data)
            self.log.flush()
        with contextlib.suppress(OSError, ValueError):
            print(line, file=self.out, flush=True)

    def run(self, fd: int) -> None:
        """Read until the server closes its output, in chunks, whatever it prints (or never ends)."""
        buffer = bytearray()
        skipping = False  # inside a line that was cut: drop bytes up to its newline
        while True:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                chunk = b""
            if not chunk:
                break
            buffer += chunk
            while (end := buffer.find(b"\n")) >= 0:
                if not skipping:
                    self.emit(bytes(buffer[:end]))
                skipping = False
                del buffer[: end + 1]
            if skipping:
                buffer.clear()
            elif len(buffer) > MAX_LINE:
                self.emit(bytes(buffer[:MAX_LINE]), cut=True)
                skipping = True
                buffer.clear()
        if buffer and not skipping:
            self.emit(bytes(buffer))
