"""The pod's PID 1 script run by a real bash, with stand-in servers (tests/k8s/standin_server.py, not
vllm): SIGTERM reaches every server and the script waits for all of them; one server ending stops
the others; one process is exec'ed. Where this machine allows a PID namespace (`unshare --pid`, as
root), bash runs as its PID 1 and the signal comes from outside it, as the kubelet's does: the
kernel then drops every signal PID 1 has no handler for (the control case shows it). And the
worker probe against a real HTTP server."""

from __future__ import annotations

import http.server
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from omni_deploy.k8s.entrypoint import PROBE_CODE, master_health_command, supervisor_script
from tests.k8s.kube import ROOT

STANDIN = Path(__file__).with_name("standin_server.py")
OLD_SCRIPT = "{a} &\n{b} &\nwait -n\nexit $?"  # the script before the trap


def _pid_namespace_works() -> bool:
    if shutil.which("unshare") is None:
        return False
    done = subprocess.run(["unshare", "--pid", "--fork", "true"], capture_output=True, timeout=10)
    return done.returncode == 0


PID_NS = _pid_namespace_works()
MODES = [
    pytest.param("pid1", marks=pytest.mark.skipif(not PID_NS, reason="no PID namespace here (needs root)")),
    "child",
]


@dataclass
class Pod:
    process: subprocess.Popen[bytes]  # unshare in pid1 mode, else bash itself
    shell: int  # the host pid of bash, which gets the signals

    def signal(self, signum: int = signal.SIGTERM) -> None:
        os.kill(self.shell, signum)

    def wait(self, timeout: float = 20) -> int:
        return self.process.wait(timeout)


def _child_of(pid: int, timeout: float = 10) -> int:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        children = path.read_text().split()
        if children:
            return int(children[0])
        time.sleep(0.01)
    raise AssertionError(f"unshare ({pid}) started no child")


@pytest.fixture
def start_pod() -> Iterator[Callable[..., Pod]]:
    """Start `bash -c SCRIPT` (as PID 1 of a new PID namespace in pid1 mode); killed at teardown."""
    started: list[subprocess.Popen[bytes]] = []

    def start(script: str, mode: str, env: dict[str, str] | None = None) -> Pod:
        argv = ["bash", "-c", script]
        if mode == "pid1":
            argv = ["unshare", "--pid", "--fork", *argv]
        process = subprocess.Popen(argv, start_new_session=True, env=env)
        started.append(process)
        return Pod(process, _child_of(process.pid) if mode == "pid1" else process.pid)

    yield start
    for process in started:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)


def server(out: Path, name: str, *extra: str) -> list[str]:
    return [sys.executable, str(STANDIN), str(out), name, *extra]


def wait_for(*paths: Path, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not all(p.exists() for p in paths):
        assert time.monotonic() < deadline, f"never appeared: {[str(p) for p in paths if not p.exists()]}"
        time.sleep(0.02)


@pytest.mark.parametrize("mode", MODES)
def test_sigterm_reaches_every_server_and_is_waited_for(
    start_pod: Callable[..., Pod], tmp_path: Path, mode: str
) -> None:
    script = supervisor_script([server(tmp_path, n, "--term-delay", "0.6") for n in ("a", "b")])
    pod = start_pod(script, mode)
    wait_for(tmp_path / "a.up", tmp_path / "b.up")
    pod.signal()
    assert pod.wait() == 128 + signal.SIGTERM
    for name in ("a", "b"):
        assert (tmp_path / f"{name}.term").read_text() == str(int(signal.SIGTERM))
        # Written 0.6 s after the signal, just before the server exits: the script outlived it.
        assert (tmp_path / f"{name}.done").exists()


@pytest.mark.parametrize("mode", MODES)
def test_a_second_signal_does_not_end_the_wait(
    start_pod: Callable[..., Pod], tmp_path: Path, mode: str
) -> None:
    script = supervisor_script([server(tmp_path, n, "--term-delay", "0.8") for n in ("a", "b")])
    pod = start_pod(script, mode)
    wait_for(tmp_path / "a.up", tmp_path / "b.up")
    pod.signal()
    wait_for(tmp_path / "a.term", tmp_path / "b.term")
    pod.signal(signal.SIGINT)
    assert pod.wait() == 128 + signal.SIGTERM
    assert (tmp_path / "a.done").exists() and (tmp_path / "b.done").exists()


@pytest.mark.parametrize("mode", MODES)
def test_one_server_ending_stops_the_others(start_pod: Callable[..., Pod], tmp_path: Path, mode: str) -> None:
    script = supervisor_script(
        [
            server(tmp_path, "a", "--exit-after", "0.5", "--code", "3"),
            server(tmp_path, "b", "--term-delay", "0.3"),
        ]
    )
    pod = start_pod(script, mode)
    assert pod.wait() == 3  # the status of the server that ended first
    assert not (tmp_path / "a.term").exists()
    assert (tmp_path / "b.term").exists() and (tmp_path / "b.done").exists()


@pytest.mark.parametrize("mode", MODES)
def test_one_server_is_execed(start_pod: Callable[..., Pod], tmp_path: Path, mode: str) -> None:
    script = supervisor_script([server(tmp_path, "a")])
    assert script.startswith("exec ")
    pod = start_pod(script, mode)
    wait_for(tmp_path / "a.up")
    # bash became the server: PID 1 of the namespace, or the very process started.
    assert int((tmp_path / "a.up").read_text()) == (1 if mode == "pid1" else pod.process.pid)
    pod.signal()
    assert pod.wait() == 0
    assert (tmp_path / "a.done").exists()


@pytest.mark.skipif(not PID_NS, reason="no PID namespace here (needs root)")
def test_control_pid1_without_a_trap_drops_sigterm(start_pod: Callable[..., Pod], tmp_path: Path) -> None:
    """The script as it was: PID 1 has no handler, the kubelet's SIGTERM is lost."""
    a, b = (" ".join(server(tmp_path, n)) for n in ("a", "b"))
    pod = start_pod(OLD_SCRIPT.format(a=a, b=b), "pid1")
    wait_for(tmp_path / "a.up", tmp_path / "b.up")
    pod.signal()
    time.sleep(1.0)
    assert pod.process.poll() is None
    assert not (tmp_path / "a.term").exists() and not (tmp_path / "b.term").exists()


@pytest.mark.parametrize("mode", MODES)
def test_leaderworkerset_worker_script(start_pod: Callable[..., Pod], tmp_path: Path, mode: str) -> None:
    """The worker command of the LWS golden as written, its `vllm` a stand-in named by --stage-id."""
    objects = list(yaml.safe_load_all((ROOT / "tests/data/k8s/golden/two_nodes_lws.yaml").read_text()))
    (lws,) = [o for o in objects if o["kind"] == "LeaderWorkerSet"]
    (worker,) = lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"]
    assert worker["command"][:2] == ["bash", "-c"]
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    vllm = bin_dir / "vllm"
    vllm.write_text(
        "#!/bin/sh\n# stand-in for vllm: one stand-in server named after its --stage-id\n"
        'stage=; prev=; for a in "$@"; do [ "$prev" = --stage-id ] && stage=$a; prev=$a; done\n'
        f'exec {sys.executable} {STANDIN} {tmp_path} "stage$stage" --term-delay 0.4\n'
    )
    vllm.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "LWS_WORKER_INDEX": "1"}
    pod = start_pod(worker["command"][2], mode, env)
    wait_for(tmp_path / "stage1.up", tmp_path / "stage2.up")
    pod.signal()
    assert pod.wait() == 128 + signal.SIGTERM
    assert (tmp_path / "stage1.done").exists() and (tmp_path / "stage2.done").exists()


def test_script_leaves_kubernetes_expansion_alone() -> None:
    """Kubernetes rewrites `$(VAR)` and `$$` in a command; the script uses neither of its own."""
    script = supervisor_script([["vllm", "serve", "--omni-master-address", "$(POD_IP)"], ["vllm", "serve"]])
    assert "$$" not in script
    assert script.count("$(") == 1 and "'$(POD_IP)'" in script


class _Health(http.server.BaseHTTPRequestHandler):
    status = 200

    def do_GET(self) -> None:
        self.send_response(self.status if self.path == "/health" else 404)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def master() -> Iterator[http.server.ThreadingHTTPServer]:
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Health)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()
    thread.join(5)


def probe(port: int) -> subprocess.CompletedProcess[str]:
    """The worker's exec probe, with this interpreter for the pod's python3 and a dead proxy set."""
    command = master_health_command("$MASTER_HOST", port, 2)
    assert command[:3] == ["python3", "-c", PROBE_CODE]
    env = {**os.environ, "MASTER_HOST": "127.0.0.1", "http_proxy": "http://127.0.0.1:9", "HTTP_PROXY": ""}
    return subprocess.run([sys.executable, *command[1:]], env=env, capture_output=True, text=True, timeout=30)


def test_probe_passes_on_a_healthy_master(master: http.server.ThreadingHTTPServer) -> None:
    _Health.status = 200
    done = probe(master.server_address[1])
    assert done.returncode == 0, done.stderr


def test_probe_fails_on_503_and_on_no_master(master: http.server.ThreadingHTTPServer) -> None:
    _Health.status = 503
    port = master.server_address[1]
    done = probe(port)
    assert done.returncode == 1 and f"http://127.0.0.1:{port}/health" in done.stderr and "503" in done.stderr
    master.shutdown()
    master.server_close()
    gone = probe(port)
    assert gone.returncode == 1 and "Traceback" not in gone.stderr
