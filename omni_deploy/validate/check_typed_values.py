"""Values the target's typed config refuses at start-up (vllm-omni builds it before any engine):
a stage's step budget below its sequences, no weight-loading threads. Each rule is read from the
release's own code (knowledge/facts.py) and applies only where start-up builds the typed config."""

from __future__ import annotations

from omni_deploy import codes, jsonpath
from omni_deploy.config.nodes import Node, Scalar, to_plain
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
        What it does: where the target builds the typed config at start-up (0.30.0), reports a stage
            whose max_num_batched_tokens is below its max_num_seqs (at both; OmniStageSchedulerConfig,
            config/omni_config.py:603-608) and a num_weight_load_threads below 1 (:518), per platform.
        Why: the typed config raises a ValueError before any engine starts.
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
    return [_on(finding, platforms) for finding, platforms in found.values()]


def _on(finding: Finding, platforms: list[str]) -> Finding:
    from dataclasses import replace

    return replace(finding, message=finding.message.replace("{platform}", ", ".join(platforms)))
