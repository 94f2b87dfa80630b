"""Values the target's typed config refuses at start-up (vllm-omni builds it before any engine):
a stage's step budget below its sequences, no weight-loading threads, async_chunk differing on an
edge, KV transfer with async_chunk, an empty VAD model path. Each rule is read from the
release's own code (knowledge/facts.py) and applies only where start-up builds the typed config."""

from __future__ import annotations

from omni_deploy.common import codes, jsonpath
from omni_deploy.config.nodes import Map, Node, Scalar, to_plain
from omni_deploy.config.platform import PlatformApplied
from omni_deploy.config.stage_process import stage_value
from omni_deploy.validate.context import Context
from omni_deploy.validate.findings import Finding, at
from omni_deploy.validate.rules import emits


def _int(node: Node | None) -> int | None:
    value = node.value if isinstance(node, Scalar) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


@emits(codes.E319)
def check_typed_values(ctx: Context) -> list[Finding]:
    """Stage values the target's typed config refuses, after each platform section is applied.

    E319:
        What it does: where the target builds the typed config at start-up (0.30.0 on), reports a stage
            whose max_num_batched_tokens is below its max_num_seqs (at both; OmniStageSchedulerConfig,
            config/omni_config.py:603-608) and a num_weight_load_threads below 1 (:518), per platform;
            async_chunk modes that differ on the two ends of an async-chunk edge, a platform section's
            included (config/stage_config.py:942-957); kv_transfer_config on a stage while async_chunk
            is on (config/omni_config.py:337-340); an empty duplex_session.server_vad_model_path
            (config/stage_config.py:559-562); a kv_cache_dtype or dtype name the release's vLLM does
            not know (vLLM 0.30.0: vllm/config/cache.py:39, vllm/config/model.py:2346; stored per
            release with its typed-config owners); a diffusion stage's use_hsdp
            with hsdp_shard_size -1 and no other parallelism (config/omni_config.py:761-763).
        Why: the typed config (or vLLM's model config, for dtype) raises before any engine starts.
        Fails:
            base_config: minicpmo_4_5_turn.yaml
            stages:
              - stage_id: 0
                max_num_seqs: 64
                max_num_batched_tokens: 32
        Passes:
            base_config: minicpmo_4_5_turn.yaml
            stages:
              - stage_id: 0
                max_num_seqs: 64
                max_num_batched_tokens: 8192
    """
    reads = ctx.target_reads
    if not reads.fact("typed_config_at_startup"):
        return []  # the release starts from legacy stage configs: the typed config's checks do not run
    batched_at, threads_at = reads.fact("batched_tokens_ge_seqs"), reads.fact("weight_load_threads_ge_1")
    found: dict[tuple[object, ...], tuple[Finding, list[str]]] = {}

    def add(node: Node | None, path: str, message: str, platform: str) -> None:
        finding = at(node.origin if node else None, ctx.file, codes.E319, path, message)
        found.setdefault((finding.line, finding.column, finding.path), (finding, []))[1].append(platform)

    for platform, applied in ctx.applied.items():
        for stage in applied.stages:
            where = jsonpath.stage(to_plain(stage.get("stage_id")))
            batched_node, seqs_node = stage.get("max_num_batched_tokens"), stage.get("max_num_seqs")
            batched, seqs = _int(batched_node), _int(seqs_node)
            if batched_at and batched is not None and seqs is not None and batched < seqs:
                said = (
                    f"max_num_batched_tokens ({batched}) is below max_num_seqs ({seqs}): the typed config "
                    f"refuses it at start-up on {{platform}} ({batched_at})"
                )
                # Both values make the conflict and either may be the one to change; the refusal's
                # message names both keys.
                add(batched_node, f"{where}.max_num_batched_tokens", said, platform)
                add(seqs_node, f"{where}.max_num_seqs", said, platform)
            threads_node = stage.get("num_weight_load_threads")
            threads = _int(threads_node)
            if threads_at and threads is not None and threads < 1:
                said = (
                    f"num_weight_load_threads {threads} is below 1: the typed config refuses it at start-up "
                    f"on {{platform}} ({threads_at})"
                )
                add(threads_node, f"{where}.num_weight_load_threads", said, platform)
    for platform, applied in ctx.applied.items():
        for node, path, message in _deploy_refusals(ctx, applied):
            add(node, path, message, platform)
    return [_on(finding, platforms) for finding, platforms in found.values()]


def _flag(node: Node | None, default: bool | None) -> bool | None:
    return node.value if isinstance(node, Scalar) and isinstance(node.value, bool) else default


_Said = tuple[Node | None, str, str]


def _deploy_refusals(ctx: Context, applied: PlatformApplied) -> list[_Said]:
    """The deploy-level refusals of the typed config on one platform's view."""
    return [
        *_async_edges(ctx, applied),
        *_kv_transfer(ctx, applied),
        *_vae_modes(ctx, applied),
        *_vad(ctx),
        *_dtype_names(ctx, applied),
        *_hsdp(ctx, applied),
    ]


def _dtype_names(ctx: Context, applied: PlatformApplied) -> list[_Said]:
    """A kv_cache_dtype or dtype name vLLM does not know, on an LLM stage (a diffusion stage refuses
    kv_cache_dtype outright: E315). The names are those of the vLLM the release runs on (CacheDType,
    a Literal the typed config's OmniStageCacheConfig validates, and the model dtypes, "Unknown
    dtype" otherwise), stored with the release's typed-config owners (tools/generate_owners.py);
    where those are unknown, so is this rule (I308 says so)."""
    from omni_deploy.validate.check_pipeline import target_stages

    owners = ctx.target_reads.owners()
    names_of = owners.get("vllm_names") if owners else None
    if not names_of:
        return []
    kinds = target_stages(ctx) or {}
    vllm = owners["generated_with"]["vllm"] if owners else "?"
    out: list[_Said] = []
    for stage in applied.stages:
        sid = to_plain(stage.get("stage_id"))
        if isinstance(sid, int) and kinds.get(sid) == "diffusion":
            continue
        for key, known in names_of.items():
            names, at_line = known["names"], known["at"]
            node = stage_value(stage, key)
            value = node.value if isinstance(node, Scalar) else None
            if isinstance(value, str) and value.lower() not in names:
                out.append((node, f"{jsonpath.stage(sid)}.{key}",
                            f"{key} {value!r} is not a name vLLM {vllm} knows ({', '.join(names)}): refused at "
                            f"start-up on {{platform}} ({at_line})"))  # fmt: skip
    return out


def _async_edges(ctx: Context, applied: PlatformApplied) -> list[_Said]:
    """async_chunk modes that differ on the two ends of an async-chunk edge."""
    from omni_deploy.validate.check_pipeline import target_pipeline

    mismatch_at = ctx.target_reads.fact("async_chunk_edge_mismatch")
    _, entry = target_pipeline(ctx)
    if not mismatch_at or not entry:
        return []
    top = _flag(applied.config.get("async_chunk"), True)  # DeployConfig.async_chunk defaults to true
    by_id = {to_plain(s.get("stage_id")): s for s in applied.stages}
    out: list[_Said] = []
    for src, dst in entry.get("async_chunk_edges", []):
        ends = [by_id.get(src), by_id.get(dst)]
        modes = [bool(top) and (s is None or _flag(s.get("async_chunk"), None) is not False) for s in ends]
        if modes[0] == modes[1]:
            continue
        for sid, stage in zip((src, dst), ends, strict=True):
            node = stage.get("async_chunk") if stage is not None else None
            if node is not None:
                out.append((node, f"{jsonpath.stage(sid)}.async_chunk",
                            f"async_chunk differs on the two ends of the async-chunk edge {src} -> {dst}: the "
                            f"typed config refuses it at start-up on {{platform}} ({mismatch_at})"))  # fmt: skip
    return out


def _kv_transfer(ctx: Context, applied: PlatformApplied) -> list[_Said]:
    """kv_transfer_config on a stage while async_chunk is on."""
    kv_at = ctx.target_reads.fact("kv_transfer_with_async_chunk")
    if not kv_at or not _flag(applied.config.get("async_chunk"), True):
        return []
    out: list[_Said] = []
    for stage in applied.stages:
        extras = stage.get("engine_extras")
        holder = stage if "kv_transfer_config" in stage else extras
        entry = holder.entries.get("kv_transfer_config") if isinstance(holder, Map) else None
        if entry is None or (isinstance(entry.node, Scalar) and not entry.node.value):
            continue
        sid = to_plain(stage.get("stage_id"))
        # At the key: a mapping's own position is its first entry's line.
        out.append((Scalar(None, entry.key_origin), f"{jsonpath.stage(sid)}.kv_transfer_config",
                    "kv_transfer_config with async_chunk on: the typed config refuses it at start-up on "
                    f'{{platform}} ("Native AR-to-DiT KV transfer requires async_chunk=False", {kv_at})'))  # fmt: skip
    return out


def _vae_modes(ctx: Context, applied: PlatformApplied) -> list[_Said]:
    """A diffusion stage's vae_parallel_mode (flat or in parallel_config) outside the target's modes
    (0.30.0: tile and the two spatial shards; 0.32 adds batch), read from the release's own test."""
    from omni_deploy.validate.check_pipeline import target_stages

    known = (ctx.target_reads.stage_schema or {}).get("vae_parallel_modes")
    vae_at = str(known["at"]) if known and ctx.target_reads.fact("vae_parallel_mode_values") else None
    modes: list[str] = list(known["names"]) if known else []
    kinds = (target_stages(ctx) or {}) if vae_at else {}
    out: list[_Said] = []
    for stage in applied.stages:
        sid = to_plain(stage.get("stage_id"))
        if not isinstance(sid, int) or kinds.get(sid) != "diffusion":
            continue
        parallel = stage_value(stage, "parallel_config")
        for holder, where in (
            (stage, jsonpath.stage(sid)),
            (parallel, f"{jsonpath.stage(sid)}.parallel_config"),
        ):
            mode = holder.get("vae_parallel_mode") if isinstance(holder, Map) else None
            if isinstance(mode, Scalar) and mode.value not in modes:
                out.append((mode, f"{where}.vae_parallel_mode",
                            f"vae_parallel_mode {mode.value!r} is not one of {', '.join(modes)}: the typed "
                            f"config refuses it at start-up on {{platform}} ({vae_at})"))  # fmt: skip
    return out


def _parallel_value(stage: Map, parallel: Map | None, key: str, default: object) -> object:
    """A diffusion parallel setting: the stage's parallel_config, else the flat key, else its default."""
    for holder in (parallel, stage, stage.get("engine_extras")):
        node = holder.get(key) if isinstance(holder, Map) else None
        if isinstance(node, Scalar) and node.value is not None:
            return node.value
    return default


def _hsdp(ctx: Context, applied: PlatformApplied) -> list[_Said]:
    """use_hsdp with hsdp_shard_size -1 (its default) on a diffusion stage with no other parallelism:
    the shard size cannot be derived (an overlay's parallel_config replacing its base's whole one
    drops an explicit hsdp_shard_size this way)."""
    from omni_deploy.validate.check_pipeline import target_stages

    hsdp_at = ctx.target_reads.fact("hsdp_auto_shard_refusal")
    if not hsdp_at or not ctx.target_reads.fact("typed_config_at_startup"):
        return []
    kinds = target_stages(ctx) or {}
    out: list[_Said] = []
    for stage in applied.stages:
        sid = to_plain(stage.get("stage_id"))
        if not isinstance(sid, int) or kinds.get(sid) != "diffusion":
            continue
        parallel = stage_value(stage, "parallel_config")
        parallel = parallel if isinstance(parallel, Map) else None
        use = parallel.get("use_hsdp") if parallel is not None else None
        if not (isinstance(use, Scalar) and use.value is True):
            continue
        if parallel is not None and _hsdp_cannot_shard(stage, parallel):
            out.append((use, f"{jsonpath.stage(sid)}.parallel_config.use_hsdp",
                        "use_hsdp with hsdp_shard_size -1 (the default) and no other parallelism: the shard size "
                        f"cannot be derived, refused at start-up on {{platform}} ({hsdp_at}); set hsdp_shard_size "
                        "(an overlay's parallel_config replaces its base's whole one)"))  # fmt: skip
    return out


def _hsdp_cannot_shard(stage: Map, parallel: Map) -> bool:
    """hsdp_shard_size -1 with every other parallel size 1 (omni_config.py:745-763's arithmetic)."""

    def value(key: str, default: object = 1) -> object:
        return _parallel_value(stage, parallel, key, default)

    allgather = value("allgather_degree")
    sp = (
        allgather
        if isinstance(allgather, int) and allgather > 1
        else _product(value("ulysses_degree"), value("ring_degree"))
    )
    sizes = [value(k) for k in ("pipeline_parallel_size", "data_parallel_size", "tensor_parallel_size")]
    return (
        value("hsdp_shard_size", -1) == -1
        and _product(sp, *sizes, value("cfg_parallel_size")) == 1
        and not value("enable_expert_parallel", False)
    )


def _product(*values: object) -> int | None:
    out = 1
    for value in values:
        if not isinstance(value, int) or isinstance(value, bool):
            return None
        out *= value
    return out


def _vad(ctx: Context) -> list[_Said]:
    """An empty duplex_session.server_vad_model_path."""
    vad_at = ctx.target_reads.fact("server_vad_path_nonempty")
    duplex = ctx.deployment.config.get("duplex_session")
    vad = duplex.get("server_vad_model_path") if isinstance(duplex, Map) else None
    if not vad_at or not isinstance(vad, Scalar) or vad.value is None or str(vad.value).strip():
        return []
    return [(vad, "$.duplex_session.server_vad_model_path",
             f"an empty server_vad_model_path is refused at start-up on {{platform}} ({vad_at}); use null for none")]  # fmt: skip


def _on(finding: Finding, platforms: list[str]) -> Finding:
    from dataclasses import replace

    return replace(finding, message=finding.message.replace("{platform}", ", ".join(platforms)))
