"""GPU memory per device, MiniCPM-o capacity coherence, and Code2Wav cross-field rules."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import replace

from omni_deploy.common import codes, jsonpath
from omni_deploy.config.nodes import Map, Node, Origin, Scalar, Seq, to_plain
from omni_deploy.config.platform import PlatformApplied
from omni_deploy.config.stage_process import stage_value
from omni_deploy.validate import blame
from omni_deploy.validate.context import Context
from omni_deploy.validate.findings import Finding, at
from omni_deploy.validate.rules import emits

GIB = 1024**3


def _number(node: Node | None) -> float | None:
    if isinstance(node, Scalar) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return float(node.value)
    return None


def _devices(stage: Map) -> list[str]:
    node = stage.get("devices")
    if not isinstance(node, Scalar) or node.value is None:
        return []
    return [d.strip() for d in str(node.value).split(",") if d.strip()]


@emits(codes.E350, codes.W351, codes.E352)
def check_gpu_memory(ctx: Context) -> list[Finding]:
    """Per physical device, what the stages that share it ask for; one finding for all platforms alike.

    E350:
        What it does: adds up the gpu_memory_utilization of the stages placed on each device (a
            stage's `devices`, after the platform section) whose KV budget it decides, and reports a
            device asked for more than all of its memory, at the value the file you validate set. A
            stage with kv_cache_memory_bytes is left out of the sum: its KV budget is exactly that
            (vllm-omni worker/base.py; vLLM gpu_worker.py), whatever its utilization says.
        Why: each such stage takes its fraction of the whole device when it starts (vllm-omni caps a
            request to what is free, worker/memory_utils.py); the stages that find less than their
            fraction left get a smaller KV cache than asked, or none, and fail at start-up or under
            load.
        Fails:
            base_config: minicpmo_4_5_turn.yaml
            stages:
              - stage_id: 0
                devices: "1"
              - stage_id: 2  # 0.55 + 0.5 of device 1
                devices: "1"
                gpu_memory_utilization: 0.5
        Passes:
            base_config: minicpmo_4_5_turn.yaml
            stages:
              - stage_id: 2  # 0.55 + 0.18
                gpu_memory_utilization: 0.18
    W351:
        What it does: reports a device whose stages (those without kv_cache_memory_bytes) ask for more
            than 95 % of its memory in all.
        Why: CUDA graphs, cuDNN workspaces, NCCL buffers and fragmentation live outside the stages'
            shares; with less than 5 % left they fail under load rather than at start-up.
        Fails:
            base_config: minicpmo_4_5_turn.yaml
            stages:
              - stage_id: 2  # 0.55 + 0.42 = 0.97
                gpu_memory_utilization: 0.42
        Passes:
            base_config: minicpmo_4_5_turn.yaml
            stages:
              - stage_id: 2  # 0.73 in all
                gpu_memory_utilization: 0.18
    E352:
        What it does: with --gpu-memory-gib (the card's size), adds up the kv_cache_memory_bytes of
            the stages on each device and reports a device whose KV budgets exceed the card.
        Why: a stage with kv_cache_memory_bytes allocates exactly that for its KV cache, whatever its
            gpu_memory_utilization (so one stage's budget above its own share is not an error); budgets
            that add up to more than the card cannot all be allocated.
        Fails:
            # options: --gpu-memory-gib 24
            base_config: minicpmo_4_5_turn.yaml
            platforms:
              cuda:
                stages:
                  - stage_id: 1  # 26 GiB on a 24 GiB card
                    kv_cache_memory_bytes: 27917287424
        Passes:
            # options: --gpu-memory-gib 24
            base_config: minicpmo_4_5_turn.yaml
            platforms:
              cuda:
                stages:
                  - stage_id: 1  # 4 GiB: above 0.15 x 24 GiB, but the budget is exact
                    kv_cache_memory_bytes: 4294967296
    """
    merged: dict[tuple[object, ...], tuple[Finding, list[str]]] = {}
    for platform, applied in ctx.applied.items():
        for finding in _memory_on(ctx, "{platform}", applied):
            key = (finding.code, finding.file, finding.line, finding.column, finding.path, finding.message)
            merged.setdefault(key, (finding, []))[1].append(platform)
    return [
        replace(finding, message=finding.message.replace("{platform}", ", ".join(platforms)))
        for finding, platforms in merged.values()
    ]


_Entries = dict[str, list[tuple[int, float, Origin]]]  # device -> (stage id, value, origin)


def _memory_on(ctx: Context, platform: str, applied: PlatformApplied) -> list[Finding]:
    shares: _Entries = defaultdict(list)
    budgets: _Entries = defaultdict(list)
    findings = []
    gib = ctx.options.gpu_memory_gib
    for stage in applied.stages:
        sid = to_plain(stage.get("stage_id"))
        util_node = stage.get("gpu_memory_utilization")
        util = _number(util_node)
        kv_node = stage_value(stage, "kv_cache_memory_bytes")
        kv = _number(kv_node)
        if util is not None and not 0 < util <= 1:
            util = None  # already a type/bound error; summing it would only repeat that
        # A positive kv_cache_memory_bytes is the stage's KV budget, exactly: its utilization does not
        # size anything (knowledge fact kv_budget_exact), so it is left out of the device's shares.
        exact = kv is not None and kv > 0 and bool(ctx.target_reads.fact("kv_budget_exact"))
        for device in _devices(stage):
            if util is not None and util_node is not None and not exact:
                shares[device].append((sid, util, util_node.origin))
            if kv is not None and kv_node is not None:
                budgets[device].append((sid, kv, kv_node.origin))
    findings += _over_shares(ctx, platform, shares)
    if gib:
        findings += _over_budgets(ctx, platform, budgets, gib)
    return findings


def _over_shares(ctx: Context, platform: str, shares: _Entries) -> list[Finding]:
    """E350 / W351 per device whose stages ask for more than 95 % of it."""
    findings = []
    for device, entries in sorted(shares.items()):
        total = round(sum(v for _, v, _ in entries), 6)
        if total <= 0.95:
            continue
        code = codes.E350 if total > 1.0 + 1e-9 else codes.W351
        chosen, sid, origin = _blamed(ctx, entries)
        findings.append(
            at(
                origin,
                ctx.file,
                code,
                f"{jsonpath.stage(sid)}.gpu_memory_utilization",
                f"on {platform}: stages sharing device {device} ask for {total:.2f} of its memory "
                f"({_listing(entries, chosen, lambda v: f'{v:g}')})",
                "lower gpu_memory_utilization or move a stage to another device"
                if code is codes.E350
                else "less than 5 % is left for CUDA graphs, cuDNN workspaces and fragmentation",
            )
        )
    return findings


def _over_budgets(ctx: Context, platform: str, budgets: _Entries, gib: float) -> list[Finding]:
    """E352 per device whose KV budgets add up to more than the card."""
    findings = []
    for device, entries in sorted(budgets.items()):
        total = sum(v for _, v, _ in entries)
        if total > gib * GIB:
            chosen, sid, origin = _blamed(ctx, entries)
            findings.append(
                at(
                    origin,
                    ctx.file,
                    codes.E352,
                    f"{jsonpath.stage(sid)}.kv_cache_memory_bytes",
                    f"on {platform}: KV budgets on device {device} add up to {total / GIB:.2f} GiB, more than "
                    f"the {gib:g} GiB card ({_listing(entries, chosen, lambda v: f'{v / GIB:.2f} GiB')})",
                )
            )
    return findings


def _blamed(ctx: Context, entries: list[tuple[int, float, Origin]]) -> tuple[int | None, int, Origin | None]:
    """The entry a sum's finding points at (the value the validated file set; blame.pick), its
    stage, and its origin; (None, last stage, None) when no file the user named set one."""
    chosen = blame.pick([o for _, _, o in entries], ctx.deployment.top)
    sid = entries[-1 if chosen is None else chosen][0]
    return chosen, sid, None if chosen is None else entries[chosen][2]


def _listing(
    entries: list[tuple[int, float, Origin]], chosen: int | None, show: Callable[[float], str]
) -> str:
    """`stage 1 0.8, stage 2 0.9 at base.yaml:90`: each value, and where the ones not pointed at live."""
    return ", ".join(
        f"stage {sid} {show(v)}" + ("" if i == chosen else f" {blame.spelled(origin)}")
        for i, (sid, v, origin) in enumerate(entries)
    )


@emits(codes.W360, codes.W361, codes.W362, codes.I364, codes.E380)
def check_minicpmo_capacity(ctx: Context) -> list[Finding]:
    """MiniCPM-o 4.5 batch coherence: Code2Wav's graphs and batches against its max_num_seqs, the
    Talker's KV budget against its sequences.

    W360:
        What it does: checks the Code2Wav extra's hift_graph_capture_batch_sizes: positive, no
            duplicates, and at least one size not above Code2Wav's max_num_seqs.
        Why: HiFT graphs are captured at start-up for these batch sizes; a duplicate or a size the
            stage never reaches costs capture time and memory for a graph never replayed.
        Fails:
            base_config: minicpmo_4_5_turn.yaml
            connectors:
              connector_of_shared_memory:
                extra:
                  hift_graph_capture_batch_sizes: [1, 2, 2]
        Passes:
            base_config: minicpmo_4_5_turn.yaml
            connectors:
              connector_of_shared_memory:
                extra:
                  hift_graph_capture_batch_sizes: [1, 2, 4]
    W361:
        What it does: where the target vllm-omni's code reads the CFM micro_batch_size (no release
            does yet), checks it is not above Code2Wav's max_num_seqs.
        Why: Code2Wav never batches more sequences than it admits, so a larger micro-batch only
            sizes buffers that are never filled.
        Fails:
            # options: --target-version 0.31.0.dev0 --vllm-omni-source vllm-omni-main
            base_config: minicpmo_4_5_turn.yaml
            connectors:
              connector_of_shared_memory:
                extra:
                  micro_batch_size: 16
        Passes:
            # options: --target-version 0.31.0.dev0 --vllm-omni-source vllm-omni-main
            base_config: minicpmo_4_5_turn.yaml
            connectors:
              connector_of_shared_memory:
                extra:
                  micro_batch_size: 4
    W362:
        What it does: with --model-config (the model's config.json, for the bytes per Talker token),
            checks that the Talker's kv_cache_memory_bytes holds max_num_seqs x max_model_len tokens.
        Why: a Talker that runs out of KV preempts sequences, and a preempted Talker sequence cannot
            be replayed: its audio stops.
        Fails:
            # options: --model-config config.json
            base_config: minicpmo_4_5_turn.yaml
            platforms:
              cuda:
                stages:
                  - stage_id: 1  # 256 MiB for 4 x 4096 tokens
                    kv_cache_memory_bytes: 268435456
        Passes:
            # options: --model-config config.json
            base_config: minicpmo_4_5_turn.yaml
            platforms:
              cuda:
                stages:
                  - stage_id: 1
                    kv_cache_memory_bytes: 2147483648
    I364:
        What it does: notes a Talker KV budget whose capacity in tokens is not checked, because no
            --model-config gave the bytes per token.
        Why: a note, not a problem: pass the model's config.json to have W362 check the budget.
        Fails:
            base_config: minicpmo_4_5_turn.yaml
        Passes:
            # options: --model-config config.json
            base_config: minicpmo_4_5_turn.yaml
    E380:
        What it does: where the target's Code2Wav refuses it (0.28.0 on), checks that a non-zero
            code2wav_initial_batch_size is not below code2wav_min_batch_size (default 1).
        Why: MiniCPM-o's Code2Wav refuses to start with an initial batch below its minimum.
        Fails:
            base_config: minicpmo_4_5_turn.yaml
            connectors:
              connector_of_shared_memory:
                extra:
                  code2wav_min_batch_size: 4
                  code2wav_initial_batch_size: 2
        Passes:
            base_config: minicpmo_4_5_turn.yaml
            connectors:
              connector_of_shared_memory:
                extra:
                  code2wav_min_batch_size: 4
                  code2wav_initial_batch_size: 4
    """
    known = ctx.deployment.pipeline.known
    if not ctx.deployment.pipeline.is_minicpmo or known is None:
        return []
    findings = []
    code2wav = ctx.deployment.stage(known.code2wav_stage) if known.code2wav_stage is not None else None
    capacity = _number(code2wav.get("max_num_seqs")) if code2wav else None
    extra = ctx.deployment.code2wav_extra()
    extra_path = ctx.deployment.code2wav_extra_path
    sizes = extra.get("hift_graph_capture_batch_sizes") if extra else None
    if isinstance(sizes, Seq):
        values = [to_plain(item) for item in sizes.items]
        ints = [v for v in values if isinstance(v, int) and not isinstance(v, bool)]
        path = f"{extra_path}.hift_graph_capture_batch_sizes"
        if any(v <= 0 for v in ints):
            findings.append(
                at(sizes.origin, ctx.file, codes.W360, path, "HiFT capture batch sizes must be positive")
            )
        if len(set(ints)) != len(ints):
            findings.append(
                at(sizes.origin, ctx.file, codes.W360, path, "duplicated HiFT capture batch sizes")
            )
        if capacity is not None and ints and all(v > capacity for v in ints):
            findings.append(
                at(
                    sizes.origin,
                    ctx.file,
                    codes.W360,
                    path,
                    f"every HiFT capture batch size is above Code2Wav's max_num_seqs ({capacity:g}): "
                    "the graphs are never used",
                )
            )
    # Only a vllm-omni whose code reads micro_batch_size (no release does) acts on it.
    reads_micro = ctx.target_reads.reads("code2wav", "micro_batch_size") is not None
    micro = _number(extra.get("micro_batch_size")) if extra and reads_micro else None
    if micro is not None and capacity is not None and micro > capacity and extra is not None:
        node = extra.get("micro_batch_size")
        findings.append(
            at(
                node.origin if node else None,
                ctx.file,
                codes.W361,
                f"{extra_path}.micro_batch_size",
                f"CFM micro_batch_size {micro:g} is above Code2Wav's max_num_seqs ({capacity:g})",
            )
        )
    if extra is not None:
        findings.extend(_initial_batch(ctx, extra, extra_path))
    if known.talker_stage is not None:
        findings.extend(_talker_kv(ctx, known.talker_stage))
    return findings


def _initial_batch(ctx: Context, extra: Map, path: str) -> list[Finding]:
    refused_at = ctx.target_reads.fact("code2wav_initial_batch_refusal")
    if refused_at is None:
        return []  # a release whose Code2Wav does not read (or refuse) these sizes
    minimum = _number(extra.get("code2wav_min_batch_size"))
    initial_node = extra.get("code2wav_initial_batch_size")
    initial = _number(initial_node)
    minimum = 1.0 if minimum is None else minimum
    if initial and initial_node is not None and initial < minimum:
        return [
            at(
                initial_node.origin,
                ctx.file,
                codes.E380,
                f"{path}.code2wav_initial_batch_size",
                f"code2wav_initial_batch_size {initial:g} is below code2wav_min_batch_size {minimum:g}: "
                f"Code2Wav refuses to start ({refused_at})",
                "use 0 (off) or a value >= code2wav_min_batch_size",
            )
        ]
    return []


def _talker_kv(ctx: Context, talker_id: int) -> list[Finding]:
    findings = []
    for platform, applied in ctx.applied.items():
        talker = next((s for s in applied.stages if to_plain(s.get("stage_id")) == talker_id), None)
        if talker is None:
            continue
        kv_node = stage_value(talker, "kv_cache_memory_bytes")
        kv = _number(kv_node)
        seqs, length = _number(talker.get("max_num_seqs")), _number(talker.get("max_model_len"))
        if kv is None or kv_node is None or seqs is None or length is None or kv < 0:
            continue
        path = f"{jsonpath.stage(talker_id)}.kv_cache_memory_bytes"
        shape = ctx.options.model_shape
        if shape is None:
            findings.append(
                at(
                    kv_node.origin,
                    ctx.file,
                    codes.I364,
                    path,
                    f"on {platform}: whether {kv / GIB:.2f} GiB of Talker KV holds max_num_seqs x max_model_len = "
                    f"{seqs * length:,.0f} tokens is not checked: the bytes per token come from the model's config",
                    "pass --model-config <model>/config.json",
                )
            )
            continue
        tokens = kv / shape.bytes_per_token
        if seqs * length > tokens:
            findings.append(
                at(
                    kv_node.origin,
                    ctx.file,
                    codes.W362,
                    path,
                    f"on {platform}: the Talker's {kv / GIB:.2f} GiB of KV hold {tokens:,.0f} tokens "
                    f"({shape.bytes_per_token} bytes each, from {shape.source}), fewer than max_num_seqs x "
                    f"max_model_len = {seqs * length:,.0f}; preempted sequences cannot be replayed",
                )
            )
    return findings


@emits(codes.E365, codes.W363)
def check_batched_tokens(ctx: Context) -> list[Finding]:
    """Scheduling: a step's token budget against the longest sequence, where prompts cannot be chunked.

    E365:
        What it does: reports a stage whose max_num_batched_tokens is below its max_model_len while
            chunked prefill is off (the stage's enable_chunked_prefill, else the top level's), where the
            target builds the typed config at start-up: vLLM's SchedulerConfig refuses it
            (vllm/config/scheduler.py:300 in vLLM 0.30.0), when the stage's engine is configured. At
            both values, as the server check reports the refusal.
        Why: the server does not start; the message comes minutes in, from the stage's process.
        Fails:
            base_config: minicpmo_4_5_turn.yaml
            stages:
              - stage_id: 2  # chunked prefill off
                max_model_len: 65536
                max_num_batched_tokens: 32768
        Passes:
            base_config: minicpmo_4_5_turn.yaml
            stages:
              - stage_id: 2
                max_model_len: 65536
                max_num_batched_tokens: 65536
    W363:
        What it does: the same budget for a target that starts from its legacy stage configs (before
            0.30.0), whose engine set-up the server check does not run.
        Why: without chunked prefill a prompt is scheduled in one step; a prompt longer than the step's
            budget is never scheduled (vLLM refuses the configuration where it checks it).
        Fails:
            # options: --target-version 0.28.0
            base_config: minicpmo_4_5_turn.yaml
            stages:
              - stage_id: 2  # max_model_len 65536, chunked prefill off
                max_num_batched_tokens: 32768
        Passes:
            # options: --target-version 0.28.0
            base_config: minicpmo_4_5_turn.yaml
            stages:
              - stage_id: 2
                max_num_batched_tokens: 65536
    """
    from omni_deploy.validate.server_check.locate import Place, named_places

    refused = bool(ctx.target_reads.fact("typed_config_at_startup"))
    findings: dict[tuple[str, int, int, str], Finding] = {}
    top_chunked = _number_bool(ctx.deployment.config.get("enable_chunked_prefill"))
    for platform, applied in ctx.applied.items():
        for stage in applied.stages:
            chunked = _number_bool(stage_value(stage, "enable_chunked_prefill"))
            chunked = top_chunked if chunked is None else chunked
            batched_node, length_node = stage.get("max_num_batched_tokens"), stage.get("max_model_len")
            batched, length = _number(batched_node), _number(length_node)
            if chunked is not False or batched is None or length is None or not 0 < batched < length:
                continue
            sid = to_plain(stage.get("stage_id"))
            where = jsonpath.stage(sid)
            if not refused:
                finding = at(batched_node.origin if batched_node else None, ctx.file, codes.W363,
                             f"{where}.max_num_batched_tokens",
                             f"on {platform}: max_num_batched_tokens {batched:g} < max_model_len {length:g} with "
                             "chunked prefill off: prompts longer than a step cannot be scheduled")  # fmt: skip
                findings.setdefault((finding.file, finding.line, finding.column, finding.path), finding)
                continue
            message = (
                f"on {platform}: max_num_batched_tokens ({batched:g}) is below max_model_len ({length:g}) "
                "with chunked prefill off: vLLM's scheduler config refuses the stage at start-up "
                "(vllm/config/scheduler.py:300)"
            )
            hint = "raise max_num_batched_tokens to max_model_len, or turn enable_chunked_prefill on"
            stated = {"max_num_batched_tokens": f"{batched:g}", "max_model_len": f"{length:g}"}
            spots: list[Place | None] = [
                *named_places(ctx.deployment.config, list(stated), None, platform, stated)
            ]
            for spot in spots or [None]:
                finding = at(spot.origin if spot else None, ctx.file, codes.E365,
                             spot.path if spot else f"{where}.max_num_batched_tokens", message, hint)  # fmt: skip
                findings.setdefault((finding.file, finding.line, finding.column, finding.path), finding)
        break  # the rule does not depend on the platform beyond what the first one shows
    return list(findings.values())


def _number_bool(node: Node | None) -> bool | None:
    return node.value if isinstance(node, Scalar) and isinstance(node.value, bool) else None
