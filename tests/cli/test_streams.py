"""The process's own streams and folder: a closed stdout, a broken pipe, a deleted working directory.

Real processes (the streams are file descriptors the interpreter sets up at start)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BENCH = str(ROOT / "deploy" / "turn-bench.yaml")


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def test_a_closed_stdout_is_said_and_not_clean() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "omni_deploy", "validate", BENCH],
        env=_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        preexec_fn=lambda: os.close(1),
        timeout=120,
    )
    assert done.returncode == 2 and b"stdout is closed" in done.stderr and b"Traceback" not in done.stderr


def test_a_reader_that_went_away_ends_quietly_with_the_sigpipe_code() -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "omni_deploy", "rule", "--all"],
            env=_env(),
            stdout=write_end,
            stderr=subprocess.PIPE,
            timeout=120,
        )
    finally:
        os.close(write_end)
    assert done.returncode == 141 and done.stderr == b""


def test_a_deleted_working_directory_is_a_message(tmp_path: Path) -> None:
    gone = tmp_path / "gone"
    gone.mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "omni_deploy", "explain"],
        env=_env(),
        cwd=gone,
        capture_output=True,
        preexec_fn=lambda: os.rmdir(os.getcwd()),
        timeout=120,
    )
    assert done.returncode == 1 and b"working directory is gone" in done.stderr
