"""Cases whose whole output is pinned: one node (the bundled turn profile), two nodes
(tests/data/k8s/two_nodes.yaml) as a LeaderWorkerSet and as StatefulSets with a cache claim per
node, and the production example of docs/kubernetes.md (values file, digest, ServiceMonitor).
Regenerate after an intended change with OMNI_DEPLOY_UPDATE_GOLDEN=1 and read the diff.
tests/k8s/test_checkov.py runs the policy check on these files."""

from __future__ import annotations

import os

import pytest
import yaml

from tests.k8s.kube import ROOT, validate_object
from tests.k8s.test_manifests import run

GOLDEN = ROOT / "tests" / "data" / "k8s" / "golden"
DIGEST = "sha256:" + "0123456789abcdef" * 4
CASES = {
    "one_node.yaml": ["deploy/minicpmo_4_5_turn.yaml", "--model-cache", "pvc:hf-cache"],
    "two_nodes_lws.yaml": ["tests/data/k8s/two_nodes.yaml", "--gpus-per-node", "2", "--namespace", "speech",
                           "--name", "minicpmo-2n", "--model", "/models/MiniCPM-o-4_5", "--model-cache",
                           "host:/data/models"],
    "two_nodes_sts.yaml": ["tests/data/k8s/two_nodes.yaml", "--gpus-per-node", "2", "--namespace", "speech",
                           "--workload", "statefulset", "--model-cache", "per-node:200:fast-ssd"],
    "production.yaml": ["deploy/minicpmo_4_5_turn.yaml", "--values", "docs/examples/k8s-production-values.yaml",
                        "--image", f"registry.example.com/omni-deploy@{DIGEST}", "--model-cache", "pvc:hf-cache",
                        "--service-monitor"],
}  # fmt: skip
KUBERNETES_VERSIONS = ("1.30.0", "1.33.0", "1.37.0")


@pytest.mark.parametrize("case", sorted(CASES))
def test_golden(case: str) -> None:
    args = CASES[case]
    model = [] if "--model" in args else ["--model", "openbmb/MiniCPM-o-4_5"]
    done = run("k8s", *args, *model, "--hf-token-secret", "hf-token", "--target-version", "0.30.0")
    assert done.returncode == 0, done.stderr
    path = GOLDEN / case
    if os.environ.get("OMNI_DEPLOY_UPDATE_GOLDEN"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(done.stdout)
    assert done.stdout == path.read_text()
    for obj in yaml.safe_load_all(done.stdout):
        for version in KUBERNETES_VERSIONS:
            validate_object(obj, version)
