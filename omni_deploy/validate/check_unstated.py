"""What a file leaves to the defaults or to an option validate was not given, said rather than a bare
"ok": KV budgets no card size was given for, a file with no stages."""

from __future__ import annotations

from pathlib import Path

from omni_deploy.common import codes, jsonpath
from omni_deploy.config.nodes import Scalar, Seq, to_plain
from omni_deploy.config.stage_process import stage_value
from omni_deploy.validate.context import Context
from omni_deploy.validate.findings import Finding, at
from omni_deploy.validate.rules import emits

# The most memory one GPU on sale has (AMD MI325X, 256 GB): a budget above it fits no card.
_LARGEST_CARD_GIB = 256


@emits(codes.I353, codes.I326)
def check_unstated(ctx: Context) -> list[Finding]:
    """KV budgets without --gpu-memory-gib, and a file with no stages.

    I353:
        What it does: without --gpu-memory-gib, reports a kv_cache_memory_bytes the file validated sets
            above what any GPU has (256 GiB): it was not checked against a card (E352 does that with the
            card's size).
        Why: "ok" would read as "fits"; a KV budget of 10 TiB starts nothing, and the server only says
            so when the stage allocates it.
        Fails:
            base_config: minicpmo_4_5_turn.yaml
            stages:
              - stage_id: 1
                kv_cache_memory_bytes: 10995116277760
        Passes:
            # options: --gpu-memory-gib 141
            base_config: minicpmo_4_5_turn.yaml
            stages:
              - stage_id: 1
                kv_cache_memory_bytes: 2147483648
    I326:
        What it does: reports a file that has no stages after its base files are merged.
        Why: vllm-omni starts it (run on 0.30.0's own start-up code) with every stage of the pipeline
            at the pipeline's defaults and no devices, so each stage takes the launcher's visible GPUs;
            `omni-deploy k8s` cannot place such a file and refuses it (E391, as validate
            --gpus-per-node does).
        Fails:
            pipeline: minicpmo_4_5
        Passes:
            base_config: minicpmo_4_5_turn.yaml
    """
    out: list[Finding] = []
    stages = ctx.deployment.config.get("stages")
    no_stages = stages is None or (isinstance(stages, Seq) and not stages.items)
    no_stages = no_stages and "stage_args" not in ctx.deployment.config  # a legacy file: I312
    if no_stages and ctx.options.gpus_per_node is None:  # with it, check_multi_node's E391 says so
        out.append(
            at(
                None,
                ctx.file,
                codes.I326,
                "$.stages",
                "the file has no stages: vllm-omni starts every stage of its pipeline with the pipeline's "
                "defaults and no devices (each stage on the launcher's visible GPUs); omni-deploy k8s "
                "cannot place it (E391)",
                "list the stages with their devices",
            )
        )
    if ctx.options.gpu_memory_gib is not None:
        return out
    top = ctx.deployment.top.resolve()
    seen: set[tuple[str, int, int]] = set()
    for applied in ctx.applied.values():
        for stage in applied.stages:
            node = stage_value(stage, "kv_cache_memory_bytes")
            value = node.value if isinstance(node, Scalar) else None
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0 or node is None:
                continue
            origin = node.origin
            if origin.layer == "default" or Path(origin.file).resolve() != top:
                continue
            if (origin.file, origin.line, origin.column) in seen:
                continue
            seen.add((origin.file, origin.line, origin.column))
            gib = value / 2**30
            if gib <= _LARGEST_CARD_GIB:
                continue  # a budget some card holds: said only where it cannot be one
            beyond = f"; that is more than any GPU has ({_LARGEST_CARD_GIB} GiB)"
            sid = to_plain(stage.get("stage_id"))
            out.append(
                at(
                    origin,
                    ctx.file,
                    codes.I353,
                    f"{jsonpath.stage(sid)}.kv_cache_memory_bytes",
                    f"a KV budget of {gib:,.1f} GiB was not checked against the card: no --gpu-memory-gib "
                    f"given{beyond}",
                    "pass --gpu-memory-gib with the card's size (E352 checks the sum)",
                )
            )
    return out
