"""From a deploy file and the k8s options to the objects: validate, render, place, build.

The same steps as `serve` up to the launch (validation, the rendered file, the speaker decision,
the command), with the pod's environment instead of this shell's: what the manifests run does not
depend on the machine they were printed on.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from omni_deploy.config.yaml_loader import display_path
from omni_deploy.k8s.crossnode import edges
from omni_deploy.k8s.manifests import Inputs, build_manifests
from omni_deploy.k8s.options import CONFIG_DIR, K8sOptions
from omni_deploy.k8s.placement import group_stages, stage_uses


@dataclass
class BuildResult:
    objects: list[dict[str, Any]] = field(default_factory=list)
    report: str | None = None  # validation findings worth showing (errors stop the build)


def build(
    file: str | None, options: K8sOptions, target_version: str | None, shm_gib: int | None
) -> BuildResult:
    from omni_deploy.bundled import deploy_file_name
    from omni_deploy.host import assumed_host
    from omni_deploy.knowledge.versions import default_target_version
    from omni_deploy.resolve.speaker import decide
    from omni_deploy.serve.plan import LaunchOptions, build_plan, plan_record
    from omni_deploy.serve.render_config import render_deploy_config
    from omni_deploy.validate.context import Options
    from omni_deploy.validate.report import text as report_text
    from omni_deploy.validate.runner import validate_file

    target = target_version or default_target_version()
    platform = options.platform
    report = validate_file(
        deploy_file_name(file),
        Options(platforms=(platform,), target_version=target, gpus_per_node=options.gpus_per_node),
    )
    shown = report_text([report]) if any(f.severity != "info" for f in report.findings) else None
    if not report.valid or report.deployment is None:
        return BuildResult([], shown)
    deployment = report.deployment
    applied = deployment.on(platform)
    rendered = render_deploy_config(deployment, platform, None)
    # Decided for the pod, as `explain --backend` decides without --probe: an environment that only
    # the manifests set, and an image with omni-deploy's plugin in it.
    decision = decide(
        platform,
        deployment.pipeline,
        deployment.code2wav_extra(),
        deployment.code2wav_extra_path,
        {},
        assumed_host(target),
    )
    launch = LaunchOptions(
        model=options.model,
        platform=platform,
        host="0.0.0.0",
        port=options.port,
        served_model_name=options.served_model_name,
    )
    plan = build_plan(launch, f"{CONFIG_DIR}/deploy.yaml", decision, {})
    groups = group_stages(stage_uses(applied, deployment.pipeline), options.gpus_per_node)
    record = plan_record(
        plan,
        {
            "deploy_file": display_path(deployment.top),
            "platform": platform,
            "target_version": target,
            "notes": rendered.notes,
            "nodes": [
                {
                    "node": g.index,
                    "stages": [s.stage_id for s in g.stages],
                    "devices": list(g.devices),
                    "gpus": g.gpus,
                }
                for g in groups
            ],
        },
    )
    env = {k: v for k, v in plan.env_changes.items() if v is not None}
    inputs = Inputs(
        options, rendered.text, record, plan.argv, env, groups, edges(applied, deployment.pipeline), shm_gib
    )
    return BuildResult(build_manifests(inputs), shown)
