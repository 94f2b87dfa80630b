"""Stage keys the target's typed config has no owner for (E315).

From 0.30.0 on, `vllm serve --omni` builds `VllmOmniConfig` before any engine starts
(entrypoints/cli/serve.py:1121 -> config/config_factory.py:415), and its ownership check
(config/omni_config.py:1299-1327) raises `ValueError: Stage N (llm_ar) has explicit engine
argument(s) with no structured config owner: ...` for every stage key no structured config owns:
`enable_lora`, `model_runner` or a Code2Wav connector option written on a stage, a typo of an
engine argument. What it checks is each stage's deploy fields that are set and its engine_extras
(the keys vllm-omni does not recognise fall there), after the platform is applied; the owned
sets come from vLLM's own config classes and are stored per release in
knowledge/typed_config_owners.json (generated in the vllm tier). Diffusion stages are checked by
another path upstream: a shared-only engine field (seed, kv_cache_dtype) or a key the diffusion
config does not own (enable_lora, a typo) is refused there (config/omni_config.py:1430-1436,
diffusion/data.py:199), reported as E315 too.
"""

from __future__ import annotations

from typing import Any

from omni_deploy.common import codes, jsonpath
from omni_deploy.config.nodes import Map, Origin, Scalar, to_plain
from omni_deploy.config.stage_schema import RESERVED_STAGE_KEYS, stage_fields_data
from omni_deploy.validate.check_pipeline import target_pipeline, target_stages
from omni_deploy.validate.context import Context
from omni_deploy.validate.findings import Finding, at
from omni_deploy.validate.rules import emits

_LLM = ("llm_ar", "llm_generation")


def _checked(stage: Map, legacy: set[str], reserved: frozenset[str]) -> dict[str, tuple[Origin, Map | None]]:
    """The keys upstream puts in the checked mapping: set fields, and every engine_extras key.

    `reserved`: the target's own wrapper keys (`_STAGE_RESERVED_KEYS` of that release: model_runner
    is one from 0.31 on, an engine extra, hence checked and refused, in 0.30.0). Any other key of
    the normalised stage is either a field of the target's StageDeployConfig or, for that release,
    an engine extra: checked either way."""
    out: dict[str, tuple[Origin, Map | None]] = {}
    for key, entry in stage.entries.items():
        if key in reserved or (isinstance(entry.node, Scalar) and entry.node.value is None):
            continue
        out[str(key)] = (entry.key_origin, entry.node if isinstance(entry.node, Map) else None)
    extras = stage.get("engine_extras")
    for key, entry in extras.entries.items() if isinstance(extras, Map) else []:
        if str(key) not in legacy:
            out[str(key)] = (entry.key_origin, entry.node if isinstance(entry.node, Map) else None)
    return out


@emits(codes.I308)
def check_owners_known(ctx: Context) -> list[Finding]:
    """Says where the target's typed-config ownership rule comes from when it is not its own.

    I308:
        What it does: for a target whose start-up builds the typed config, says when the owned stage
            keys E315 checks against are borrowed from a release whose ownership code is the same
            (compared by AST digest, not by version number), or unknown (then E315 is not checked).
        Why: the owners come from the release's own vLLM classes; applying another release's to
            this code could call a good file refused, or a refused one good.
        Fails:
            # options: --target-version 0.32.0
            base_config: minicpmo_4_5_turn.yaml
        Passes:
            # options: --target-version 0.32.0rc1
            base_config: minicpmo_4_5_turn.yaml
    """
    reads = ctx.target_reads
    owners, source = reads.owners_status()
    if not source or (owners is not None and reads.read_from is None):
        return []
    said = f"E315 checks stage keys against {source}" if owners else f"E315 is not checked: {source}"
    return [at(None, ctx.file, codes.I308, "$", said)]


@emits(codes.E315)
def check_stage_owners(ctx: Context) -> list[Finding]:
    """Stage keys the target's typed config has no structured owner for.

    E315:
        What it does: for a target whose start-up builds a typed config (0.30.0), checks every key of
            each LLM stage (after the platform section) against the fields that config owns for the
            stage's execution type, from the release's own code; on a diffusion stage, the shared
            engine fields it refuses (seed, kv_cache_dtype) and the keys its diffusion config lacks.
        Why: that release refuses to start on a stage key no structured config owns ("explicit engine
            argument(s) with no structured config owner"), minutes into a launch.
        Fails:
            base_config: minicpmo_4_5_turn.yaml
            stages:
              - stage_id: 1
                enable_lora: true
        Passes:
            base_config: minicpmo_4_5_turn.yaml
            stages:
              - stage_id: 1
                max_num_seqs: 8
    """
    owners = ctx.target_reads.owners()
    stages = target_stages(ctx)
    if owners is None or stages is None:
        return []
    name, _ = target_pipeline(ctx)
    legacy = set(owners["legacy_metadata_extras"])
    reserved = _reserved(ctx)
    found: dict[tuple[str, int, str], tuple[Origin, str, list[str], str]] = {}
    diffusion: dict[tuple[str, int, str], tuple[Origin, str, list[str], str]] = {}
    for platform, view in ctx.applied.items():
        for stage in view.stages:
            sid = to_plain(stage.get("stage_id"))
            kind = stages.get(sid) if isinstance(sid, int) else None
            if kind == "diffusion":
                _note_diffusion(
                    diffusion, _diffusion_refused(ctx, stage, owners, legacy, reserved), str(sid), platform
                )
            if kind not in _LLM:
                continue
            for field, where in _unowned(stage, owners, kind, legacy, reserved):
                spot = found.setdefault((where.file, where.line, field), (where, str(sid), [], kind))
                spot[2].append(platform)
    out = []
    for (_, _, field), (origin, sid, platforms, kind) in sorted(found.items()):
        message = (
            f"vllm-omni {ctx.target_reads.version}'s typed config has no owner for '{field}' on stage {sid} "
            f"({kind} in {name}) on {', '.join(platforms)}: it refuses to start "
            f'("Stage {sid} ({kind}) has explicit engine argument(s) with no structured config owner", '
            f"{owners['check_at']})"
        )
        path = jsonpath.join(field.split("."), jsonpath.stage(int(sid)))
        out.append(at(origin, ctx.file, codes.E315, path, message, _hint(field, ctx)))
    for (_, _, field), (origin, sid, platforms, why) in sorted(diffusion.items()):
        message = (
            f"vllm-omni {ctx.target_reads.version} refuses '{field}' on diffusion stage {sid} of {name} on "
            f"{', '.join(platforms)}: {why}"
        )
        out.append(at(origin, ctx.file, codes.E315, jsonpath.child(jsonpath.stage(int(sid)), field), message))
    return out


# The shared engine fields a diffusion stage refuses (vllm-omni 0.30.0
# config/omni_config.py:103, _DIFFUSION_SHARED_ONLY_ENGINE_FIELDS; knowledge fact diffusion_shared_only).
_DIFFUSION_SHARED_ONLY = frozenset({"kv_cache_dtype", "seed"})


def _reserved(ctx: Context) -> frozenset[str]:
    """The target's stage wrapper keys; for code whose schema is not known, the keys every release
    reserves (the narrowest set: nothing is left unchecked silently)."""
    own = ctx.target_reads.stage_reserved()
    if own is not None:
        return own
    return frozenset.intersection(
        RESERVED_STAGE_KEYS, *(frozenset(e["reserved"]) for e in stage_fields_data().values())
    )


def _unowned(
    stage: Map, owners: dict[str, Any], kind: str, legacy: set[str], reserved: frozenset[str]
) -> list[tuple[str, Origin]]:
    """(key, where) of an LLM stage's keys (and parallel_config names) its typed config does not own."""
    owned = set(owners["owned"][kind])
    parallel_names = set(owners["parallel_config"][kind])
    out = []
    for key, (origin, node) in _checked(stage, legacy, reserved).items():
        if key not in owned:
            out.append((key, origin))
        if key == "parallel_config" and node is not None:
            out += [
                (f"parallel_config.{k}", e.key_origin)
                for k, e in node.entries.items()
                if str(k) not in parallel_names
            ]
    return out


def _note_diffusion(
    found: dict[tuple[str, int, str], tuple[Origin, str, list[str], str]],
    refused: list[tuple[str, Origin, str]],
    sid: str,
    platform: str,
) -> None:
    for field, where, why in refused:
        found.setdefault((where.file, where.line, field), (where, sid, [], why))[2].append(platform)


def _diffusion_refused(
    ctx: Context, stage: Map, owners: dict[str, Any], legacy: set[str], reserved: frozenset[str]
) -> list[tuple[str, Origin, str]]:
    """(key, where, why) for each key a diffusion stage's typed config path refuses: a shared-only
    engine field (config/omni_config.py:1430-1436), else a key its diffusion config does not own
    (diffusion/data.py:199)."""
    reads = ctx.target_reads
    shared_at, unknown_at = reads.fact("diffusion_shared_only"), reads.fact("diffusion_unknown_field")
    owned = set(owners["owned"].get("diffusion", ()))
    out = []
    for key, (origin, _) in _checked(stage, legacy, reserved).items():
        if shared_at and key in _DIFFUSION_SHARED_ONLY:
            why = (f"a diffusion stage cannot consume the shared engine field ({shared_at}); set it per "
                   "request (sampling parameters) or use the diffusion-owned field")  # fmt: skip
            out.append((key, origin, why))
        elif unknown_at and owned and key not in owned:
            out.append((key, origin, f"it is no field of the diffusion config ({unknown_at})"))
    return out


def _hint(field: str, ctx: Context) -> str | None:
    from omni_deploy.knowledge.readers import table

    if field in table("code2wav"):
        return (
            f"a Code2Wav option is read only from {ctx.deployment.code2wav_extra_path}, the extra of the "
            "connector first registered for the edge into stage 2"
        )
    if field == "model_runner":
        return "model_runner is a top-level (or platform-level) key"
    return None
