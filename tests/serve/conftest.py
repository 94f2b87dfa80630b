"""Fixtures for running `omni-deploy serve` as a real process against stand-in executables."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
STANDIN_BIN = ROOT / "tests" / "support" / "standin_bin"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def fake_dist_info(root: Path, versions: dict[str, str]) -> Path:
    """A directory whose *.dist-info make importlib.metadata report these versions."""
    for name, version in versions.items():
        info = root / f"{name.replace('-', '_')}-{version}.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    return root


@dataclass
class Served:
    proc: subprocess.Popen[str]
    record_path: Path
    lines: list[str] = field(default_factory=list)

    def _reader(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def start_reader(self) -> None:
        threading.Thread(target=self._reader, daemon=True).start()

    def wait_for(self, text: str, timeout: float = 20) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(text in line for line in self.lines):
                return
            if self.proc.poll() is not None and not any(text in line for line in self.lines):
                time.sleep(0.2)
                if any(text in line for line in self.lines):
                    return
                raise AssertionError(
                    f"exited {self.proc.returncode} before {text!r}:\n" + "\n".join(self.lines)
                )
            time.sleep(0.05)
        raise AssertionError(f"no {text!r} within {timeout} s:\n" + "\n".join(self.lines))

    def record(self) -> dict:  # type: ignore[type-arg]
        return json.loads(self.record_path.read_text())

    def output(self) -> str:
        return "\n".join(self.lines)


def gone(pid: int, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        status = Path(f"/proc/{pid}/status")
        if status.exists() and "State:\tZ" in status.read_text():
            return True  # a zombie holds no resources; its parent reaps it
        time.sleep(0.05)
    return False


def group_gone(pgid: int, timeout: float = 5.0) -> bool:
    """No live process is left in the group. Killed workers are orphans that linger as zombies
    (still group members) until init reaps them, which can take a while on a loaded machine."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        if not _live_members(pgid):
            return True
        time.sleep(0.05)
    return False


def _live_members(pgid: int) -> list[int]:
    live = []
    for status in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = status.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # exited while we looked
        state, group = fields[0], int(fields[2])
        if group == pgid and state not in ("Z", "X"):
            live.append(int(status.parent.name))
    return live


@pytest.fixture
def serve_env(tmp_path: Path) -> dict[str, str]:
    versions = fake_dist_info(tmp_path / "site", {"vllm": "0.30.0", "vllm-omni": "0.30.0"})
    env = dict(os.environ)
    # The stand-in `vllm` runs with `#!/usr/bin/env python3`: this environment's interpreter, as a
    # real `vllm` installed beside omni-deploy would (explain/serve check it is not another one).
    env["PATH"] = os.pathsep.join((str(STANDIN_BIN), str(Path(sys.executable).parent), env.get("PATH", "")))
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(versions)])
    env["XDG_CACHE_HOME"] = str(tmp_path / "cache")
    env["STANDIN_VLLM_RECORD"] = str(tmp_path / "standin.json")
    env.pop("MINICPMO_TOKEN2WAV_TRT", None)
    return env


@pytest.fixture
def start_serve(serve_env: dict[str, str], tmp_path: Path) -> Iterator:  # type: ignore[type-arg]
    started: list[Served] = []

    def start(*args: str, env: dict[str, str] | None = None) -> Served:
        proc = subprocess.Popen(
            [sys.executable, "-m", "omni_deploy", "serve", *args],
            env={**serve_env, **(env or {})},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            cwd=ROOT,
        )
        served = Served(proc, tmp_path / "standin.json")
        served.start_reader()
        started.append(served)
        return served

    yield start
    for served in started:  # never leave a process behind, even when a test fails
        if served.proc.poll() is None:
            served.proc.kill()
            served.proc.wait()
        if served.record_path.exists():
            record = served.record()
            for pid in (record.get("pid"), record.get("grandchild")):
                if pid:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, 9)
