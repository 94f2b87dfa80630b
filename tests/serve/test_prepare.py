"""serve's preparation: one host decision for the dry run and the real run, every assumption named,
and nothing written by a run that refuses."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from omni_deploy.common.errors import NoAccelerator
from omni_deploy.deployment.model import Deployment
from omni_deploy.launch.options import LaunchOptions
from omni_deploy.serve import session
from omni_deploy.serve.prepare import decide, dry_run_text, real_run_outcome, serving_host
from omni_deploy.serve.request import ServeRequest
from omni_deploy.speaker_backend.host import HostCaps
from tests.serve.conftest import ROOT

BENCH = ROOT / "deploy" / "turn-bench.yaml"
# The host: no GPU, no torch, no onnx, no plugin.
BARE = HostCaps(
    probed=True, torch=False, onnx=False, plugin_registered=False, gpu_query="nvidia-smi not found"
)


def test_the_dry_run_and_the_real_run_decide_for_the_same_host() -> None:
    before = dataclasses.asdict(BARE)
    assert serving_host(BARE, skip_preflight=False) is BARE
    intended = serving_host(BARE, skip_preflight=True)  # this host is not read: the intended one
    assert (intended.probed, intended.torch, intended.onnx, intended.plugin_registered) == (
        False,
        True,
        True,
        True,
    )
    assert dataclasses.asdict(BARE) == before  # the snapshot preflight reads is untouched


def _request(dry_run: bool, skip_preflight: bool = False) -> ServeRequest:
    launch = LaunchOptions(
        platform="cuda", platform_origin="--platform auto found no accelerator on this host"
    )
    return ServeRequest(str(BENCH), "cuda", "0.30.0", launch, dry_run=dry_run, skip_preflight=skip_preflight,
                        target_from="newest final release")  # fmt: skip


@pytest.mark.parametrize("skip_preflight", [False, True])
def test_a_dry_run_tells_the_backend_the_real_run_takes(skip_preflight: bool) -> None:
    deployment = Deployment.load(str(BENCH))
    said: dict[bool, list[str]] = {True: [], False: []}
    decided = {
        dry: decide(_request(dry, skip_preflight), deployment, BARE, {}, said[dry].append)
        for dry in (True, False)
    }
    assert decided[True].decision == decided[False].decision
    assert said[True] == said[False]
    expected = "cuda-torch" if skip_preflight else "cpu-onnxruntime"  # the issue: the dry run said cuda-torch
    assert decided[True].decision.speaker_backend == expected
    if not skip_preflight:
        assert any("the CUDA CAM++ path cannot act on this host" in w for w in said[True])
    assert decided[True].directory is None and decided[False].directory is None  # nothing written yet


def test_the_dry_run_names_its_assumptions() -> None:
    prepared = decide(_request(True), Deployment.load(str(BENCH)), BARE, {}, lambda _: None)
    text = dry_run_text(prepared, "text", "cuda", real_run_outcome(prepared, False, "no accelerator found"))
    assumed = [line for line in text.splitlines() if line.startswith("assumed: ")]
    assert assumed[0] == "assumed: platform cuda (--platform auto found no accelerator on this host)"
    assert assumed[1] == "assumed: checked against vllm-omni 0.30.0 (newest final release)"
    assert assumed[2].startswith(
        "assumed: speaker backend decided for this host as probed: torch no, onnx no"
    )
    assert text.splitlines()[-1] == "real run on this host: refuse (exit 2): no accelerator found"
    data = json.loads(dry_run_text(prepared, "json", "cuda", real_run_outcome(prepared, False, None)))
    assert data["assumptions"] == [a.removeprefix("assumed: ") for a in assumed]
    refusals = len(prepared.preflight.refusals)  # no GPU here, at least
    assert refusals >= 1 and data["real_run"].startswith(f"refuse (exit 1): {refusals} preflight refusal(s)")


def test_the_platform_says_where_it_came_from(monkeypatch: pytest.MonkeyPatch) -> None:
    assert session.choose_platform("rocm", dry_run=False) == session.PlatformChoice("rocm", "--platform")
    monkeypatch.setattr(session, "detect_platform", lambda: "cuda")
    assert session.choose_platform("auto", dry_run=False).origin == "--platform auto: nvidia-smi on PATH"
    monkeypatch.setattr(session, "detect_platform", lambda: None)
    with pytest.raises(NoAccelerator):
        session.choose_platform("auto", dry_run=False)
    assumed = session.choose_platform("auto", dry_run=True)
    assert (assumed.name, assumed.refusal) == ("cuda", session.NO_ACCELERATOR)
    for dry_run in (False, True):  # --skip-preflight skips this host check too, for both runs
        skipped = session.choose_platform("auto", dry_run=dry_run, skip_preflight=True)
        assert (skipped.name, skipped.refusal) == ("cuda", None) and "--skip-preflight" in skipped.origin


def _serve(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": str(ROOT),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
    }
    return subprocess.run([sys.executable, "-m", "omni_deploy", "serve", str(BENCH), *args], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)  # fmt: skip


def test_a_refused_serve_writes_nothing(tmp_path: Path) -> None:
    # No vllm on PATH and no GPU here: preflight refuses, before any run directory is made.
    done = _serve(tmp_path, "--platform", "cuda")
    assert done.returncode == 1, done.stderr
    assert "omni-deploy: nothing started, nothing written" in done.stderr
    assert not (tmp_path / "cache").exists()
    named = _serve(tmp_path, "--platform", "cuda", "--run-dir", str(tmp_path / "run"))
    assert named.returncode == 1 and not (tmp_path / "run").exists()
    auto = _serve(tmp_path)  # --platform auto on a host without an accelerator: exit 2, nothing written
    assert auto.returncode == 2 and "pass --platform" in auto.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_the_dry_run_says_the_real_run_would_refuse(tmp_path: Path) -> None:
    dry = _serve(tmp_path, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    lines = dry.stdout.splitlines()
    assert "assumed: platform cuda (--platform auto found no accelerator on this host)" in lines
    assert lines[-1].startswith("real run on this host: refuse (exit 2): no accelerator found")
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_the_dry_run_says_a_taken_port_would_stop_the_real_run(tmp_path: Path) -> None:
    import socket

    with socket.socket() as held:  # a listener on a free port, held for the dry run's check
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = str(held.getsockname()[1])
        done = _serve(tmp_path, "--dry-run", "--platform", "cuda", "--skip-preflight", "--port", port)
    assert done.returncode == 0, done.stderr
    last = done.stdout.splitlines()[-1]
    assert last.startswith("real run on this host: refuse (exit 1): ") and port in last, last
    free = _serve(tmp_path, "--dry-run", "--platform", "cuda", "--skip-preflight", "--port", port)
    assert (
        free.stdout.splitlines()[-1]
        == "real run on this host: start the server (and write its run directory)"
    )
