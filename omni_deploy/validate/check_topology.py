"""Stage ids, connector wiring, skipped platform entries, and mappings an overlay replaced whole."""

from __future__ import annotations

import difflib
import re

from omni_deploy import codes, jsonpath
from omni_deploy.config.merge import DEEP_MERGE_KEYS
from omni_deploy.config.nodes import Map, Origin, Scalar, Seq, child_path
from omni_deploy.knowledge.keys import CODE2WAV
from omni_deploy.validate.context import Context
from omni_deploy.validate.findings import Finding, at

_WIRE = {
    "input_connectors": re.compile(r"^from_stage_(\d+)$"),
    "output_connectors": re.compile(r"^to_stage_(\d+)$"),
}
_CODE2WAV_ONLY = {k.name for k in CODE2WAV}


def _stage_id(stage: Map) -> object:
    node = stage.get("stage_id")
    return node.value if isinstance(node, Scalar) else None


def _valid_id(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _stage_lists(ctx: Context) -> list[tuple[str, Seq]]:
    """Every stage list as written in each file of the chain, and the merged platform lists."""
    lists: list[tuple[str, Seq]] = []
    for doc in ctx.deployment.resolved.documents.values():
        stages = doc.get("stages")
        if isinstance(stages, Seq):
            lists.append(("$.stages", stages))
        platforms = doc.get("platforms")
        if isinstance(platforms, Map):
            for plat, section in platforms.items():
                entries = section.get("stages") if isinstance(section, Map) else None
                if isinstance(entries, Seq):
                    lists.append((f"{child_path('$.platforms', plat)}.stages", entries))
    return lists


def _topology(ctx: Context) -> dict[int, str] | None:
    """stage_id -> role (omni-deploy's names for MiniCPM-o) or execution type, in the target."""
    from omni_deploy.validate.check_pipeline import target_stages

    stages = target_stages(ctx)
    known = ctx.deployment.pipeline.known.stages if ctx.deployment.pipeline.known else None
    if stages is None:
        return known
    return {sid: (known or {}).get(sid, kind) for sid, kind in stages.items()}


def check_stage_ids(ctx: Context) -> list[Finding]:
    findings: list[Finding] = []
    topology = _topology(ctx)
    for path, stages in _stage_lists(ctx):
        seen: dict[object, int] = {}
        for i, stage in enumerate(stages.items):
            if not isinstance(stage, Map):
                continue
            node = stage.get("stage_id")
            where = f"{path}[{i}].stage_id"
            if node is None:
                findings.append(
                    at(stage.origin, ctx.file, codes.E321, f"{path}[{i}]", "stage entry has no stage_id")
                )
                continue
            value = node.value if isinstance(node, Scalar) else None
            if not _valid_id(value):
                findings.append(
                    at(
                        node.origin,
                        ctx.file,
                        codes.E321,
                        where,
                        f"stage_id must be a non-negative integer, got {value!r}",
                    )
                )
                continue
            if value in seen:
                findings.append(
                    at(
                        node.origin,
                        ctx.file,
                        codes.E320,
                        where,
                        f"stage_id {value} appears twice in this list "
                        f"(also entry {seen[value]}); the later one silently wins",
                    )
                )
            seen[value] = i
            if topology is not None and value not in topology:
                roles = ", ".join(f"{k} {v}" for k, v in topology.items())
                findings.append(
                    at(
                        node.origin,
                        ctx.file,
                        codes.W322,
                        where,
                        f"{ctx.deployment.pipeline.name} in vllm-omni {ctx.target_reads.version} has no stage "
                        f"{value} (its stages: {roles}): vllm-omni ignores this entry"
                        + (
                            f" ({seen_at})"
                            if (seen_at := ctx.target_reads.fact("extra_stage_ignored"))
                            else ""
                        ),
                    )
                )
    return findings


def check_platform_entries(ctx: Context) -> list[Finding]:
    existing = {_stage_id(s) for s in ctx.deployment.stages()}
    findings = []
    platforms = ctx.deployment.platform_sections()
    for plat, section in platforms.items() if platforms else []:
        entries = section.get("stages") if isinstance(section, Map) else None
        for i, entry in enumerate(entries.items if isinstance(entries, Seq) else []):
            if not isinstance(entry, Map):
                continue
            sid = _stage_id(entry)
            if _valid_id(sid) and sid not in existing:
                findings.append(
                    at(
                        entry.origin,
                        ctx.file,
                        codes.W323,
                        f"{child_path('$.platforms', plat)}.stages[{i}]",
                        f"platforms.{plat} entry for stage_id {sid}, which no stage has: vllm-omni skips it silently",
                    )
                )
    return findings


def wired_connectors(ctx: Context) -> tuple[str, Map | None]:
    """(path, mapping) of the connectors the connector set-up resolves names in: the top-level
    `runtime.connectors` where the target reads it (it wins), else `connectors`."""
    runtime = ctx.deployment.config.get("runtime")
    inner = runtime.get("connectors") if isinstance(runtime, Map) else None
    if ctx.target_reads.fact("runtime_connectors") and isinstance(inner, Map):
        return "$.runtime.connectors", inner
    return "$.connectors", ctx.deployment.connectors()


def _nameless(
    ctx: Context, findings: list[Finding], where: str, node: Map, origin: object, path: str
) -> None:
    at_line = ctx.target_reads.fact("connector_name_required")
    if at_line and "name" not in node:
        findings.append(
            at(
                origin if isinstance(origin, Origin) else None,
                ctx.file,
                codes.E334,
                path,
                f"connector {where} has no name: the connector set-up raises KeyError('name') ({at_line}), "
                "which vllm-omni logs as a warning and starts with no connector configuration"
                + (
                    f" ({swallowed})"
                    if (swallowed := ctx.target_reads.fact("transfer_config_swallowed"))
                    else ""
                ),
                "name the connector class, e.g. name: SharedMemoryConnector",
            )
        )


def check_connectors(ctx: Context) -> list[Finding]:
    findings: list[Finding] = []
    defined_at, connectors = wired_connectors(ctx)
    names = [str(k) for k in connectors.entries] if connectors else []
    inline_ok = bool(ctx.target_reads.fact("inline_connectors"))
    stage_ids = {_stage_id(s) for s in ctx.deployment.stages()}
    for i, stage in enumerate(ctx.deployment.stages()):
        for field, pattern in _WIRE.items():
            wiring = stage.get(field)
            if not isinstance(wiring, Map):
                continue
            for key, entry in wiring.entries.items():
                path = child_path(f"$.stages[{i}].{field}", key)
                match = pattern.match(str(key))
                if match is None:
                    expected = "from_stage_N" if field == "input_connectors" else "to_stage_N"
                    findings.append(
                        at(
                            entry.key_origin,
                            ctx.file,
                            codes.W333,
                            path,
                            f"'{key}' is not of the form {expected}; vllm-omni will not wire it",
                        )
                    )
                elif int(match.group(1)) not in stage_ids:
                    findings.append(
                        at(
                            entry.key_origin,
                            ctx.file,
                            codes.E331,
                            path,
                            f"stage {match.group(1)} does not exist",
                        )
                    )
                if isinstance(entry.node, Map) and inline_ok:
                    _nameless(ctx, findings, f"written inline at {path}", entry.node, entry.key_origin, path)
                    continue
                value = entry.node.value if isinstance(entry.node, Scalar) else None
                if str(value) in names and connectors is not None:
                    target = connectors.get(value)
                    if isinstance(target, Map):
                        _nameless(ctx, findings, f"'{value}'", target, connectors.entries[value].key_origin,
                                  child_path(defined_at, value))  # fmt: skip
                if str(value) not in names:
                    close = difflib.get_close_matches(str(value), names, n=1)
                    hint = (
                        f"did you mean '{close[0]}'?"
                        if close
                        else (
                            f"defined connectors: {', '.join(names)}"
                            if names
                            else "the file defines no connectors"
                        )
                    )
                    findings.append(
                        at(
                            entry.node.origin,
                            ctx.file,
                            codes.E330,
                            path,
                            f"connector {value!r} is not defined under {defined_at[2:]} (vllm-omni's "
                            "connector set-up fails, and it starts with no connector configuration)",
                            hint,
                        )
                    )
    findings.extend(_misplaced_code2wav(ctx))
    return findings


def _misplaced_code2wav(ctx: Context) -> list[Finding]:
    if not ctx.deployment.pipeline.is_minicpmo or ctx.deployment.connectors() is None:
        return []
    target = ctx.deployment.code2wav_connector()
    target_name = target[0] if target else None
    findings = []
    for name, connector in ctx.deployment.connectors().items():  # type: ignore[union-attr]
        if str(name) == target_name or not isinstance(connector, Map):
            continue
        extra = connector.get("extra")
        for key, entry in extra.entries.items() if isinstance(extra, Map) else []:
            if key in _CODE2WAV_ONLY:
                where = (
                    f"connector '{target_name}'"
                    if target_name
                    else "the connector in stage 2's input_connectors"
                )
                findings.append(
                    at(
                        entry.key_origin,
                        ctx.file,
                        codes.W332,
                        child_path(jsonpath.connector_extra(name), key),
                        f"Code2Wav option '{key}' in connector '{name}', which stage 2 does not receive: never read",
                        f"Code2Wav reads {where}",
                    )
                )
    return findings


def check_replaced_mappings(ctx: Context) -> list[Finding]:
    findings = []
    for dropped in ctx.deployment.resolved.report.dropped:
        kept = ", ".join(sorted(DEEP_MERGE_KEYS))
        findings.append(
            at(
                dropped.key_origin,
                ctx.file,
                codes.W340,
                dropped.path,
                f"this mapping replaces the base's whole (base at {dropped.base_origin.location}), dropping "
                f"{', '.join(dropped.lost)}",
                f"vllm-omni merges only {kept} key by key; repeat the base's keys to keep them",
            )
        )
    return findings
