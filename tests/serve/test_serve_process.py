"""`omni-deploy serve` as a real process, supervising a stand-in `vllm` (an HTTP server on loopback)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.serve.conftest import ROOT, fake_dist_info, free_port, gone, group_gone

BENCH = str(ROOT / "deploy" / "turn-bench.yaml")


def _base(port: int, run_dir: Path, *extra: str) -> list[str]:
    return [
        BENCH,
        "--platform",
        "cuda",
        "--port",
        str(port),
        "--run-dir",
        str(run_dir),
        "--stop-grace",
        "2",
        *extra,
    ]


def test_ready_after_503s_then_sigterm_forwarded_and_exit_code_propagated(
    start_serve, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    port = free_port()
    served = start_serve(*_base(port, tmp_path / "run", "--served-model-name", "crossref-test"),
                         env={"STANDIN_VLLM_READY_AFTER": "1.5", "STANDIN_VLLM_EXIT_ON_TERM": "7"})  # fmt: skip
    served.wait_for("omni-deploy: ready after")
    ready_line = next(line for line in served.output().splitlines() if "ready after" in line)
    assert f"http://127.0.0.1:{port}" in ready_line and "serving: crossref-test" in ready_line
    assert float(ready_line.split("ready after ")[1].split(" s")[0]) >= 1.4  # it did wait through the 503s
    # Progress while waiting: what /health answered, the time waited and the limit.
    waits = [line for line in served.output().splitlines() if "waiting for the server to be ready: " in line]
    assert any("/health 503 after" in line and line.endswith("(limit 1800 s)") for line in waits)
    record = served.record()
    assert record["argv"][1:6] == [
        "serve",
        "openbmb/MiniCPM-o-4_5",
        "--omni",
        "--deploy-config",
        str(tmp_path / "run" / "deploy.yaml"),
    ]
    assert record["env"]["VLLM_WORKER_MULTIPROC_METHOD"] == "spawn"
    # The backend travels in the rendered file, which the plugin reads in the Code2Wav stage.
    assert "OMNI_DEPLOY_SPK_BACKEND" not in record["env"] and "OMNI_DEPLOY_SPK_TF32" not in record["env"]
    assert record["pgid"] == record["pid"] != served.proc.pid  # its own session and process group
    served.proc.send_signal(signal.SIGTERM)
    assert served.proc.wait(timeout=15) == 130  # interrupted; the server's own code is kept
    served.wait_for("SIGTERM forwarded to the server, which exited with code 7")
    exit_record = json.loads((tmp_path / "run" / "launch.json").read_text())["exit"]
    assert exit_record == {"server_code": 7, "signals": ["SIGTERM"], "ready_timeout": False}
    assert served.record()["signals"] == ["SIGTERM"]
    assert gone(record["pid"]) and gone(record["grandchild"])
    assert (tmp_path / "run" / "server.log").read_text().count("stand-in vllm: listening") == 1
    launch = json.loads((tmp_path / "run" / "launch.json").read_text())
    assert launch["speaker"]["speaker_backend"] == "cuda-torch" and launch["platform"] == "cuda"


def test_the_backend_the_server_reports_is_printed_and_recorded(start_serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    served = start_serve(*_base(free_port(), tmp_path / "run"), env={"STANDIN_VLLM_SPK_REPORT": "cuda-torch"})
    served.wait_for("speaker backend reported by the server")
    line = next(line for line in served.lines if "speaker backend reported by the server" in line)
    assert "stage 2: cuda-torch" in line and "device=cuda:0" in line and "WARNING" not in line
    launch = json.loads((tmp_path / "run" / "launch.json").read_text())
    (stage,) = launch["speaker_report"]["stages"]
    assert stage["stage"] == "2" and stage["backend"] == "cuda-torch" and launch["speaker_report"]["reported"]
    assert launch["speaker"]["speaker_backend"] == "cuda-torch"  # what was decided stays beside it
    served.proc.send_signal(signal.SIGTERM)
    served.proc.wait(timeout=15)


def test_the_backend_is_confirmed_from_the_report_file_when_logging_hides_info(
    start_serve, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    served = start_serve(
        *_base(free_port(), tmp_path / "run"),
        env={"STANDIN_VLLM_SPK_REPORT": "cuda-torch", "VLLM_LOGGING_LEVEL": "WARNING"},
    )
    served.wait_for("speaker backend reported by the server")
    line = next(line for line in served.lines if "speaker backend reported by the server" in line)
    assert "stage 2: cuda-torch" in line and "WARNING" not in line
    assert "omni-deploy CAM++ report:" not in (tmp_path / "run" / "server.log").read_text()  # not logged
    record = served.record()
    assert record["env"]["OMNI_DEPLOY_SPK_REPORT_DIR"] == str(tmp_path / "run" / "speaker")
    launch = json.loads((tmp_path / "run" / "launch.json").read_text())
    assert launch["speaker_report"]["source"] == "report files"
    (stage,) = launch["speaker_report"]["stages"]
    assert stage["backend"] == "cuda-torch" and stage["fields"]["vllm-omni"] == "0.30.0"
    served.proc.send_signal(signal.SIGTERM)
    served.proc.wait(timeout=15)


def test_another_backend_than_the_file_asked_for_is_a_warning(start_serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    served = start_serve(
        *_base(free_port(), tmp_path / "run"), env={"STANDIN_VLLM_SPK_REPORT": "cpu-onnxruntime"}
    )
    served.wait_for("speaker backend reported by the server")
    assert "WARNING: speaker backend reported by the server: stage 2: cpu-onnxruntime" in served.output()
    assert "asked for cuda-torch" in served.output()
    served.proc.send_signal(signal.SIGTERM)
    served.proc.wait(timeout=15)


def test_a_server_that_reports_no_backend_gets_a_loud_warning(start_serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    served = start_serve(*_base(free_port(), tmp_path / "run"))  # the stand-in prints no report line
    served.wait_for("NO speaker-backend report")
    line = next(line for line in served.lines if "NO speaker-backend report" in line)
    assert line.startswith("omni-deploy: WARNING:") and "VLLM_PLUGINS" in line
    launch = json.loads((tmp_path / "run" / "launch.json").read_text())
    assert launch["speaker_report"] == {"stages": [], "warnings": [], "reported": False, "source": "none"}
    served.proc.send_signal(signal.SIGTERM)
    served.proc.wait(timeout=15)


def test_sigint_forwarded_and_death_by_signal_is_128_plus_n(start_serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    served = start_serve(*_base(free_port(), tmp_path / "run"), env={"STANDIN_VLLM_READY_AFTER": "0.2"})
    served.wait_for("omni-deploy: ready after")
    pid = served.record()["pid"]
    served.proc.send_signal(signal.SIGINT)
    assert served.proc.wait(timeout=15) == 128 + signal.SIGINT
    assert served.record()["signals"] == ["SIGINT"]
    assert gone(pid)


def test_crash_before_ready_exits_at_once_with_its_code_and_log_tail(start_serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    started = time.monotonic()
    served = start_serve(
        *_base(free_port(), tmp_path / "run", "--ready-timeout", "60"), env={"STANDIN_VLLM_MODE": "crash"}
    )
    assert served.proc.wait(timeout=30) == 4  # the server exited with an error: its code is printed and kept
    assert time.monotonic() - started < 20
    served.wait_for("RuntimeError: stand-in crash")
    assert "exited with code 3 before it was ready" in served.output()
    served.wait_for("omni-deploy: error: the server exited with code 3")
    assert json.loads((tmp_path / "run" / "launch.json").read_text())["exit"]["server_code"] == 3
    assert "  | RuntimeError: stand-in crash during start-up" in served.output()


def test_ready_timeout_stops_the_whole_tree(start_serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    served = start_serve(*_base(free_port(), tmp_path / "run", "--ready-timeout", "1.5"),
                         env={"STANDIN_VLLM_MODE": "never-ready"})  # fmt: skip
    assert served.proc.wait(timeout=30) == 124
    record = served.record()
    assert "not ready after 1.5 s" in served.output()
    assert gone(record["pid"]) and gone(record["grandchild"])
    assert group_gone(record["pgid"])


def test_a_server_that_ignores_term_is_killed(start_serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    served = start_serve(*_base(free_port(), tmp_path / "run", "--ready-timeout", "1"),
                         env={"STANDIN_VLLM_MODE": "ignore-term"})  # fmt: skip
    served.record_path.exists()
    assert served.proc.wait(timeout=30) == 124
    assert "did not stop within 2 s; killing it" in served.output()
    assert gone(served.record()["pid"])


def test_no_wait_replaces_the_process(serve_env: dict[str, str], tmp_path: Path) -> None:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "omni_deploy", "serve", *_base(port, tmp_path / "run", "--no-wait")],
        env=serve_env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        record_path = Path(serve_env["STANDIN_VLLM_RECORD"])
        deadline = time.monotonic() + 20
        while not record_path.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        record = json.loads(record_path.read_text())
        assert record["pid"] == proc.pid  # exec: same process, now the server
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=15)
    assert gone(record["grandchild"]) or os.kill(record["grandchild"], signal.SIGKILL) is None


def _run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    # A free port, never the default 8091: should a refusal regress, the server it starts must not
    # collide with anything; serve's watchdog stops it when the timeout kills omni-deploy.
    port = () if "--port" in args else ("--port", str(free_port()))
    return subprocess.run([sys.executable, "-m", "omni_deploy", "serve", args[0], *port, *args[1:]], env=env,
                          cwd=ROOT, capture_output=True, text=True, timeout=60)  # fmt: skip


def test_preflight_refuses_validation_errors(serve_env: dict[str, str], tmp_path: Path) -> None:
    bad = ROOT / "tests" / "data" / "validate" / "negative" / "memory_over.yaml"
    done = _run(serve_env, str(bad), "--platform", "cuda", "--run-dir", str(tmp_path / "run"))
    assert done.returncode == 1
    assert "error[E350]" in done.stderr and "validation failed; nothing started" in done.stderr
    assert not Path(serve_env["STANDIN_VLLM_RECORD"]).exists()


def test_preflight_refuses_a_version_mismatch(serve_env: dict[str, str], tmp_path: Path) -> None:
    site = fake_dist_info(tmp_path / "mismatch", {"vllm": "0.31.0", "vllm-omni": "0.30.0"})
    env = {**serve_env, "PYTHONPATH": os.pathsep.join([str(ROOT), str(site)])}
    done = _run(env, BENCH, "--platform", "cuda", "--run-dir", str(tmp_path / "run"))
    assert done.returncode == 1
    assert "vllm 0.31.0 and vllm-omni 0.30.0 differ in major.minor" in done.stderr
    assert not Path(serve_env["STANDIN_VLLM_RECORD"]).exists()


def test_preflight_refuses_a_model_without_campplus(serve_env: dict[str, str], tmp_path: Path) -> None:
    model = tmp_path / "MiniCPM-o-4_5"
    model.mkdir()
    done = _run(
        serve_env, BENCH, "--platform", "cuda", "--model", str(model), "--run-dir", str(tmp_path / "run")
    )
    assert done.returncode == 1 and "assets/token2wav/campplus.onnx" in done.stderr
    # The CPU path does not need this check.
    done = _run(serve_env, BENCH, "--platform", "cuda", "--model", str(model), "--spk-backend", "cpu-onnxruntime",
                "--run-dir", str(tmp_path / "run2"), "--dry-run")  # fmt: skip
    assert done.returncode == 0 and "campplus" not in done.stdout


def test_headless_needs_a_master_address(serve_env: dict[str, str], tmp_path: Path) -> None:
    done = _run(
        serve_env,
        BENCH,
        "--dry-run",
        "--run-dir",
        str(tmp_path / "run"),
        "--",
        "--headless",
        "--stage-id",
        "1",
    )
    assert done.returncode == 2 and "--omni-master-address" in done.stderr  # a usage error
    done = _run(serve_env, BENCH, "--dry-run", "--run-dir", str(tmp_path / "run2"), "--", "--headless",
                "--stage-id", "5", "--omni-master-address", "10.0.0.1")  # fmt: skip
    assert done.returncode == 2 and "--stage-id 5" in done.stderr


def test_run_dir_is_never_reused(serve_env: dict[str, str], tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "notes.txt").write_text("mine")
    done = _run(serve_env, BENCH, "--dry-run", "--run-dir", str(run))
    assert done.returncode == 2 and "never overwritten" in done.stderr  # --run-dir is taken: usage
    assert (run / "notes.txt").read_text() == "mine" and sorted(p.name for p in run.iterdir()) == [
        "notes.txt"
    ]
