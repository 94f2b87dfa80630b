"""`bench run` and `bench ab` end to end against the stand-in server and stand-in `vllm bench`."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from tests.serve.conftest import ROOT, STANDIN_BIN, fake_dist_info, free_port
from tests.support.json_shapes import assert_shape

SEED_TTS_STANDIN = ROOT / "tests" / "data" / "bench" / "seed-tts-checkout"


def _seed_inputs(folder: Path) -> None:
    """A Seed-TTS input folder a sweep accepts (en/meta.lst and its WAVs): the stand-in checkout."""
    shutil.copytree(SEED_TTS_STANDIN, folder)


def _env(tmp_path: Path) -> dict[str, str]:
    site = fake_dist_info(tmp_path / "site", {"vllm": "0.30.0", "vllm-omni": "0.30.0"})
    env = dict(os.environ)
    env.update(
        # The stand-in `vllm` (#!/usr/bin/env python3) runs with this environment's interpreter, as a
        # real `vllm` beside omni-deploy would; serve checks that it is not another environment's.
        PATH=os.pathsep.join((str(STANDIN_BIN), str(Path(sys.executable).parent), env["PATH"])),
        PYTHONPATH=os.pathsep.join([str(ROOT), str(site)]),
        XDG_CACHE_HOME=str(tmp_path / "cache"),
        STANDIN_VLLM_RECORD=str(tmp_path / "server.json"),
        STANDIN_VLLM_BENCH_LOG=str(tmp_path / "bench.log"),
        STANDIN_VLLM_READY_AFTER="0.3",
    )
    return env


def _start_server(env: dict[str, str], port: int, tmp_path: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "omni_deploy",
            "serve",
            str(ROOT / "deploy" / "turn-bench.yaml"),
            "--platform",
            "cuda",
            "--port",
            str(port),
            "--run-dir",
            str(tmp_path / "run"),
            "--served-model-name",
            "crossref-test",
        ],
        env=env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def _ab_args(tmp_path: Path) -> list[str]:
    """`bench ab` comparing the CPU and CUDA speaker paths on turn-bench.yaml."""
    return ["bench", "ab", str(ROOT / "deploy" / "turn-bench.yaml"), "--served-model-name", "crossref-test",
            "--a", "spk-backend=cpu-onnxruntime", "--b", "spk-backend=cuda-torch",
            "--dataset-path", str(tmp_path / "inputs")]  # fmt: skip


def _cli(env: dict[str, str], *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "omni_deploy", *args],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_dry_run_prints_the_whole_sweep(tmp_path: Path) -> None:
    _seed_inputs(tmp_path / "inputs")
    done = _cli(
        _env(tmp_path),
        "bench",
        "run",
        "--base-url",
        "http://127.0.0.1:9",
        "--served-model-name",
        "crossref-test",
        "--dataset-path",
        str(tmp_path / "inputs"),
        "--warmup",
        "32",
        "--concurrency",
        "1,4,8,16,32",
        "--dry-run",
    )
    assert done.returncode == 0, done.stderr
    commands = [shlex.split(line) for line in done.stdout.splitlines()]
    assert len(commands) == 1 + 5 * 3  # warm-up, then per C one discarded and two measured rounds
    first = commands[0]
    assert first[:6] == ["vllm", "bench", "serve", "--omni", "--backend", "openai-chat-omni"]
    for flag, value in (
        ("--dataset-name", "seed-tts"),
        ("--percentile-metrics", "audio_ttfp,audio_rtf,audio_duration,e2el"),
        ("--metric-percentiles", "50,95"),
        ("--request-rate", "inf"),
        ("--max-concurrency", "16"),
        ("--num-prompts", "32"),
        ("--result-filename", "warmup.json"),
    ):
        assert first[first.index(flag) + 1] == value
    assert "--save-detailed" in first and "--disable-shuffle" in first
    body = json.loads(first[first.index("--extra-body") + 1])
    assert len(body["sampling_params_list"]) == 3
    names = [
        (c[c.index("--max-concurrency") + 1], c[c.index("--result-filename") + 1]) for c in commands[1:4]
    ]
    assert names == [("1", "discard1.json"), ("1", "r1.json"), ("1", "r2.json")]


def test_run_then_report_against_stand_ins(tmp_path: Path) -> None:
    env = _env(tmp_path)
    port = free_port()
    server = _start_server(env, port, tmp_path)
    try:
        _seed_inputs(tmp_path / "inputs")
        done = _cli(
            env,
            "bench",
            "run",
            "--base-url",
            f"http://127.0.0.1:{port}",
            "--served-model-name",
            "crossref-test",
            "--dataset-path",
            str(tmp_path / "inputs"),
            "--concurrency",
            "1,4",
            "--prompts",
            "8",
            "--result-dir",
            str(tmp_path / "results"),
            "--ready-timeout",
            "60",
            "-o",
            "json",
        )
        assert done.returncode == 0, done.stderr
        assert "[6/6] C=4 r2 (measured)" in done.stderr and "elapsed]" in done.stderr
        sweep = json.loads(done.stdout)  # the rounds as JSON on stdout, progress on stderr
        assert_shape(sweep, "bench-run")
        assert len(sweep["steps"]) == 6 and all(
            s["done"] and Path(s["result"]).is_file() for s in sweep["steps"]
        )
        log = [json.loads(line) for line in (tmp_path / "bench.log").read_text().splitlines()]
        assert len(log) == 6 and log[0]["env"]["SEED_TTS_WER_EVAL"] == "0"
        report = _cli(env, "bench", "report", str(tmp_path / "results"), "-o", "json")
        rows = json.loads(report.stdout)["rows"]
        assert [(r["concurrency"], r["rounds"]) for r in rows] == [(1, 2), (4, 2)]
        assert rows[1]["audio_throughput"]["mean"] == 28.8 / (8 * 3.6 / 2)  # stand-in: audio / duration
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_ab_dry_run_prints_the_plan(tmp_path: Path) -> None:
    _seed_inputs(tmp_path / "inputs")
    done = _cli(
        _env(tmp_path),
        *_ab_args(tmp_path),
        "--concurrency",
        "1,32",
        "--dry-run",
    )
    assert done.returncode == 0, done.stderr
    starts = [line for line in done.stdout.splitlines() if line.startswith("start ")]
    assert starts == [
        "start 1: source A (forward order)",
        "start 2: source B (forward order)",
        "start 3: source A (reverse order)",
        "start 4: source B (reverse order)",
    ]
    assert (
        done.stdout.count("--spk-backend cpu-onnxruntime") == 2
        and done.stdout.count("--spk-backend cuda-torch") == 2
    )
    third = done.stdout.split("start 3:")[1]
    assert third.index("--max-concurrency 32") < third.index("--max-concurrency 1 ")


def test_ab_end_to_end(tmp_path: Path) -> None:
    env = _env(tmp_path)
    _seed_inputs(tmp_path / "inputs")
    done = _cli(
        env,
        *_ab_args(tmp_path),
        "--concurrency",
        "2",
        "--prompts",
        "4",
        "--rounds",
        "1",
        "--discard",
        "0",
        "--port",
        str(free_port()),
        "--result-dir",
        str(tmp_path / "ab"),
        "--model",
        "openbmb/MiniCPM-o-4_5",
        timeout=300,
    )
    assert done.returncode == 0, done.stderr + done.stdout
    assert "Change of B vs A" in done.stdout
    records = sorted((tmp_path / "ab" / "runs").glob("*/launch.json"))
    backends = [json.loads(p.read_text())["speaker"]["speaker_backend"] for p in records]
    assert len(records) == 4 and backends.count("cpu-onnxruntime") == 2


# The child must take SIGINT as Ctrl-C whatever this test process inherited: a shell starts a
# background job (`pytest &`) with SIGINT ignored, and Python keeps an ignored SIGINT ignored.
_WITH_CTRL_C = (
    "import signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
    "from omni_deploy.cli.app import run; sys.argv[0] = 'omni-deploy'; run()"
)


def test_ctrl_c_keeps_finished_rounds(tmp_path: Path) -> None:
    import signal
    import time

    env = _env(tmp_path)
    port = free_port()
    server = _start_server(env, port, tmp_path)
    _seed_inputs(tmp_path / "inputs")
    hanging = tmp_path / "round-c2-started"
    bench = subprocess.Popen(
        [sys.executable, "-c", _WITH_CTRL_C, "bench", "run", "--base-url", f"http://127.0.0.1:{port}",
         "--served-model-name", "crossref-test", "--dataset-path", str(tmp_path / "inputs"),
         "--concurrency", "1,2,4", "--discard", "0", "--rounds", "1",
         "--result-dir", str(tmp_path / "results"), "--ready-timeout", "60"],
        # The round at concurrency 2 waits until it is interrupted: no sleep has to be long enough.
        env={**env, "STANDIN_VLLM_BENCH_HANG": f"2:{hanging}"},
        cwd=ROOT,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 90
        while not hanging.exists() and bench.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert hanging.exists(), "the second round never started"
        bench.send_signal(signal.SIGINT)
        _, err = bench.communicate(timeout=60)
        assert bench.returncode == 130, err
        assert "1 finished round(s) kept" in err
        assert sorted(p.name for p in (tmp_path / "results").rglob("*.json")) == ["r1.json"]
    finally:
        if bench.poll() is None:
            bench.kill()
            bench.wait()
        server.terminate()
        server.wait(timeout=30)


def test_json_dry_runs(tmp_path: Path) -> None:
    _seed_inputs(tmp_path / "inputs")
    common = [
        "--served-model-name",
        "crossref-test",
        "--dataset-path",
        str(tmp_path / "inputs"),
        "--concurrency",
        "1,4",
    ]
    env = _env(tmp_path)
    run = _cli(env, "bench", "run", "--base-url", "http://127.0.0.1:9", *common, "--dry-run", "-o", "json")
    data = json.loads(run.stdout)
    assert_shape(data, "bench-run")
    assert data["dry_run"] is True and [s["role"] for s in data["steps"][:3]] == [
        "discard",
        "measured",
        "measured",
    ]
    ab = _cli(env, *_ab_args(tmp_path), "--concurrency", "1", "--dry-run", "-o", "json")
    plan = json.loads(ab.stdout)
    assert_shape(plan, "bench-run")
    assert [(s["source"], s["start"]) for s in plan["steps"][::3]] == [("a", 1), ("b", 2), ("a", 3), ("b", 4)]


def test_model_means_the_model_as_in_serve_and_k8s(tmp_path: Path) -> None:
    _seed_inputs(tmp_path / "inputs")
    env, inputs = _env(tmp_path), ["--dataset-path", str(tmp_path / "inputs"), "--concurrency", "1"]
    base = ["bench", "run", "--base-url", "http://127.0.0.1:9", "--dry-run", *inputs]
    alone = _cli(env, *base, "--model", "/models/x")
    assert alone.returncode == 0 and "--model /models/x --tokenizer /models/x" in alone.stdout
    named = _cli(env, *base, "--model", "/models/x", "--served-model-name", "voice")
    assert "--model voice --tokenizer /models/x" in named.stdout  # requests carry the served name
    ab = _cli(env, "bench", "ab", str(ROOT / "deploy" / "turn-bench.yaml"), "--model", "/models/x",
              "--served-model-name", "voice", "--a", "spk-backend=cpu-onnxruntime", "--b", "spk-backend=cuda-torch",
              "--dry-run", *inputs)  # fmt: skip
    server = next(line for line in ab.stdout.splitlines() if line.strip().startswith("server:"))
    assert "--model /models/x" in server and "--served-model-name voice" in server
    renamed = _cli(env, "bench", "ab", str(ROOT / "deploy" / "turn-bench.yaml"), "--model-path", "/models/x",
                   "--a", "a=b", "--b", "c=d", *inputs)  # fmt: skip
    assert renamed.returncode == 2 and "--model-path is now --model" in renamed.stderr
