"""Supervision that cannot be fooled: real processes (the stand-in `vllm`), each cleaned up in fixtures."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from omni_deploy.common.process_tree import EXIT_SERVER_ERROR
from omni_deploy.serve.supervise import Supervisor
from tests.serve.conftest import ROOT, STANDIN_BIN, free_port, gone

BENCH = str(ROOT / "deploy" / "turn-bench.yaml")


def _args(port: int, run_dir: Path, *extra: str) -> list[str]:
    return [BENCH, "--platform", "cuda", "--port", str(port), "--run-dir", str(run_dir), "--stop-grace", "2", *extra]  # fmt: skip


@pytest.fixture
def foreign_server(tmp_path: Path) -> Iterator[tuple[int, subprocess.Popen[bytes]]]:
    """Someone else's server (the stand-in, started directly) answering /health on a port."""
    port = free_port()
    env = {
        **os.environ,
        "STANDIN_VLLM_READY_AFTER": "0",
        "STANDIN_VLLM_RECORD": str(tmp_path / "foreign.json"),
    }
    proc = subprocess.Popen(
        [sys.executable, str(STANDIN_BIN / "vllm"), "serve", "x", "--port", str(port),
         "--served-model-name", "someone-elses-model"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 20
        while not (tmp_path / "foreign.json").exists() or not _listening(port):
            assert time.monotonic() < deadline and proc.poll() is None, "the foreign stand-in did not start"
            time.sleep(0.05)
        yield port, proc
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def _listening(port: int) -> bool:
    from omni_deploy.serve.ports import port_is_free

    return not port_is_free("127.0.0.1", port)


def test_a_stop_is_escalated_to_sigkill_after_the_grace(start_serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    served = start_serve(*_args(free_port(), tmp_path / "run"), env={"STANDIN_VLLM_MODE": "ignore-signals"})
    served.wait_for("omni-deploy: ready after")
    record = served.record()
    served.proc.send_signal(signal.SIGTERM)
    assert served.proc.wait(timeout=20) == 130  # interrupted, by the exit-code map
    assert served.record()["signals"] == ["SIGTERM"]
    assert "did not stop within 2 s; killing its process group" in served.output()
    assert gone(record["pid"]) and gone(record["grandchild"])


def test_sighup_stops_the_server_like_sigterm(start_serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    served = start_serve(*_args(free_port(), tmp_path / "run"), env={"STANDIN_VLLM_EXIT_ON_TERM": "0"})
    served.wait_for("omni-deploy: ready after")
    record = served.record()
    served.proc.send_signal(signal.SIGHUP)
    assert served.proc.wait(timeout=20) == 130
    assert served.record()["signals"] == ["SIGTERM"]  # the server was asked to stop, not hung up on
    assert gone(record["pid"]) and gone(record["grandchild"])


def test_the_server_and_its_workers_die_with_omni_deploy(start_serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    served = start_serve(*_args(free_port(), tmp_path / "run"), env={"STANDIN_VLLM_MODE": "ignore-signals"})
    served.wait_for("omni-deploy: ready after")
    record = served.record()
    served.proc.kill()  # SIGKILL: omni-deploy runs no code at all
    served.proc.wait()
    assert gone(record["pid"], timeout=10) and gone(record["grandchild"], timeout=10)


def test_a_taken_port_is_refused_and_its_holder_named(foreign_server, serve_env, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    port, proc = foreign_server
    done = subprocess.run(
        [sys.executable, "-m", "omni_deploy", "serve", *_args(port, tmp_path / "run")],
        env=serve_env, cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"port {port} on 127.0.0.1 is already in use by pid {proc.pid}" in done.stderr
    assert not Path(serve_env["STANDIN_VLLM_RECORD"]).exists()  # nothing was started
    assert "ready after" not in done.stdout


def test_a_foreign_server_answering_health_is_not_ours(foreign_server, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Ours has not bound yet (or died with EADDRINUSE) while another server answers /health."""
    port, _ = foreign_server
    out = tmp_path / "out.txt"
    with out.open("w") as handle:
        supervisor = Supervisor(
            [sys.executable, "-c", "import time; time.sleep(60)"],
            dict(os.environ),
            tmp_path / "server.log",
            f"http://127.0.0.1:{port}",
            ready_timeout=20,
            stop_grace=2,
            poll_interval=0.1,
            out=handle,
            expected_model="openbmb/MiniCPM-o-4_5",
        )
        assert supervisor.run() == EXIT_SERVER_ERROR
    assert supervisor.child is not None and supervisor.child.poll() is not None
    text = out.read_text()
    assert "serves someone-elses-model, not openbmb/MiniCPM-o-4_5" in text
    assert "ready after" not in text


def test_bench_ab_refuses_a_port_someone_else_serves(foreign_server, serve_env, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    port, _ = foreign_server
    inputs = tmp_path / "inputs"
    shutil.copytree(ROOT / "tests" / "data" / "bench" / "seed-tts-checkout", inputs)  # en/meta.lst and WAVs
    done = subprocess.run(
        [sys.executable, "-m", "omni_deploy", "bench", "ab", BENCH, "--a", "spk-backend=cpu-onnxruntime",
         "--b", "spk-backend=cuda-torch", "--port", str(port), "--served-model-name", "crossref-test", "--dataset-path", str(inputs),
         "--result-dir", str(tmp_path / "results"), "--ready-timeout", "30"],
        env=serve_env, cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode != 0
    assert f"port {port}" in done.stderr and "already in use" in done.stderr
    assert not list((tmp_path / "results").rglob("*.json"))  # the foreign server was never measured


SECRETS = {
    "api": "sk-apikey-canary-1",
    "eq": "sk-eqform-canary-2",
    "hf": "hf-token-canary-3",
    "custom": "pw-custom-canary-4",
    "env_db": "db-pass-canary-5",
    "env_tok": "token-canary-6",
    "env_auth": "auth-canary-7",
    "file": "file-env-canary-8",
}


def _secret_args(port: int, run_dir: Path, *extra: str) -> list[str]:
    return [
        *_args(port, run_dir, *extra),
        "--env", f"DB_PASS={SECRETS['env_db']}", "--env", f"TOKEN={SECRETS['env_tok']}",
        "--env", f"AUTH={SECRETS['env_auth']}",
        "--", "--api-key", SECRETS["api"], f"--ssl-keyfile-password={SECRETS['eq']}",
        "--hf-token", SECRETS["hf"], "--my-db-password", SECRETS["custom"],
    ]  # fmt: skip


def _secret_file(tmp_path: Path) -> Path:
    path = tmp_path / "with-env.yaml"
    path.write_text(f"base_config: {BENCH}\nhf_hint: ${{oc.env:HF_TOKEN_X}}\n")
    return path


def _assert_no_secret(text: str, where: str) -> None:
    for name, value in SECRETS.items():
        assert value not in text, f"{name} secret in {where}"


def test_dry_run_redacts_every_secret_form(serve_env, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    env = {**serve_env, "HF_TOKEN_X": SECRETS["file"]}
    for i, fmt in enumerate(("text", "json")):
        run_dir = tmp_path / f"run{i}"
        args = _secret_args(free_port(), run_dir, "--dry-run", "-o", fmt)
        args[0] = str(_secret_file(tmp_path))
        done = subprocess.run([sys.executable, "-m", "omni_deploy", "serve", *args],
                              env=env, cwd=ROOT, capture_output=True, text=True, timeout=60)  # fmt: skip
        assert done.returncode == 0, done.stderr
        _assert_no_secret(done.stdout + done.stderr, f"dry-run {fmt} output")
        assert "--api-key '<redacted>'" in done.stdout or '"<redacted>"' in done.stdout
        if fmt == "json":
            json.loads(done.stdout)
        for path in run_dir.iterdir():
            _assert_no_secret(path.read_text(), str(path))
        assert "${oc.env:HF_TOKEN_X}" in (run_dir / "deploy.yaml").read_text()


def test_live_run_redacts_output_and_record_but_the_server_gets_the_values(
    start_serve, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    run_dir = tmp_path / "run"
    args = _secret_args(free_port(), run_dir)
    args[0] = str(_secret_file(tmp_path))
    served = start_serve(*args, env={"HF_TOKEN_X": SECRETS["file"]})
    served.wait_for("omni-deploy: ready after")
    record = served.record()
    assert SECRETS["api"] in record["argv"] and record["env"]["DB_PASS"] == SECRETS["env_db"]
    served.proc.send_signal(signal.SIGTERM)
    served.proc.wait(timeout=20)
    _assert_no_secret(served.output(), "serve output")
    assert stat_mode(run_dir) == 0o700
    for path in run_dir.iterdir():
        _assert_no_secret(path.read_text(), str(path))
        assert stat_mode(path) == 0o600, path
    assert "<redacted>" in (run_dir / "server.log").read_text()  # the stand-in echoes its argv


def stat_mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


def test_a_run_dir_that_cannot_be_made_is_a_message(serve_env, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    done = subprocess.run(
        [sys.executable, "-m", "omni_deploy", "serve", BENCH, "--platform", "cuda", "--dry-run",
         "--run-dir", "/dev/null/x"],
        env=serve_env, cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert "cannot create the run directory" in done.stderr and "Traceback" not in done.stderr


def test_a_cache_directory_that_is_a_file_is_a_message(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from omni_deploy.serve.rundir import RunDirError, make_run_dir

    (tmp_path / "cachefile").write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cachefile"))
    with pytest.raises(RunDirError, match="cannot create the run directory"):
        make_run_dir(None)
