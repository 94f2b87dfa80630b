"""Rollouts: a Deployment's progress deadline and every workload's `omni-deploy/rollout-timeout`
cover the whole startup-probe budget plus the image pull, the documented `kubectl rollout status
--timeout` is that timeout, and a changed ConfigMap changes every pod template (checksum/config),
so the pods restart with it."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from omni_deploy.k8s.manifests import PULL_MARGIN, ROLLOUT_ANNOTATION
from tests.k8s.kube import ROOT, pod_templates
from tests.support.cli import run_cli

GOLDEN = ROOT / "tests" / "data" / "k8s" / "golden"
TWO_NODES = str(ROOT / "tests" / "data" / "k8s" / "two_nodes.yaml")
MODEL = ["--model", "openbmb/MiniCPM-o-4_5"]
WORKLOADS = ("Deployment", "StatefulSet", "LeaderWorkerSet")


def render(capsys: pytest.CaptureFixture[str], *args: str) -> list[dict[str, Any]]:
    result = run_cli(capsys, "k8s", *args)
    assert result.code == 0, result.err
    return [o for o in yaml.safe_load_all(result.out) if o is not None]


def budget(probe: dict[str, Any]) -> int:
    """Seconds a probe may fail before the kubelet gives up: the time it allows."""
    return int(probe.get("initialDelaySeconds", 0)) + int(probe["periodSeconds"]) * int(
        probe["failureThreshold"]
    )


def check_timing(objects: list[dict[str, Any]], startup_timeout: int) -> None:
    workloads = [o for o in objects if o["kind"] in WORKLOADS]
    assert workloads
    for obj in workloads:
        timeout = obj["metadata"]["annotations"][ROLLOUT_ANNOTATION]
        timeout_s = int(timeout.removesuffix("m")) * 60
        for template, _ in pod_templates(obj):
            for container in template["spec"]["containers"]:
                startup = budget(container["startupProbe"])
                assert (
                    startup_timeout <= startup < startup_timeout + container["startupProbe"]["periodSeconds"]
                )
                assert timeout_s >= startup + PULL_MARGIN
                # Liveness starts after the startup probe: a slow load is never killed by it.
                assert budget(container["livenessProbe"]) < startup
        if obj["kind"] == "Deployment":
            deadline = obj["spec"]["progressDeadlineSeconds"]
            assert deadline == startup_timeout + PULL_MARGIN and timeout_s >= deadline


@pytest.mark.parametrize("name", sorted(p.name for p in GOLDEN.glob("*.yaml")))
def test_goldens(name: str) -> None:
    check_timing(list(yaml.safe_load_all((GOLDEN / name).read_text())), 1800)


@pytest.mark.parametrize("workload", ["leaderworkerset", "statefulset"])
@pytest.mark.parametrize("startup", [600, 3600])
def test_startup_timeout(capsys: pytest.CaptureFixture[str], workload: str, startup: int) -> None:
    check_timing(render(capsys, *MODEL, "--startup-timeout", str(startup)), startup)
    several = render(capsys, TWO_NODES, "--gpus-per-node", "2", *MODEL, "--workload", workload,
                     "--startup-timeout", str(startup))  # fmt: skip
    check_timing(several, startup)


def test_docs_wait_as_long_as_the_rollout() -> None:
    """Every `rollout status` / `kubectl wait` in docs/kubernetes.md waits the default rollout timeout."""
    (deployment,) = [
        o for o in yaml.safe_load_all((GOLDEN / "one_node.yaml").read_text()) if o["kind"] == "Deployment"
    ]
    expected = deployment["metadata"]["annotations"][ROLLOUT_ANNOTATION]
    docs = (ROOT / "docs" / "kubernetes.md").read_text()
    waits = re.findall(r"kubectl .*(?:rollout status|wait) .*--timeout=(\S+)", docs)
    assert waits and set(waits) == {expected}, waits


def _checksums(objects: list[dict[str, Any]]) -> set[str]:
    return {t["metadata"]["annotations"]["checksum/config"] for o in objects for t, _ in pod_templates(o)}


def test_config_checksum(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    objects = render(capsys, TWO_NODES, "--gpus-per-node", "2", *MODEL, "--workload", "statefulset")
    (config,) = [o for o in objects if o["kind"] == "ConfigMap"]
    expected = hashlib.sha256(
        json.dumps(config["data"], sort_keys=True, separators=(",", ":")).encode()
    ).hexdigest()
    assert _checksums(objects) == {expected}
    assert _checksums(
        render(capsys, TWO_NODES, "--gpus-per-node", "2", *MODEL, "--workload", "statefulset")
    ) == {expected}
    changed = tmp_path / "changed.yaml"
    changed.write_text(
        f"base_config: {TWO_NODES}\nstages:\n  - stage_id: 2\n    gpu_memory_utilization: 0.1\n"
    )
    other = _checksums(
        render(capsys, str(changed), "--gpus-per-node", "2", *MODEL, "--workload", "statefulset")
    )
    assert len(other) == 1 and other != {expected}
