"""Stage ids, connector wiring, skipped platform entries, and mappings an overlay replaced whole."""

from __future__ import annotations

import json
import re
from collections.abc import Hashable

from omni_deploy.common import codes, jsonpath
from omni_deploy.config.merge import DEEP_MERGE_KEYS
from omni_deploy.config.nodes import Entry, Map, Node, Origin, Scalar, Seq, child_path, path_string, to_plain
from omni_deploy.knowledge.keys import CODE2WAV, NO_DEFAULT, by_place
from omni_deploy.validate.context import Context
from omni_deploy.validate.findings import Finding, at
from omni_deploy.validate.rules import emits

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


@emits(codes.E320, codes.E321, codes.W322, codes.W324, codes.W325)
def check_stage_ids(ctx: Context) -> list[Finding]:
    """Stage ids in every stage list of every file of the chain (and of each platform section).

    E320:
        What it does: reports a stage_id that appears twice in one stage list, for a target that starts
            from its legacy stage configs (before 0.30.0; from 0.30.0 on, W324).
        Why: vllm-omni merges entries by stage_id and keeps the later one, so the first entry's
            settings are lost without a word.
        Fails:
            # options: --target-version 0.28.0
            base_config: minicpmo_4_5_turn.yaml
            stages:
              - stage_id: 2
                max_num_seqs: 4
              - stage_id: 2
                max_num_seqs: 8
        Passes:
            # options: --target-version 0.28.0
            base_config: minicpmo_4_5_turn.yaml
            stages:
              - stage_id: 2
                max_num_seqs: 8
    E321:
        What it does: requires every stage entry's stage_id to be a non-negative integer.
        Why: vllm-omni matches stages, connectors (from_stage_N) and platform entries by this number;
            any other value matches nothing.
        Fails:
            base_config: minicpmo_4_5_turn.yaml
            stages:
              - stage_id: one
        Passes:
            base_config: minicpmo_4_5_turn.yaml
            stages:
              - stage_id: 1
    W324:
        What it does: from 0.30.0 on, reports a stage_id that appears twice in one stage list and says
            which entry wins: in a file with a base_config, both entries are merged onto the base's
            stage in order (the later value wins a key both set); in the root file, the later entry
            replaces the earlier one whole.
        Why: vllm-omni starts either way (run on 0.30.0's own start-up code); one entry's settings are
            silently lost, which is seldom meant.
        Fails:
            base_config: minicpmo_4_5_turn.yaml
            stages:
              - stage_id: 2
                max_num_seqs: 4
              - stage_id: 2
                max_num_seqs: 8
        Passes:
            base_config: minicpmo_4_5_turn.yaml
            stages:
              - stage_id: 2
                max_num_seqs: 8
    W325:
        What it does: from 0.30.0 on, reports a quoted stage_id ("1"): vllm-omni starts, but matches
            stages by integer id, so the entry is applied to no stage.
        Why: every setting of the entry is silently dropped; the stage runs on its base's values.
        Fails:
            base_config: minicpmo_4_5_turn.yaml
            stages:
              - stage_id: "1"
                max_num_seqs: 8
        Passes:
            base_config: minicpmo_4_5_turn.yaml
            stages:
              - stage_id: 1
                max_num_seqs: 8
    W322:
        What it does: reports a stage id the target's pipeline does not have (MiniCPM-o 4.5 in
            0.30.0: Thinker 0, Talker 1, Code2Wav 2), from the release's own registry.
        Why: vllm-omni skips a stage the pipeline does not define, so its settings configure
            nothing; most often the id is a typo or the pipeline has other stages in this release.
        Fails:
            base_config: minicpmo_4_5_turn.yaml
            stages:
              - stage_id: 3
                max_num_seqs: 4
        Passes:
            base_config: minicpmo_4_5_turn.yaml
            stages:
              - stage_id: 2
                max_num_seqs: 4
    """
    findings: list[Finding] = []
    topology = _topology(ctx)
    # From 0.30.0 (the typed config at start-up) both are known to start: run on its own code.
    starts = bool(ctx.target_reads.fact("typed_config_at_startup"))
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
            if starts and isinstance(value, str) and value.strip().isdigit():
                findings.append(at(node.origin, ctx.file, codes.W325, where, _quoted_id(value)))
                continue
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
            if value in seen and starts:
                message = _twice(value, seen[value], i, node.origin.file, ctx)
                findings.append(at(node.origin, ctx.file, codes.W324, where, message))
            elif value in seen:
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
                        f"{jsonpath.stage(value, path)}.stage_id",
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


def _quoted_id(value: str) -> str:
    return (
        f"stage_id {value!r} is a string: vllm-omni starts, but looks stages up by integer id, so this "
        f"entry is applied to no stage (its settings are dropped); write {value.strip()} unquoted"
    )


def _twice(value: object, first: int, later: int, file: str, ctx: Context) -> str:
    """What vllm-omni does with two entries of one id in the list of `file` (run on 0.30.0)."""
    from pathlib import Path

    root = Path(file).resolve() == Path(ctx.deployment.chain[-1]).resolve() if ctx.deployment.chain else True
    if root:
        how = f"the later entry ({later}) replaces entry {first} whole: entry {first}'s settings are dropped"
    else:
        how = (
            f"both are merged onto the base's stage {value} in order: for a key both set, entry {later}'s "
            "value wins"
        )
    return (
        f"stage_id {value} appears twice in this list (entries {first} and {later}); vllm-omni starts: {how}"
    )


@emits(codes.W323)
def check_platform_entries(ctx: Context) -> list[Finding]:
    """Platform sections' stage entries against the stages the file has.

    W323:
        What it does: reports a platform section's stage entry whose stage_id no stage of the merged
            file has.
        Why: vllm-omni applies a platform entry to the stage of the same id and skips the others
            silently: the setting never reaches a stage.
        Fails:
            base_config: minicpmo_4_5_turn.yaml
            platforms:
              cuda:
                stages:
                  - stage_id: 7
                    max_num_seqs: 2
        Passes:
            base_config: minicpmo_4_5_turn.yaml
            platforms:
              cuda:
                stages:
                  - stage_id: 2
                    max_num_seqs: 2
    """
    existing = {_stage_id(s) for s in ctx.deployment.stages()}
    findings = []
    platforms = ctx.deployment.platform_sections()
    for plat, section in platforms.items() if platforms else []:
        entries = section.get("stages") if isinstance(section, Map) else None
        for entry in entries.items if isinstance(entries, Seq) else []:
            if not isinstance(entry, Map):
                continue
            sid = _stage_id(entry)
            if _valid_id(sid) and sid not in existing:
                findings.append(
                    at(
                        entry.origin,
                        ctx.file,
                        codes.W323,
                        jsonpath.stage(sid, f"{child_path('$.platforms', plat)}.stages"),
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


@emits(codes.E330, codes.E331, codes.W332, codes.W333, codes.E334)
def check_connectors(ctx: Context) -> list[Finding]:
    """Connector wiring: stage input_connectors / output_connectors against the connectors defined,
    and Code2Wav options placed in a connector that Code2Wav does not read.

    E330:
        What it does: reports a stage's input or output connector whose name is not defined under
            `connectors` (with "did you mean" for a near name).
        Why: vllm-omni resolves the name only when it builds the connectors at server start, and
            stops there.
        Fails:
            base_config: minicpmo_4_5_turn.yaml
            stages:
              - stage_id: 1
                output_connectors:
                  to_stage_2: connector_of_shared_mem
        Passes:
            base_config: minicpmo_4_5_turn.yaml
            stages:
              - stage_id: 1
                output_connectors:
                  to_stage_2: connector_of_shared_memory
    E331:
        What it does: reports a from_stage_N / to_stage_N wiring whose stage N does not exist.
        Why: the edge joins the stage to nothing: vllm-omni builds a connector no stage reads or
            writes, and the data meant for it goes elsewhere.
        Fails:
            base_config: minicpmo_4_5_turn.yaml
            stages:
              - stage_id: 1
                output_connectors:
                  to_stage_3: connector_of_shared_memory
        Passes:
            base_config: minicpmo_4_5_turn.yaml
            stages:
              - stage_id: 1
                output_connectors:
                  to_stage_2: connector_of_shared_memory
    W332:
        What it does: reports a MiniCPM-o Code2Wav option in the extra of a connector, named or
            inline, other than the one vllm-omni registers first for the edge into stage 2 (stage 1's
            output_connectors.to_stage_2 before stage 2's input_connectors.from_stage_1), saying
            whether the edge's other side names it; a second side that says the same is not reported.
        Why: Code2Wav reads its options from that one connector's extra only (the second wiring of an
            edge is only compared by name); elsewhere they are never read, and the stage runs with
            its defaults.
        Fails:
            base_config: minicpmo_4_5_turn.yaml
            connectors:
              thinker_to_talker:
                name: SharedMemoryConnector
                extra:
                  cfm_max_graphs: 16
            stages:
              - stage_id: 0
                output_connectors:
                  to_stage_1: thinker_to_talker
        Passes:
            base_config: minicpmo_4_5_turn.yaml
            connectors:
              connector_of_shared_memory:
                extra:
                  cfm_max_graphs: 16
    W333:
        What it does: reports a wiring key not of the form from_stage_N (input_connectors) or
            to_stage_N (output_connectors).
        Why: vllm-omni wires only keys of that form; any other key is ignored, and the edge falls back
            to the automatic connector.
        Fails:
            base_config: minicpmo_4_5_turn.yaml
            stages:
              - stage_id: 1
                output_connectors:
                  to_code2wav: connector_of_shared_memory
        Passes:
            base_config: minicpmo_4_5_turn.yaml
            stages:
              - stage_id: 1
                output_connectors:
                  to_stage_2: connector_of_shared_memory
    E334:
        What it does: for a target whose connector set-up needs it, reports a wired connector (one a
            stage names in its input or output connectors) that has no `name`.
        Why: the set-up raises KeyError('name'), which vllm-omni only logs: the server starts with no
            connector configuration, and the stages cannot pass data.
        Fails:
            pipeline: minicpmo_4_5
            connectors:
              shm:
                extra:
                  codec_chunk_frames: 25
            stages:
              - stage_id: 0
                devices: "0"
              - stage_id: 1
                devices: "0"
                output_connectors:
                  to_stage_2: shm
              - stage_id: 2
                devices: "0"
                input_connectors:
                  from_stage_1: shm
        Passes:
            pipeline: minicpmo_4_5
            connectors:
              shm:
                name: SharedMemoryConnector
                extra:
                  codec_chunk_frames: 25
            stages:
              - stage_id: 0
                devices: "0"
              - stage_id: 1
                devices: "0"
                output_connectors:
                  to_stage_2: shm
              - stage_id: 2
                devices: "0"
                input_connectors:
                  from_stage_1: shm
    """
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
                sid_here = _stage_id(stage)
                where = jsonpath.stage(sid_here) if _valid_id(sid_here) else f"$.stages[{i}]"
                path = child_path(f"{where}.{field}", key)
                findings += _wiring_key(ctx, field, str(key), pattern.match(str(key)), entry, path, stage_ids)
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
                    findings.append(_undefined(ctx, value, names, defined_at, entry.node.origin, path))
    findings.extend(_misplaced_code2wav(ctx))
    return findings


def _wiring_key(
    ctx: Context,
    field: str,
    key: str,
    match: re.Match[str] | None,
    entry: Entry,
    path: str,
    stage_ids: set[object],
) -> list[Finding]:
    """W333 for a key not of the form from_stage_N / to_stage_N, E331 for a stage N that is not there."""
    if match is None:
        expected = "from_stage_N" if field == "input_connectors" else "to_stage_N"
        message = f"'{key}' is not of the form {expected}; vllm-omni will not wire it"
        return [at(entry.key_origin, ctx.file, codes.W333, path, message)]
    if int(match.group(1)) not in stage_ids:
        return [at(entry.key_origin, ctx.file, codes.E331, path, f"stage {match.group(1)} does not exist")]
    return []


def _undefined(
    ctx: Context, value: object, names: list[str], defined_at: str, origin: Origin, path: str
) -> Finding:
    """E330: a wired connector name the file does not define (with "did you mean")."""
    import difflib  # only for a connector name that is wrong: start-up stays light

    close = difflib.get_close_matches(str(value), names, n=1)
    if close:
        hint = f"did you mean '{close[0]}'?"
    else:
        hint = f"defined connectors: {', '.join(names)}" if names else "the file defines no connectors"
    return at(
        origin,
        ctx.file,
        codes.E330,
        path,
        f"connector {value!r} is not defined under {defined_at[2:]} (vllm-omni's "
        "connector set-up fails, and it starts with no connector configuration)",
        hint,
    )


def _misplaced_code2wav(ctx: Context) -> list[Finding]:
    """W332 for Code2Wav options in every connector extra Code2Wav does not read: a named connector
    off the 1->2 edge, and the edge's other side (named or inline), which vllm-omni only compares by
    name with the first connector registered for the edge (initialization.py:346-355, 376-385)."""
    known = ctx.deployment.pipeline.known
    if known is None or known.code2wav_stage is None:
        return []
    wiring = ctx.deployment.code2wav_wiring()
    winner = wiring[0] if wiring else None
    config = ctx.deployment.config
    if winner is None:
        reads = "the connector of the 1->2 edge"
    elif winner[0] == "connectors":
        reads = f"connector '{winner[1]}'"
    else:
        reads = f"the inline connector at {path_string([*winner, 'extra'], config)}"
    read = _plain_extra(wiring[1]) if wiring else {}
    edge = _edge_sides(ctx, known.code2wav_stage)
    first = edge.get(tuple(winner)) if winner else None
    findings: list[Finding] = []
    for name, connector in (ctx.deployment.connectors() or Map({})).items():
        if isinstance(connector, Map) and ["connectors", str(name)] != winner:
            side = edge.get(("connectors", str(name)))
            findings += _code2wav_keys(ctx, connector, jsonpath.connector_extra(name), f"connector '{name}'",
                                       side, (reads, first), read)  # fmt: skip
    stages = config.get("stages")
    for index, stage in enumerate(stages.items if isinstance(stages, Seq) else []):
        for field in ("input_connectors", "output_connectors"):
            wires = stage.get(field) if isinstance(stage, Map) else None
            for key, entry in wires.entries.items() if isinstance(wires, Map) else []:
                parts: list[Hashable] = ["stages", index, field, key]
                if isinstance(entry.node, Map) and parts != winner:
                    where = path_string([*parts, "extra"], config)
                    side = edge.get(("stages", index, field, str(key)))
                    what = f"the inline connector at {path_string(parts, config)}"
                    findings += _code2wav_keys(ctx, entry.node, where, what,
                                               side, (reads, first), read)  # fmt: skip
    return findings


def _edge_sides(ctx: Context, receiver: int) -> dict[tuple[Hashable, ...], str]:
    """The wirings of the edge into Code2Wav: a named connector ("connectors", NAME) or an inline
    one ("stages", i, FIELD, KEY) -> the side that names it, for messages."""
    sides: dict[tuple[Hashable, ...], str] = {}
    stages = ctx.deployment.config.get("stages")
    for index, stage in enumerate(stages.items if isinstance(stages, Seq) else []):
        sid = _stage_id(stage) if isinstance(stage, Map) else None
        for field, key, wanted in (
            ("input_connectors", f"from_stage_{receiver - 1}", receiver),
            ("output_connectors", f"to_stage_{receiver}", receiver - 1),
        ):
            wires = stage.get(field) if isinstance(stage, Map) and sid == wanted else None
            ref = wires.get(key) if isinstance(wires, Map) else None
            side = f"stage {sid}'s {field}.{key}"
            if isinstance(ref, Map):
                sides[("stages", index, field, key)] = side
            elif isinstance(ref, Scalar):
                sides.setdefault(("connectors", str(ref.value)), side)
    return sides


def _plain_extra(connector: Map) -> dict[object, object]:
    extra = to_plain(connector.get("extra"))
    return extra if isinstance(extra, dict) else {}


def _code2wav_keys(
    ctx: Context,
    connector: Map,
    where: str,
    what: str,
    side: str | None,
    winner: tuple[str, str | None],
    read: dict[object, object],
) -> list[Finding]:
    """W332 for each Code2Wav option in `connector`'s extra; `side`: which wiring of the edge into
    Code2Wav names it (None: none does); `winner`: the connector Code2Wav reads, and the side that
    registers it; `read`: its extra."""
    reads, first = winner
    extra = connector.get("extra")
    findings = []
    for key, entry in extra.entries.items() if isinstance(extra, Map) else []:
        if key not in _CODE2WAV_ONLY:
            continue
        if side is not None and key in read and read[key] == to_plain(entry.node):
            continue  # the edge's other side, saying what the read one says: harmless
        if side is None:
            why = "which is not the connector of the edge into Code2Wav"
        else:
            why = f"which {side} names, but {first or 'another wiring'} registers the edge's connector first and it wins"
        findings.append(
            at(
                entry.key_origin,
                ctx.file,
                codes.W332,
                child_path(where, key),
                f"Code2Wav option '{key}' in {what}, {why}: never read",
                f"Code2Wav reads {reads}; put it there",
            )
        )
    return findings


@emits(codes.W340)
def check_replaced_mappings(ctx: Context) -> list[Finding]:
    """Merges: mappings an overlay replaced whole instead of merging key by key.

    W340:
        What it does: reports a mapping in an overlay that replaces the base's mapping whole, naming
            the base's keys it drops.
        Why: helm, compose and kustomize users expect a deep merge; vllm-omni merges only a few
            mappings (sampling parameters, engine_extras) key by key and replaces the others, so the
            base's other keys silently fall back to their defaults.
        Fails:
            base_config: minicpmo_4_5_turn.yaml
            stages:
              - stage_id: 0
                limit_mm_per_prompt: {audio: 8}
        Passes:
            base_config: minicpmo_4_5_turn.yaml
            stages:
              - stage_id: 0
                limit_mm_per_prompt: {image: 64, audio: 8, video: 1}
    """
    findings = []
    kept = ", ".join(sorted(DEEP_MERGE_KEYS))
    for dropped in ctx.deployment.resolved.report.dropped:
        origins = dropped.lost_origins or (dropped.base_origin,) * len(dropped.lost)
        lost = "; ".join(
            f"{name} (base {origin.location}; now {_dropped_default(dropped.path, name)})"
            for name, origin in zip(dropped.lost, origins, strict=True)
        )
        findings.append(
            at(
                dropped.key_origin,
                ctx.file,
                codes.W340,
                dropped.path,
                f"this mapping replaces the base's whole (base at {dropped.base_origin.location}), dropping "
                f"{lost}; the effective value is the overlay's alone: {_brief(dropped.effective)}",
                f"vllm-omni merges only {kept} key by key; repeat the base's keys to keep them",
            )
        )
    return findings


# Which keys a dropped key's parent mapping holds, to say the default it falls back to.
_DEFAULT_PLACES = {"extra": ("code2wav", "connector_extra"), "duplex_session": ("duplex_session",)}


def _dropped_default(path: str, name: str) -> str:
    """What a key an overlay dropped reads as now: its default where omni-deploy knows it."""
    parts = [p for p in re.split(r"[.\[\]]", f"{path}.{name}") if p and not p.startswith("?")]
    key, parent = parts[-1], parts[-2] if len(parts) > 1 else ""
    places = _DEFAULT_PLACES.get(parent, ("stage",) if parent == "runtime" else ())
    for place in places:
        known = by_place(place).get(key)
        if known is not None and known.default is not NO_DEFAULT:
            return f"unset: its default {known.default!r} applies"
    return "unset: its default applies"


def _brief(node: Node | None, limit: int = 120) -> str:
    text = json.dumps(to_plain(node), default=str, separators=(", ", ": "))
    return text if len(text) <= limit else text[: limit - 3] + "..."
