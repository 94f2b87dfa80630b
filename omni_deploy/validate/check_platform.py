"""Platform rules: model runner v2 where it cannot run, CUDA-only switches elsewhere, NPU graph keys."""

from __future__ import annotations

from omni_deploy.common import codes, jsonpath
from omni_deploy.config.nodes import Map, Scalar, child_path, stage_path
from omni_deploy.knowledge.keys import CUDA_ONLY_CODE2WAV, NPU_GRAPH_KEYS
from omni_deploy.validate.context import Context
from omni_deploy.validate.findings import Finding, at
from omni_deploy.validate.rules import emits


@emits(codes.I371, codes.W372)
def check_platform_rules(ctx: Context) -> list[Finding]:
    """Platform rules: CUDA-only Code2Wav switches elsewhere, NPU graph keys in the wrong place.

    I371:
        What it does: notes a CUDA-only Code2Wav switch (token2wav_device_spk, token2wav_allow_tf32,
            token2wav_trt, token2wav_device_prepare) in a file checked for another platform too.
        Why: a note: off CUDA, CAM++ runs with ONNX Runtime on the CPU whatever the switch says (and
            vllm-omni prepares each reference voice itself), so the switch has no effect there.
        Fails:
            base_config: minicpmo_4_5_turn.yaml
            connectors:
              connector_of_shared_memory:
                extra:
                  token2wav_device_spk: false
        Passes:
            base_config: minicpmo_4_5_turn.yaml
    W372:
        What it does: reports an NPU graph switch (code2wav_enable_npu_graph, code2wav_max_npu_graphs)
            in a connector's extra.
        Why: vllm-omni reads them from stage 2's additional_config on NPU; in a connector they are
            never read, and Code2Wav runs without graphs.
        Fails:
            base_config: minicpmo_4_5_turn.yaml
            connectors:
              connector_of_shared_memory:
                extra:
                  code2wav_enable_npu_graph: true
        Passes:
            base_config: minicpmo_4_5_turn.yaml
            platforms:
              npu:
                stages:
                  - stage_id: 2
                    additional_config:
                      code2wav_enable_npu_graph: true
                      code2wav_max_npu_graphs: 32
    """
    findings = []
    found = ctx.deployment.code2wav_connector()
    extra = ctx.deployment.code2wav_extra()
    if found is not None and extra is not None:
        extra_path = jsonpath.connector_extra(found[0])
        for platform in ctx.applied:
            if platform == "cuda":
                continue
            for key in CUDA_ONLY_CODE2WAV:
                entry = extra.entries.get(key)
                if entry is not None:
                    findings.append(
                        at(
                            entry.key_origin,
                            ctx.file,
                            codes.I371,
                            child_path(extra_path, key),
                            f"'{key}' has no effect on {platform}: CAM++ runs with ONNX Runtime on the CPU there",
                        )
                    )
    connectors = ctx.deployment.connectors()
    for name, connector in connectors.items() if connectors else []:
        extra_node = connector.get("extra") if isinstance(connector, Map) else None
        if not isinstance(extra_node, Map):
            continue
        for key in NPU_GRAPH_KEYS:
            entry = extra_node.entries.get(key)
            if entry is not None:
                findings.append(
                    at(
                        entry.key_origin,
                        ctx.file,
                        codes.W372,
                        child_path(jsonpath.connector_extra(name), key),
                        f"'{key}' is not a connector key: the NPU graph switches are read from stage 2's "
                        "additional_config",
                        "move it to platforms.npu.stages[stage_id: 2].additional_config",
                    )
                )
    return findings


@emits(codes.W318, codes.E373)
def check_platform_readers(ctx: Context) -> list[Finding]:
    """Code2Wav options a platform's own Code2Wav refuses (E373), and platform stage entries whose
    `runtime:` is not read (W318).

    vllm-omni's NPU Code2Wav (platforms/npu/models/minicpmo_4_5_code2wav.py) raises when
    code2wav_bfloat16_attention_cache is true. A platform stage entry without engine_args is flat
    (config/stage_config.py `_extract_platform_overrides`): its `runtime:` becomes one more engine
    key, not devices/num_replicas/env; a release whose typed config refuses it says so as E315.

    W318:
        What it does: for a release that reads platform stage entries flat, reports an entry with
            `runtime:` and no `engine_args:`.
        Why: such an entry's runtime is passed on as one more engine key, so the devices, replicas
            and environment it sets are never applied on that platform.
        Fails:
            # options: --target-version 0.28.0
            base_config: minicpmo_4_5_turn.yaml
            platforms:
              cuda:
                stages:
                  - stage_id: 1
                    runtime:
                      devices: "0"
        Passes:
            # options: --target-version 0.28.0
            base_config: minicpmo_4_5_turn.yaml
            platforms:
              cuda:
                stages:
                  - stage_id: 1
                    devices: "0"
    E373:
        What it does: reports code2wav_bfloat16_attention_cache: true in a file checked for npu, where
            the target's NPU Code2Wav refuses it.
        Why: on CUDA it is a valid option; on NPU the Code2Wav stage raises when it builds, and the
            server does not start.
        Fails:
            # options: --platform npu
            base_config: minicpmo_4_5_turn.yaml
            connectors:
              connector_of_shared_memory:
                extra:
                  code2wav_bfloat16_attention_cache: true
        Passes:
            # options: --platform npu
            base_config: minicpmo_4_5_turn.yaml
            connectors:
              connector_of_shared_memory:
                extra:
                  code2wav_bfloat16_attention_cache: false
    """

    findings = []
    reads = ctx.target_reads
    refused_at = reads.fact("npu_refuses_bf16_attention_cache")
    extra = ctx.deployment.code2wav_extra()
    found = ctx.deployment.code2wav_connector()
    key = "code2wav_bfloat16_attention_cache"
    entry = extra.entries.get(key) if extra is not None else None
    on = entry is not None and isinstance(entry.node, Scalar) and bool(entry.node.value)
    if refused_at and "npu" in ctx.applied and entry is not None and found is not None and on:
        findings.append(at(entry.key_origin, ctx.file, codes.E373, child_path(jsonpath.connector_extra(found[0]), key),
                               f"on npu, vllm-omni {reads.version}'s Code2Wav refuses {key}: true when it builds "
                               f"({refused_at}): the Code2Wav stage fails to start",
                               "set it under a CUDA-only overlay, or leave it false"))  # fmt: skip
    flat_at = reads.fact("platform_stage_flat")
    sections = ctx.deployment.platform_sections()
    if flat_at is None or reads.owners() is not None or sections is None:
        return findings
    for plat, section in sections.items():
        entries = section.get("stages") if isinstance(section, Map) else None
        stages_at = f"{child_path('$.platforms', plat)}.stages"
        for i, stage in enumerate(getattr(entries, "items", [])):
            if isinstance(stage, Map) and "runtime" in stage and "engine_args" not in stage:
                runtime = stage.entries["runtime"]
                findings.append(at(runtime.key_origin, ctx.file, codes.W318,
                                   f"{stage_path(stages_at, i, stage)}.runtime",
                                   f"without engine_args this platform entry is flat ({flat_at}): runtime is "
                                   "passed on as an engine key, so its devices/num_replicas/env are not applied",
                                   "write devices and env on the entry itself, or add an engine_args mapping"))  # fmt: skip
    return findings
