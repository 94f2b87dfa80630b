"""From a validated Deployment and the k8s options to the objects: launch spec, placement, build.

The launch spec is the one `serve` takes (the rendered file, the speaker decision, the command),
decided for the pod: the environment the manifests give it (nothing of this shell's) and an image
with omni-deploy's plugin in it, the serving host `explain --backend` decides for without --probe.
What the manifests run does not depend on the machine they were printed on.
"""

from __future__ import annotations

from typing import Any

from omni_deploy.config.yaml_loader import display_path
from omni_deploy.deployment.model import Deployment
from omni_deploy.deployment.topology.crossnode import edges
from omni_deploy.deployment.topology.placement import group_stages, stage_uses
from omni_deploy.k8s.manifests import Inputs, build_manifests
from omni_deploy.k8s.options import CONFIG_DIR, K8sOptions
from omni_deploy.launch.options import LaunchOptions
from omni_deploy.launch.spec import launch_spec
from omni_deploy.speaker_backend import assumed_host


def build(
    deployment: Deployment, options: K8sOptions, target_version: str, shm_gib: int | None
) -> list[dict[str, Any]]:
    """The objects for a deployment that passed validation for `options.platform` (raises
    PlacementError where validate would have reported E391)."""
    platform = options.platform
    launch = LaunchOptions(
        model=options.model,
        platform=platform,
        host="0.0.0.0",
        port=options.port,
        served_model_name=options.served_model_name,
    )
    spec = launch_spec(deployment, launch, host=assumed_host(target_version), env={})
    plan = spec.plan(f"{CONFIG_DIR}/deploy.yaml")
    applied = deployment.on(platform)
    groups = group_stages(stage_uses(applied, deployment.pipeline), options.gpus_per_node)
    record = plan.record(
        {
            "deploy_file": display_path(deployment.top),
            "platform": platform,
            "target_version": target_version,
            "notes": spec.rendered.notes,
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
        options,
        spec.rendered.text,
        record,
        plan.argv,
        env,
        groups,
        edges(applied, deployment.pipeline),
        shm_gib,
    )
    objects = build_manifests(inputs)
    from omni_deploy.k8s.limits import check_objects

    check_objects(objects, options.name)
    return objects
