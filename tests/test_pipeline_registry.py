"""The pipeline names omni-deploy accepts are vllm-omni 0.30.0's registry keys."""

from __future__ import annotations

import ast

import pytest

from omni_deploy.knowledge.pipelines import REGISTERED
from tests.support import upstream

pytestmark = pytest.mark.upstream


def test_registered_pipelines_match_the_wheel() -> None:
    source = (upstream.wheel_root() / "vllm_omni" / "config" / "pipeline_registry.py").read_text()
    keys: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        target = node.target if isinstance(node, ast.AnnAssign) else None
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
        if (
            isinstance(target, ast.Name)
            and target.id == "OMNI_PIPELINES"
            and isinstance(node.value, ast.Dict)
        ):  # type: ignore[union-attr]
            keys = {k.value for k in node.value.keys if isinstance(k, ast.Constant)}  # type: ignore[union-attr]
    assert keys and keys == REGISTERED
