"""The connector names and pipeline edges k8s relies on, read from vllm-omni 0.30.0's own code."""

from __future__ import annotations

import ast
import re

import pytest

from omni_deploy.deployment.topology.crossnode import (
    ALIASES,
    CROSS_NODE_CONNECTORS,
    PIPELINE_EDGES,
    SHARED_MEMORY,
)
from tests.support import upstream

pytestmark = pytest.mark.upstream


def test_connectors_are_the_registered_ones() -> None:
    factory = upstream.wheel_root() / "vllm_omni" / "distributed" / "omni_connectors" / "factory.py"
    registered = set(re.findall(r'register_connector\(\s*"(\w+)"', factory.read_text()))
    assert registered == {SHARED_MEMORY, *CROSS_NODE_CONNECTORS, *ALIASES}


def test_minicpmo_edges_are_its_input_sources() -> None:
    models = upstream.wheel_root() / "vllm_omni" / "model_executor" / "models"
    (source,) = [p for p in models.rglob("pipeline.py") if "minicpmo_4_5" in p.read_text()]
    edges = set()
    for call in ast.walk(ast.parse(source.read_text())):
        if isinstance(call, ast.Call) and getattr(call.func, "id", "") == "StagePipelineConfig":
            kw = {k.arg: k.value for k in call.keywords}
            target = ast.literal_eval(kw["stage_id"])
            for origin in ast.literal_eval(kw["input_sources"]):
                edges.add((origin, target))
    assert edges == set(PIPELINE_EDGES["minicpmo_4_5"])
