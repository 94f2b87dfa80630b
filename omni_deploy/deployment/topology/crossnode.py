"""Edges between stages that land on different nodes, and the connectors that can carry them.

vllm-omni 0.30.0 builds one connector per edge: the one a stage names in `input_connectors` /
`output_connectors`, else an automatic SharedMemoryConnector for every edge of the pipeline's
topology (distributed/omni_connectors/utils/initialization.py:387-418). Shared memory is local to
one host (connectors/shm_connector.py: POSIX segments under /dev/shm), so such an edge cannot cross
nodes.
"""

from __future__ import annotations

from dataclasses import dataclass

from omni_deploy.common import jsonpath
from omni_deploy.config.nodes import Map, Origin, Scalar, to_plain
from omni_deploy.config.platform import PlatformApplied
from omni_deploy.deployment.topology.placement import NodeGroup
from omni_deploy.knowledge.pipelines import PipelineInfo

SHARED_MEMORY = "SharedMemoryConnector"
# Connectors registered in 0.30.0's distributed/omni_connectors/factory.py besides shared memory;
# each moves data between hosts. tests/deployment/topology/test_crossnode.py reads the registry from the wheel.
CROSS_NODE_CONNECTORS: dict[str, str] = {
    "MooncakeStoreConnector": "Mooncake distributed store",
    "MooncakeTransferEngineConnector": "Mooncake transfer engine (RDMA)",
    "NixlConnector": "NIXL through vLLM's nixl_utils",
    "MoriTransferEngineConnector": "Mori RDMA transfer engine",
    "YuanrongConnector": "Yuanrong datasystem",
    "YuanrongTransferEngineConnector": "Yuanrong transfer engine (NPU platform only)",
}
# Registered too, as a backward-compatible alias of MooncakeStoreConnector: accepted, not offered.
ALIASES = {"MooncakeConnector": "MooncakeStoreConnector"}
# Edges of a pipeline's fixed topology (input_sources in its pipeline.py), which get an automatic
# shared-memory connector when the file names none.
PIPELINE_EDGES: dict[str, tuple[tuple[int, int], ...]] = {"minicpmo_4_5": ((0, 1), (1, 2))}


@dataclass(frozen=True)
class Edge:
    source: int
    target: int
    connector: str | None  # the name under `connectors:`; None: the automatic one
    kind: str  # the connector class


@dataclass(frozen=True)
class CrossNodeProblem:
    edge: Edge
    source_label: str
    target_label: str
    source_node: int
    target_node: int
    where: str  # JSONPath of the reference, or of the stage when the connector is automatic
    origin: Origin | None

    def message(self) -> str:
        named = f"connector {self.edge.connector!r}" if self.edge.connector else "the automatic connector"
        offered = ", ".join(CROSS_NODE_CONNECTORS)
        return (
            f"{self.source_label} on node {self.source_node} and {self.target_label} "
            f"on node {self.target_node} are joined by {named}, a {SHARED_MEMORY}, which only works "
            f"within one node; vllm-omni 0.30.0 offers these for stages on different nodes: {offered}"
        )


_Ref = tuple[str, str, Origin | None]


def _edge_refs(applied: PlatformApplied) -> dict[tuple[int, int], _Ref]:
    """(source, target) -> (connector name, JSONPath, origin) for every edge a stage names."""
    refs: dict[tuple[int, int], _Ref] = {}
    for stage in applied.stages:
        sid = to_plain(stage.get("stage_id"))
        if not isinstance(sid, int):
            continue
        for key, prefix in (("input_connectors", "from_stage_"), ("output_connectors", "to_stage_")):
            wiring = stage.get(key)
            if not isinstance(wiring, Map):
                continue
            for name, ref in wiring.items():
                other = str(name).removeprefix(prefix)
                if not other.isdigit() or not isinstance(ref, Scalar):
                    continue
                pair = (int(other), sid) if key == "input_connectors" else (sid, int(other))
                refs.setdefault(
                    pair, (str(ref.value), jsonpath.join((key, name), jsonpath.stage(sid)), ref.origin)
                )
    return refs


def edges(applied: PlatformApplied, pipeline: PipelineInfo) -> list[Edge]:
    connectors = applied.config.get("connectors")
    refs = _edge_refs(applied)
    pairs = list(refs) + [p for p in PIPELINE_EDGES.get(pipeline.name or "", ()) if p not in refs]
    found = []
    for pair in sorted(pairs):
        name = refs[pair][0] if pair in refs else None
        spec = connectors.get(name) if isinstance(connectors, Map) and name is not None else None
        kind_node = spec.get("name") if isinstance(spec, Map) else None
        kind = str(kind_node.value) if isinstance(kind_node, Scalar) else SHARED_MEMORY
        found.append(Edge(pair[0], pair[1], name, kind))
    return found


def cross_node_problems(
    applied: PlatformApplied, pipeline: PipelineInfo, groups: list[NodeGroup]
) -> list[CrossNodeProblem]:
    """Shared-memory edges whose stages the placement puts on different nodes."""
    node_of = {use.stage_id: (group.index, use.label) for group in groups for use in group.stages}
    refs = _edge_refs(applied)
    stage_at = {
        sid: (jsonpath.stage(sid), s.origin)
        for s in applied.stages
        if (sid := to_plain(s.get("stage_id"))) is not None
    }
    problems = []
    for edge in edges(applied, pipeline):
        if edge.kind != SHARED_MEMORY or edge.source not in node_of or edge.target not in node_of:
            continue
        (a, a_label), (b, b_label) = node_of[edge.source], node_of[edge.target]
        if a != b:
            ref = refs.get((edge.source, edge.target))
            where, origin = (ref[1], ref[2]) if ref else stage_at.get(edge.target, ("$.stages", None))
            problems.append(CrossNodeProblem(edge, a_label, b_label, a, b, where, origin))
    return problems
