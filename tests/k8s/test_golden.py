"""Two cases whose whole output is pinned: one node (the bundled turn profile) and two nodes
(tests/data/k8s/two_nodes.yaml as a LeaderWorkerSet). Regenerate after an intended change with
OMNI_DEPLOY_UPDATE_GOLDEN=1 and read the diff."""

from __future__ import annotations

import os

import pytest
import yaml

from tests.k8s.kube import ROOT, validate_object
from tests.k8s.test_manifests import run

GOLDEN = ROOT / "tests" / "data" / "k8s" / "golden"
CASES = {
    "one_node.yaml": ["deploy/minicpmo_4_5_turn.yaml", "--model-cache", "pvc:hf-cache"],
    "two_nodes_lws.yaml": ["tests/data/k8s/two_nodes.yaml", "--gpus-per-node", "2", "--namespace", "speech",
                           "--name", "minicpmo-2n", "--model", "/models/MiniCPM-o-4_5", "--model-cache",
                           "host:/data/models"],
}  # fmt: skip


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
        validate_object(obj)
