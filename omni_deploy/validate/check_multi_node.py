"""validate --gpus-per-node (and k8s, which validates with its own): what cannot work when the
stages are spread over nodes of that size (placement and edges from deployment/topology/)."""

from __future__ import annotations

from omni_deploy.common import codes, jsonpath
from omni_deploy.config.nodes import to_plain
from omni_deploy.deployment.topology.crossnode import cross_node_problems
from omni_deploy.deployment.topology.placement import PlacementError, group_stages, stage_uses
from omni_deploy.validate.context import Context
from omni_deploy.validate.findings import Finding, at
from omni_deploy.validate.rules import emits


@emits(codes.E390, codes.E391)
def check_multi_node(ctx: Context) -> list[Finding]:
    """validate --gpus-per-node (and k8s, which validates with its node size): what cannot work when
    the stages are spread over nodes of that size (placement and edges from deployment/topology/).

    E390:
        What it does: places whole stages, in stage order, on nodes of --gpus-per-node GPUs and
            reports an edge between stages on different nodes that a SharedMemoryConnector carries
            (the automatic connector of an unnamed edge is one).
        Why: shared memory is local to one host; vllm-omni would start, and the first request would
            never reach the next stage. Cross-node edges need a connector such as
            MooncakeStoreConnector or NixlConnector.
        Fails:
            # options: --gpus-per-node 1
            base_config: minicpmo_4_5_turn.yaml
            stages:
              - stage_id: 0
                devices: "0"
              - stage_id: 1
                devices: "1"
              - stage_id: 2
                devices: "2"
        Passes:
            # options: --gpus-per-node 3
            base_config: minicpmo_4_5_turn.yaml
            stages:
              - stage_id: 0
                devices: "0"
              - stage_id: 1
                devices: "1"
              - stage_id: 2
                devices: "2"
    E391:
        What it does: reports a stage that needs more GPUs (replicas x tensor and pipeline parallel
            ranks) than one node has, or that cannot be placed at all.
        Why: a stage runs on one node (its replicas and ranks are local processes of one launcher);
            spanning nodes would need multi-node tensor parallelism.
        Fails:
            # options: --gpus-per-node 2
            base_config: minicpmo_4_5_turn.yaml
            stages:
              - stage_id: 0
                tensor_parallel_size: 4
                devices: "0,1,2,3"
        Passes:
            # options: --gpus-per-node 4
            base_config: minicpmo_4_5_turn.yaml
            stages:
              - stage_id: 0
                tensor_parallel_size: 4
                devices: "0,1,2,3"
    """
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
