"""The connector set-up as vllm-omni runs it (load_omni_transfer_config): what makes it fail, which
vllm-omni catches, logs as a warning, and then starts with no connector configuration at all.

The set-up walks the stages in order, each one's input_connectors then its output_connectors; the
first connector registered for an edge stays and a later one of another class is a ValueError; a
wired connector's `extra` is taken with dict() (knowledge facts edge_connector_types_differ,
connector_extra_dict; distributed/omni_connectors/utils/initialization.py)."""

from __future__ import annotations

from collections.abc import Iterator

from omni_deploy.common import codes, jsonpath
from omni_deploy.config.nodes import Entry, Map, Scalar, child_path
from omni_deploy.knowledge.target import TargetReads
from omni_deploy.validate.check_topology import wired_connectors
from omni_deploy.validate.context import Context
from omni_deploy.validate.findings import Finding, at
from omni_deploy.validate.rules import emits

_SIDES = (("input_connectors", "from_stage_"), ("output_connectors", "to_stage_"))


def _wirings(ctx: Context) -> Iterator[tuple[str, str, Entry, str]]:
    """(stage id, wiring key, its entry, its path) in the set-up's order."""
    for index, stage in enumerate(ctx.deployment.stages()):
        sid_node = stage.get("stage_id")
        sid = str(sid_node.value) if isinstance(sid_node, Scalar) else None
        where = jsonpath.stage(sid_node.value) if isinstance(sid_node, Scalar) else f"$.stages[{index}]"
        for field, _ in _SIDES:
            wiring = stage.get(field)
            for key, entry in wiring.entries.items() if isinstance(wiring, Map) and sid is not None else []:
                yield str(sid), f"{field}:{key}", entry, child_path(f"{where}.{field}", key)


def _edge(sid: str, wiring: str) -> tuple[str, str] | None:
    field, key = wiring.split(":", 1)
    if field == "input_connectors" and key.startswith("from_stage_"):
        return key[len("from_stage_") :], sid
    if field == "output_connectors" and key.startswith("to_stage_"):
        return sid, key[len("to_stage_") :]
    return None


def _extra_line(reads: TargetReads, output: bool, inline: bool) -> str | None:
    """The line whose dict(extra) raises: the set-up has one per side (input, output) and form
    (a named connector's, an inline one's), identical in text."""
    name = "connector_extra_dict" + ("_output" if output else "") + ("_inline" if inline else "")
    return reads.fact(name)


@emits(codes.E335)
def check_connector_setup(ctx: Context) -> list[Finding]:
    """Connector set-up failures the static wiring checks do not see.

    E335:
        What it does: reports a wired connector whose `extra` is null, and a second connector of
            another class on an edge a connector was already registered for (the set-up's order:
            stages in order, inputs then outputs).
        Why: the connector set-up raises (dict(None); "Connector type mismatch for edge"), and
            vllm-omni catches it, logs a warning and starts with no connector configuration: every
            stage that needs one fails on the first request.
        Fails:
            base_config: minicpmo_4_5_turn.yaml
            stages:
              - stage_id: 2
                input_connectors:
                  from_stage_1: {name: MooncakeConnector, extra: {}}
        Passes:
            base_config: minicpmo_4_5_turn.yaml
            stages:
              - stage_id: 2
                input_connectors:
                  from_stage_1: connector_of_shared_memory
    """
    reads = ctx.target_reads
    mismatch_at, extra_at = reads.fact("edge_connector_types_differ"), reads.fact("connector_extra_dict")
    swallowed = reads.fact("transfer_config_swallowed")
    tail = (
        f"; vllm-omni logs it as a warning and starts with no connector configuration ({swallowed})"
        if swallowed
        else ""
    )
    _, named = wired_connectors(ctx)
    findings: list[Finding] = []
    registered: dict[tuple[str, str], tuple[str, str]] = {}  # edge -> (class, where it was set)
    null_extras: set[int] = set()
    for sid, wiring, entry, path in _wirings(ctx):
        node = entry.node
        connector = node if isinstance(node, Map) else None
        if isinstance(node, Scalar) and named is not None:
            found = named.get(node.value)
            connector = found if isinstance(found, Map) else None
        if connector is None:
            continue  # undefined or malformed: E330 / E334 say so
        extra = connector.entries.get("extra")
        if (
            extra_at
            and extra is not None
            and isinstance(extra.node, Scalar)
            and extra.node.value is None
            and id(extra) not in null_extras  # a named one wired twice raises at its first wiring only
        ):
            null_extras.add(id(extra))
            raised_at = (
                _extra_line(reads, wiring.startswith("output_connectors:"), connector is node) or extra_at
            )
            findings.append(
                at(extra.key_origin, ctx.file, codes.E335, f"{path}.extra" if connector is node else path,
                   f"the wired connector's extra is null: the connector set-up takes dict(None) and "
                   f"raises ({raised_at}){tail}", "write extra: {} or leave it out"))  # fmt: skip
        name = connector.get("name")
        edge = _edge(sid, wiring)
        if edge is None or not isinstance(name, Scalar):
            continue
        first = registered.setdefault(edge, (str(name.value), path))
        if mismatch_at and first[0] != str(name.value):
            findings.append(
                at(entry.key_origin, ctx.file, codes.E335, path,
                   f"edge {edge[0]}->{edge[1]} was registered as {first[0]} at {first[1]}; this one is "
                   f"{name.value}: the connector set-up raises a type mismatch ({mismatch_at}){tail}",
                   "use the same connector class on both ends of the edge"))  # fmt: skip
    return findings
