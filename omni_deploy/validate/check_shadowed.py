"""A flat stage key that the same stage's engine_args sets too: vllm-omni applies engine_args over
the flat keys (config/stage_config.py:647-654 in 0.30.0; knowledge fact engine_args_win), so the
flat value is never read. Typical after an overlay writes a flat key its base sets under
engine_args."""

from __future__ import annotations

from omni_deploy.common import codes, jsonpath
from omni_deploy.config.nodes import Map, Scalar, Seq, child_path, to_plain
from omni_deploy.validate.context import Context
from omni_deploy.validate.findings import Finding, at
from omni_deploy.validate.rules import emits


@emits(codes.W341)
def check_shadowed_flat_keys(ctx: Context) -> list[Finding]:
    """Flat stage keys their own engine_args override.

    W341:
        What it does: reports a stage key written flat whose stage also sets it under engine_args
            (with another value), in the merged file.
        Why: vllm-omni applies engine_args over the flat keys, so the flat value (often an overlay's
            change) is never read.
        Fails:
            base_config: minicpmo_4_5_turn.yaml
            stages:
              - stage_id: 2
                max_num_seqs: 8
                engine_args:
                  max_num_seqs: 4
        Passes:
            base_config: minicpmo_4_5_turn.yaml
            stages:
              - stage_id: 2
                max_num_seqs: 8
    """
    wins_at = ctx.target_reads.fact("engine_args_win")
    if not wins_at:
        return []
    findings = []
    for stage in ctx.deployment.stages():
        engine_args = stage.get("engine_args")
        if not isinstance(engine_args, Map):
            continue
        sid = to_plain(stage.get("stage_id"))
        for key, entry in stage.entries.items():
            winner = engine_args.entries.get(key)
            if key == "engine_args" or winner is None or isinstance(entry.node, (Map, Seq)):
                continue
            if (
                isinstance(winner.node, Scalar)
                and isinstance(entry.node, Scalar)
                and winner.node.value == entry.node.value
            ):
                continue
            findings.append(
                at(
                    entry.key_origin,
                    ctx.file,
                    codes.W341,
                    child_path(jsonpath.stage(sid), key),
                    f"engine_args.{key} of this stage ({winner.key_origin.location}) is applied over the flat "
                    f"'{key}' ({wins_at}): this value is never read",
                    f"set it under engine_args, or drop engine_args.{key}",
                )
            )
    return findings
