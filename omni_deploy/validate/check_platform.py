"""Platform rules: model runner v2 where it cannot run, CUDA-only switches elsewhere, NPU graph keys."""

from __future__ import annotations

from omni_deploy import codes, jsonpath
from omni_deploy.config.nodes import Map, child_path
from omni_deploy.knowledge.keys import CUDA_ONLY_CODE2WAV, NPU_GRAPH_KEYS
from omni_deploy.validate.context import Context
from omni_deploy.validate.findings import Finding, at


def check_platform_rules(ctx: Context) -> list[Finding]:
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
