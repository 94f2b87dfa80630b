"""The deploy file a server runs: the effective config for one platform, as the bytes written out.

`serve` writes it into its run directory and `k8s` into a ConfigMap, both through the launch spec,
so a cluster runs exactly what `serve` would run for the same file and platform.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

from omni_deploy.config.nodes import Entry, Map, Origin, Scalar
from omni_deploy.config.render import to_yaml, yaml_comment
from omni_deploy.config.yaml_loader import display_path
from omni_deploy.deployment.model import Deployment
from omni_deploy.integrations.speaker_rules import CPU_ORT, CUDA_TORCH, TENSORRT, Backend


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
    extra = deployment.code2wav_extra_in(config)
    notes = apply_speaker_override(extra, spk_backend, Origin("--spk-backend", 0, 0, "override"))
    header = (
        f"# Rendered by omni-deploy from {yaml_comment(display_path(deployment.top))} for platform {platform}\n"
        + "".join(f"# {yaml_comment(n)}\n" for n in notes)
    )
    return RenderedConfig(to_yaml(config, header), platform, notes)


def apply_speaker_override(extra: Map | None, backend: Backend | None, origin: Origin) -> list[str]:
    """Write --spk-backend into the rendered config's Code2Wav extra, so vllm-omni and the plugin agree."""
    if backend is None or extra is None:
        return []
    notes = []
    wanted = backend == TENSORRT
    current = extra.get("token2wav_trt")
    if (isinstance(current, Scalar) and current.value is not wanted) or (current is None and wanted):
        extra.entries["token2wav_trt"] = Entry(origin, Scalar(wanted, origin))
        notes.append(
            f"rendered config: token2wav_trt set to {str(wanted).lower()} by --spk-backend {backend}"
        )
    if backend in (CUDA_TORCH, CPU_ORT):
        device_spk = backend == CUDA_TORCH
        node = extra.get("token2wav_device_spk")
        if node is not None or not device_spk:
            extra.entries["token2wav_device_spk"] = Entry(origin, Scalar(device_spk, origin))
            notes.append(
                f"rendered config: token2wav_device_spk set to {str(device_spk).lower()} by --spk-backend"
            )
    return notes
