"""validate --gpus-per-node (and k8s, which validates with its own): what cannot work when the
stages are spread over nodes of that size (placement and edges from topology/)."""

from __future__ import annotations

from omni_deploy import codes, jsonpath
from omni_deploy.config.nodes import to_plain
from omni_deploy.topology.crossnode import cross_node_problems
from omni_deploy.topology.placement import PlacementError, group_stages, stage_uses
from omni_deploy.validate.context import Context
from omni_deploy.validate.findings import Finding, at


def check_multi_node(ctx: Context) -> list[Finding]:
    size = ctx.options.gpus_per_node
    if size is None:
        return []
    findings = []
    for platform, applied in ctx.applied.items():
        try:
            groups = group_stages(stage_uses(applied, ctx.deployment.pipeline), size)
        except PlacementError as error:
            where, origin = "$.stages", None
            for stage in applied.stages:
                if to_plain(stage.get("stage_id")) == error.stage_id:
                    node = stage.get("devices") or stage.get("stage_id")
                    where = jsonpath.stage(error.stage_id)
                    origin = node.origin if node is not None else None
            findings.append(at(origin, ctx.file, codes.E391, where, f"on {platform}: {error}"))
            continue
        for problem in cross_node_problems(applied, ctx.deployment.pipeline, groups):
            findings.append(at(problem.origin, ctx.file, codes.E390, problem.where, problem.message()))
    return findings
