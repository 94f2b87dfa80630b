"""Host checks before a launch: each refusal is a message, nothing is started."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from omni_deploy.common.install_hint import install_hint
from omni_deploy.integrations.speaker_rules import CUDA_TORCH
from omni_deploy.knowledge.versions import major_minor
from omni_deploy.speaker_backend import HostCaps


@dataclass(frozen=True)
class Refusal:
    check: str
    message: str
    hint: str | None = None


@dataclass
class Preflight:
    refusals: list[Refusal]
    notes: list[str]
    versions: dict[str, str | None]


def _package_refusals(host: HostCaps) -> list[Refusal]:
    """vllm and vllm-omni: on PATH, installed with a version that can be read, of one major.minor."""
    refusals: list[Refusal] = []
    if shutil.which("vllm") is None:
        refusals.append(Refusal("vllm", "no `vllm` executable on PATH", install_hint("serve")))
    unusable = host.version_problems
    if unusable.get("vllm-omni") is not None:
        refusals.append(
            Refusal("vllm-omni", f"the installed vllm-omni's metadata gives {unusable['vllm-omni']}")
        )
    elif host.vllm_omni is None:
        refusals.append(
            Refusal(
                "vllm-omni",
                "vllm-omni is not installed in this environment",
                install_hint("serve"),
            )
        )
    if unusable.get("vllm") is not None:
        refusals.append(Refusal("vllm", f"the installed vllm's metadata gives {unusable['vllm']}"))
    vllm, vllm_omni = host.vllm, host.vllm_omni
    if vllm is not None and vllm_omni is not None and major_minor(vllm) != major_minor(vllm_omni):
        refusals.append(
            Refusal(
                "versions",
                f"vllm {vllm} and vllm-omni {vllm_omni} differ in "
                "major.minor; a vllm-omni release expects the vllm release of the same major.minor",
            )
        )
    return refusals


def run_preflight(model: str, platform: str, backend: str, host: HostCaps) -> Preflight:
    """Checks of this host, from its snapshot (`probe_host()`), and of the model path."""
    refusals = _package_refusals(host)
    notes: list[str] = []
    versions = {"vllm": host.vllm, "vllm-omni": host.vllm_omni}
    if platform == "cuda":
        if not host.gpus:
            refusals.append(
                Refusal("gpu", f"no CUDA GPU visible ({host.gpu_query})", "check the driver, or --platform")
            )
        else:
            notes.append(f"GPUs: {', '.join(host.gpus)}")
    local = Path(model).expanduser()
    if local.exists():
        onnx = local / "assets" / "token2wav" / "campplus.onnx"
        if backend == CUDA_TORCH and not onnx.is_file():
            refusals.append(
                Refusal(
                    "model",
                    f"{local} has no {onnx.relative_to(local)}: the CUDA CAM++ path loads it",
                    "is this a MiniCPM-o 4.5 checkout? or use --spk-backend cpu-onnxruntime",
                )
            )
    elif model.startswith(("/", ".", "~")):
        refusals.append(Refusal("model", f"model path {model} does not exist"))
    else:
        notes.append(
            f"model {model} is a hub id: its assets are checked by the server when it downloads them"
        )
    return Preflight(refusals, notes, versions)
