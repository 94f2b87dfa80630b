"""The deploy file a server runs: the effective config for one platform, as the bytes written out.

`serve` writes it into its run directory and `k8s` into a ConfigMap; both call this one function,
so a cluster runs exactly what `serve` would run for the same file and platform.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

from omni_deploy.config.nodes import Map, Origin
from omni_deploy.config.render import to_yaml
from omni_deploy.config.yaml_loader import display_path
from omni_deploy.deployment import Deployment
from omni_deploy.integration_env import Backend
from omni_deploy.serve.plan import apply_speaker_override


@dataclass(frozen=True)
class RenderedConfig:
    text: str
    platform: str
    notes: list[str] = field(default_factory=list)  # what --spk-backend changed in the file


def render_deploy_config(
    deployment: Deployment, platform: str, spk_backend: Backend | None
) -> RenderedConfig:
    """`base_config` resolved, the platform section applied, `spk_backend` (if any) written in.

    Works on a copy: the deployment's platform view stays what validation saw.
    """
    config = copy.deepcopy(deployment.on(platform).config)
    extra = None
    found = deployment.code2wav_connector()
    if found is not None:
        connectors = config.get("connectors")
        connector = connectors.get(found[0]) if isinstance(connectors, Map) else None
        node = connector.get("extra") if isinstance(connector, Map) else None
        extra = node if isinstance(node, Map) else None
    notes = apply_speaker_override(config, extra, spk_backend, Origin("--spk-backend", 0, 0, "override"))
    header = (
        f"# Rendered by omni-deploy from {display_path(deployment.top)} for platform {platform}\n"
        + "".join(f"# {n}\n" for n in notes)
    )
    return RenderedConfig(to_yaml(config, header), platform, notes)
