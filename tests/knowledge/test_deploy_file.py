"""Which YAML files count as deploy files where files are found rather than named."""

from __future__ import annotations

import pytest

from omni_deploy.knowledge.deploy_file import looks_like_deploy_file


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("stages:\n  - stage_id: 0\n", True),
        ("base_config: minicpmo_4_5.yaml\n", True),
        ("stages: [\n", True),  # broken YAML is kept, so that validate reports it
        ("- a\n- b\n", True),  # not a mapping: validate says why
        ("name: ci\non: push\njobs: {}\n", False),  # a GitHub workflow
        ("apiVersion: v1\nkind: Pod\n", False),  # one Kubernetes object
        ("stages: []\n---\nstages: []\n", False),  # several documents: vllm-omni reads one
        ("", False),
    ],
)
def test_looks_like_deploy_file(text: str, expected: bool) -> None:
    assert looks_like_deploy_file(text) is expected
