"""The pipeline as the target release has it: registered or not, its stages, async-chunk support.

A file's `pipeline:` (or the one omni-deploy infers from a bundled file name) is looked up in the
target's own registry, read from its code (knowledge/facts.py): 0.20.0 has no `minicpmo_4_5`, which
is two stages (Thinker, Talker+vocoder) in 0.22.0 and 0.24.0 and three from 0.26.0 on.

- E316: the target does not register the pipeline (a KeyError at start-up).
- E317: `async_chunk` is on (the default is true) for a multi-stage pipeline none of whose stages
  has an async-chunk producer in the target (0.24.0's MiniCPM-o): refused at start-up.
"""

from __future__ import annotations

from typing import Any

from omni_deploy.common import codes
from omni_deploy.config.nodes import Scalar
from omni_deploy.knowledge.pipelines import infer_registered
from omni_deploy.validate.context import Context
from omni_deploy.validate.findings import Finding, at
from omni_deploy.validate.rules import emits


def target_pipeline(ctx: Context) -> tuple[str | None, dict[str, Any] | None]:
    """(name, the target's registry entry) of the file's pipeline; entry None when not registered."""
    registry = ctx.target_reads.pipelines
    name = ctx.deployment.pipeline.name
    if name is None and registry:
        name = infer_registered(ctx.deployment.chain, frozenset(registry), ctx.options.target_version)
    if name is None or not registry:
        return name, None
    return name, registry.get(name)


def target_stages(ctx: Context) -> dict[int, str] | None:
    """stage_id -> execution type of the file's pipeline in the target (None: not known)."""
    _, entry = target_pipeline(ctx)
    stages = entry.get("stages") if entry else None
    return {int(k): str(v) for k, v in stages.items()} if isinstance(stages, dict) else None


@emits(codes.E316)
def check_pipeline_release(ctx: Context) -> list[Finding]:
    """The file's pipeline against the target release's pipeline registry.

    E316:
        What it does: reports a pipeline (named, or implied by the file) that the target vllm-omni's
            registry does not have, naming the releases that do.
        Why: the release looks the pipeline up at start-up and stops with a KeyError.
        Fails:
            # options: --target-version 0.20.0
            pipeline: minicpmo_4_5
            stages:
              - stage_id: 0
                max_num_seqs: 4
        Passes:
            # options: --target-version 0.30.0
            base_config: minicpmo_4_5_turn.yaml
    """
    name, entry = target_pipeline(ctx)
    reads = ctx.target_reads
    where = reads.fact("pipeline_unregistered")
    if name is None or entry is not None or not reads.pipelines or where is None:
        return []  # 0.24.0 warns and falls back to detecting the pipeline from the model
    node = ctx.deployment.config.get("pipeline")
    origin = node.origin if isinstance(node, Scalar) else None
    said = f"vllm-omni {reads.version} registers no pipeline '{name}' ({ctx.deployment.pipeline.source})"
    releases = [v for v, known in _releases_with(name)]
    hint = f"registered by vllm-omni {', '.join(releases)}" if releases else None
    message = said + (
        f": a KeyError at start-up ({where})" if where and origin else ": the server cannot run it"
    )
    return [at(origin, ctx.file, codes.E316, "$.pipeline" if origin else "$", message, hint)]


def _releases_with(name: str) -> list[tuple[str, dict[str, Any]]]:
    from omni_deploy.knowledge.target import facts_data

    return [(v, e["pipelines"][name]) for v, e in facts_data()["versions"].items() if name in e["pipelines"]]


@emits(codes.E317)
def check_async_chunk(ctx: Context) -> list[Finding]:
    """async_chunk against what the target's pipeline can stream between its stages.

    E317:
        What it does: reports async_chunk true (set, or by default) for a pipeline of several stages
            none of which has an async-chunk producer in the target release.
        Why: that release refuses async_chunk for such a pipeline at start-up.
        Fails:
            # options: --target-version 0.24.0
            pipeline: minicpmo_4_5
            async_chunk: true
            stages:
              - stage_id: 0
                max_num_seqs: 4
              - stage_id: 1
                max_num_seqs: 4
        Passes:
            # options: --target-version 0.24.0
            pipeline: minicpmo_4_5
            async_chunk: false
            stages:
              - stage_id: 0
                max_num_seqs: 4
              - stage_id: 1
                max_num_seqs: 4
    """
    name, entry = target_pipeline(ctx)
    where = ctx.target_reads.fact("async_chunk_refusal")
    if entry is None or where is None or "stages" not in entry or entry.get("async_chunk_producer"):
        return []
    if entry.get("next_stage_processor") and ctx.target_reads.fact(
        "async_chunk_accepts_next_stage_processor"
    ):
        return []
    if len(entry["stages"]) <= 1:
        return []  # no edge between stages: async_chunk is a no-op there
    node = ctx.deployment.config.get("async_chunk")
    value = node.value if isinstance(node, Scalar) else True  # load_deploy_config's default
    if value is not True:
        return []
    said = "async_chunk: true" if node is not None else "async_chunk is true by default"
    message = (
        f"{said}, but no stage of {name} in vllm-omni {ctx.target_reads.version} has an async-chunk producer: "
        f"refused at start-up ({where})"
    )
    origin = node.origin if isinstance(node, Scalar) else None
    return [
        at(origin, ctx.file, codes.E317, "$.async_chunk", message, "set async_chunk: false for this release")
    ]
