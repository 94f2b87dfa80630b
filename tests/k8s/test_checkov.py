"""checkov's Kubernetes policies on the manifests: the goldens and fresh output (one node, StatefulSets,
and the LeaderWorkerSet, whose pod templates checkov does not know and so scans as Deployments
carrying the LWS's own metadata). Zero failed checks; every skipped check is one
omni_deploy/k8s/policy.py writes into the object with its reason, and docs/kubernetes.md lists it.

checkov (3.3.30, with about 290 MB of dependencies) lives in a virtualenv of its own: .ci/run
builds it from .ci/checkov-requirements.txt and names its executable in OMNI_DEPLOY_CHECKOV.
Without that variable the test uses a `checkov` on PATH, or is skipped.
"""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from omni_deploy.k8s.policy import SKIPPABLE
from tests.k8s.kube import ROOT
from tests.k8s.test_manifests import run

GOLDEN = ROOT / "tests" / "data" / "k8s" / "golden"
PIN = re.search(r"^checkov==(\S+)$", (ROOT / ".ci" / "checkov-requirements.txt").read_text(), re.M)
FRESH = {
    # The one-node command, as an operator types it.
    "fresh_one_node.yaml": ["deploy/turn-bench.yaml", "--model", "openbmb/MiniCPM-o-4_5"],
    "fresh_statefulsets.yaml": ["tests/data/k8s/two_nodes.yaml", "--gpus-per-node", "2", "--workload", "statefulset",
                                "--model", "openbmb/MiniCPM-o-4_5", "--hf-token-secret", "hf-token",
                                "--model-cache", "pvc:hf-cache"],
    "fresh_lws.yaml": ["tests/data/k8s/two_nodes.yaml", "--gpus-per-node", "2", "--model", "openbmb/MiniCPM-o-4_5",
                       "--namespace", "speech", "--model-cache", "per-node:200"],
}  # fmt: skip
GOLDENS = sorted(p.name for p in GOLDEN.glob("*.yaml"))
LWS_FILES = ["two_nodes_lws.yaml", "fresh_lws.yaml"]
FILES = [*GOLDENS, *FRESH, *(f.replace(".yaml", ".pods.yaml") for f in LWS_FILES)]


def checkov_path() -> str:
    named = os.environ.get("OMNI_DEPLOY_CHECKOV")
    if named:
        if not os.access(named, os.X_OK):
            pytest.fail(f"OMNI_DEPLOY_CHECKOV={named} is not an executable")
        return named
    found = shutil.which("checkov")
    if found is None:
        pytest.skip("checkov is not installed; .ci/run builds it a virtualenv (OMNI_DEPLOY_CHECKOV=PATH)")
    return found


def lws_as_deployments(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The LWS's leader and worker templates as Deployments with the LWS's metadata (its skips)."""
    out = []
    for obj in objects:
        if obj["kind"] != "LeaderWorkerSet":
            out.append(obj)
            continue
        for role in ("leaderTemplate", "workerTemplate"):
            template = copy.deepcopy(obj["spec"]["leaderWorkerTemplate"][role])
            meta = {**copy.deepcopy(obj["metadata"]), "name": f"{obj['metadata']['name']}-{role[:-8]}"}
            spec = {
                "replicas": 1,
                "selector": {"matchLabels": template["metadata"]["labels"]},
                "template": template,
            }
            out.append({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta, "spec": spec})
    return out


def scanned(directory: str) -> dict[str, list[dict[str, Any]]]:
    """file name -> every check result checkov reports for it, from one run over the directory."""
    checkov = checkov_path()
    version = subprocess.run(
        [checkov, "--version"], capture_output=True, text=True, timeout=600
    ).stdout.strip()
    pin = PIN.group(1) if PIN else None
    assert version == pin, f"checkov {version}, but .ci/checkov-requirements.txt pins {pin}"
    # Offline: no Prisma Cloud metadata (--skip-download), no look for a newer release on PyPI.
    env = {**os.environ, "CKV_SKIP_PACKAGE_UPDATE_CHECK": "true"}
    done = subprocess.run(
        [checkov, "-d", directory, "--framework", "kubernetes", "-o", "json", "--skip-download"],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert done.returncode in (0, 1), done.stderr[-4000:]  # 1: a check failed, reported below
    report = json.loads(done.stdout)
    reports = report if isinstance(report, list) else [report]
    results: dict[str, list[dict[str, Any]]] = {}
    for part in reports:
        for outcome in ("passed_checks", "failed_checks", "skipped_checks"):
            for check in part["results"][outcome]:
                results.setdefault(Path(check["file_path"]).name, []).append(check)
    return results


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict[str, Any]]]:
    checkov_path()  # skip before rendering anything when there is no checkov
    directory = tmp_path_factory.mktemp("checkov")
    for name in GOLDENS:
        shutil.copy(GOLDEN / name, directory / name)
    for name, args in FRESH.items():
        done = run("k8s", *args)
        assert done.returncode == 0, done.stderr
        (directory / name).write_text(done.stdout)
    for name in LWS_FILES:
        objects = list(yaml.safe_load_all((directory / name).read_text()))
        pods = yaml.safe_dump_all(lws_as_deployments(objects), sort_keys=False)
        (directory / name.replace(".yaml", ".pods.yaml")).write_text(pods)
    return scanned(str(directory))


def _docs_skips() -> set[str]:
    return set(re.findall(r"`(CKV2?_K8S_\d+)`", (ROOT / "docs" / "kubernetes.md").read_text()))


@pytest.mark.parametrize("name", FILES)
def test_no_failed_check(results: dict[str, list[dict[str, Any]]], name: str) -> None:
    checks = results.get(name, [])
    failed = [
        f"{c['check_id']} {c['check_name']} ({c['resource']})"
        for c in checks
        if c["check_result"]["result"] == "FAILED"
    ]
    assert failed == [], "\n".join(failed)
    passed = [c for c in checks if c["check_result"]["result"] == "PASSED"]
    workloads = {"one_node", "production", "fresh_one_node", "sts", "statefulsets", "pods"}
    assert len(passed) >= (60 if any(w in name for w in workloads) else 2), (
        f"{name}: only {len(passed)} passed"
    )
    for check in checks:
        if check["check_result"]["result"] == "SKIPPED":
            assert check["check_id"] in SKIPPABLE, f"{name}: {check['check_id']} is skipped but not ours"
            comment = check["check_result"].get("suppress_comment", "")
            assert comment and comment != "No comment provided", f"{name}: {check['check_id']} has no reason"


def test_every_skip_is_documented() -> None:
    assert set(SKIPPABLE) <= _docs_skips()


def test_skips_appear_only_when_asked(results: dict[str, list[dict[str, Any]]]) -> None:
    """A namespace and a digest (the production example) leave nothing to skip."""
    skipped = {c["check_id"] for c in results["production.yaml"] if c["check_result"]["result"] == "SKIPPED"}
    assert skipped == set()
    one = {c["check_id"] for c in results["fresh_one_node.yaml"] if c["check_result"]["result"] == "SKIPPED"}
    assert one == set(SKIPPABLE)
