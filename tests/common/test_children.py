"""Children we only read from (omni_deploy/common/children.py): bounded output, nothing left behind."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

from omni_deploy.common import children


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().rsplit(")", 1)[1].split()[0] == "Z")


def test_a_daemon_the_child_started_in_a_new_session_is_ended(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    script = (
        "import os, subprocess, sys\n"
        "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'], start_new_session=True)\n"
        f"open({str(pid_file)!r}, 'w').write(str(p.pid))\n"
        "print('done')\n"
    )
    ran = children.run([sys.executable, "-c", script], timeout=30, max_bytes=1000, max_lines=10)
    assert ran.returncode == 0 and ran.stdout == b"done\n"
    daemon = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while _alive(daemon) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(daemon)


def test_output_is_bounded_in_lines_and_bytes() -> None:
    flood = "import sys\nwhile True: sys.stdout.write('x\\n')\n"
    ran = children.run([sys.executable, "-c", flood], timeout=30, max_bytes=10**6, max_lines=100)
    assert ran.returncode is None and ran.why_stopped == "printed more than 100 lines"
    assert ran.stdout.count(b"\n") == 100
    wide = "import sys\nwhile True: sys.stdout.write('x' * 4096)\n"
    ran = children.run([sys.executable, "-c", wide], timeout=30, max_bytes=10_000, max_lines=100)
    assert ran.why_stopped == "printed more than 10000 bytes" and len(ran.stdout) == 10_000


def test_a_child_that_ignores_term_is_ended_at_its_time_limit() -> None:
    script = "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\ntime.sleep(60)\n"
    started = time.monotonic()
    ran = children.run([sys.executable, "-c", script], timeout=1, max_bytes=100, max_lines=10)
    assert ran.why_stopped == "timed out after 1 s" and time.monotonic() - started < 15


def test_end_all_leaves_nothing_registered() -> None:
    children.end_all()
    assert not children._ours
    assert signal.getsignal(signal.SIGTERM) is not None
