"""Where CosyVoice3, GLM-TTS and Ming-TTS compute CAM++ speaker embeddings in vllm-omni 0.30.0, and
why: the same decision `speaker_backend.decision` makes for MiniCPM-o 4.5's Code2Wav, for the other models
omni-deploy's plugin gives the CUDA path (`speaker_rules.MODELS`, `speaker_rules.choose_for`).

- Ming-TTS embeds in its stage-0 process: the deploy file decides (`ming_device_spk` in the extra
  of that stage's connector to stage 1, default true), env OMNI_DEPLOY_SPK_BACKEND in that stage's
  environment overrides, a stage under Ray sees only what vLLM copies to its workers.
- CosyVoice3 and GLM-TTS embed in their multimodal processor, in the API server process: only that
  process's environment decides (OMNI_DEPLOY_SPK_PROCESSOR=cuda-torch, opt-in); a stage's `env`
  never reaches it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from omni_deploy.config.nodes import Map, Scalar, child_path
from omni_deploy.config.stage_process import StageEnv
from omni_deploy.integrations.speaker_rules import (
    COSYVOICE3,
    CPU_ORT,
    CUDA_TORCH,
    ENV_BACKEND,
    ENV_COSYVOICE3_TRT,
    ENV_PROCESSOR,
    GLM_TTS,
    ORT_CUDA,
    PROCESSOR,
    TENSORRT,
    Backend,
    Choice,
    Model,
    choose_for,
    cosyvoice3_trt_enabled,
)
from omni_deploy.speaker_backend.from_deployment import STAGE_ENV, SpeakerInputs
from omni_deploy.speaker_backend.host import HostCaps, plugin_cannot_act
from omni_deploy.speaker_backend.ray_env import ray_env_warnings
from omni_deploy.speaker_backend.types import Fallback, Reason, SpeakerDecision


@dataclass
class _Process:
    """The process that embeds for `model`: its environment as the file leaves it, and where the
    deploy file's switch sits (the connector extra; none for a processor)."""

    where: str
    env: dict[str, str]
    extra: Map | None = None
    path: str = ""
    in_file: dict[str, StageEnv] = field(default_factory=dict)


def _processor(inputs: SpeakerInputs, env: dict[str, str], warnings: list[str]) -> _Process:
    """CosyVoice3's and GLM-TTS's processor: the API server's environment, which no stage env reaches."""
    assert inputs.model is not None
    for number, in_env in inputs.processor_env:
        for name, var in in_env.items():
            warnings.append(
                f"stages[{number}] env sets {name}={var.value} at {var.origin}: {inputs.model.title} runs in "
                "the API server, which a stage's env does not reach; set it in the server's environment"
            )
    return _Process("the API server process (the multimodal processor)", dict(env))


def _stage_process(model: Model, inputs: SpeakerInputs, env: dict[str, str], warnings: list[str]) -> _Process:
    """Ming-TTS's stage: its connector extra, its env over the server's, what Ray copies to workers."""
    process_env = {**env, **{name: var.value for name, var in inputs.in_file.items()}}
    if inputs.ray is not None:
        process_env, dropped = ray_env_warnings(f"stage {model.stage}", inputs.ray, process_env, STAGE_ENV,
                                                f"{inputs.extra_path}.{model.key}")  # fmt: skip
        warnings += dropped
    return _Process(
        f"stage {model.stage}'s process", process_env, inputs.extra, inputs.extra_path, inputs.in_file
    )


def model_decision(
    inputs: SpeakerInputs,
    *,
    env: dict[str, str],
    host: HostCaps,
    override: Backend | None = None,
) -> SpeakerDecision:
    """The effective speaker backend of `inputs.model` on `inputs.platform` (`inputs` is the deploy
    file's part, `from_deployment.speaker_inputs`)."""
    model, platform = inputs.model, inputs.platform
    assert model is not None
    reasons = [
        Reason("platform", platform, "--platform"),
        Reason("pipeline", inputs.pipeline.name, inputs.pipeline.source),
    ]
    warnings: list[str] = []
    if override is not None:
        warnings.append(f"--spk-backend writes MiniCPM-o 4.5's keys and does not reach {model.title}")
    if model.where == PROCESSOR:
        process = _processor(inputs, env, warnings)
    else:
        process = _stage_process(model, inputs, env, warnings)
    own = _vllm_omni_on_gpu(model, platform, process.env, host, reasons)
    if own is not None:
        return own
    plain = {}
    if model.key is not None and process.extra is not None:
        node = process.extra.get(model.key)
        if isinstance(node, Scalar):
            plain[model.key] = node.value
            reasons.append(Reason(child_path(process.path, model.key), node.value, str(node.origin)))
    choice = choose_for(model, plain, process.env, on_cuda=platform == "cuda")
    warnings += list(choice.problems)
    _decided_by(model, choice, process, plain, reasons)
    return _decision(model, choice, process, platform, host, reasons, warnings)


def _decided_by(
    model: Model, choice: Choice, process: _Process, plain: dict[str, Any], reasons: list[Reason]
) -> None:
    """The reason that decided: an environment variable (where it was set) or the key's default."""
    if choice.decided_by.startswith("env "):
        name = choice.decided_by.split()[1]
        in_file = model.where != PROCESSOR and name in process.in_file
        origin = process.in_file[name].origin if in_file else f"env {name}"
        if name not in process.env:
            origin = f"env {name} unset: opt-in, the API server process owns no GPU"
        reasons.append(Reason(name, process.env.get(name), origin))
    elif model.key is not None and model.key not in plain:
        reasons.append(Reason(child_path(process.path, model.key), True, "default"))


def _decision(
    model: Model,
    choice: Choice,
    process: _Process,
    platform: str,
    host: HostCaps,
    reasons: list[Reason],
    warnings: list[str],
) -> SpeakerDecision:
    switches = _switches(model, process.path)
    if choice.backend == CPU_ORT:
        provider = "vllm-omni (ONNX Runtime on the CPU" + (", off CUDA)" if platform != "cuda" else ")")
        return SpeakerDecision(platform, CPU_ORT, provider, "fp32", "fp32", None, None, reasons,
                               [f for f in switches if f.backend != CPU_ORT], warnings)  # fmt: skip
    missing = plugin_cannot_act(host, model, process.env, warnings)
    if missing:
        warnings.append(f"the CUDA CAM++ path cannot act on this host: missing {', '.join(missing)}")
        reasons.append(Reason("provider", "none", "host"))
        return SpeakerDecision(platform, CPU_ORT, "vllm-omni (ONNX Runtime, CPU): fallback, CUDA path unavailable",
                               "fp32", "fp32", None, None, reasons, switches, warnings)  # fmt: skip
    reasons.append(Reason("provider", "omni-deploy plugin", "host" if host.probed else "assumed"))
    return SpeakerDecision(
        platform,
        CUDA_TORCH,
        f"omni-deploy vLLM plugin, in {process.where}",
        "fp32",
        "fp32",
        choice.allow_tf32,
        "PyTorch's cuDNN flag (torch.backends.cudnn.allow_tf32, on by default)",
        reasons,
        [f for f in switches if f.backend != CUDA_TORCH],
        warnings,
    )


def _switches(model: Model, path: str) -> list[Fallback]:
    if model.where == PROCESSOR:
        return [
            Fallback(CUDA_TORCH, f"env {ENV_PROCESSOR}=cuda-torch in the server's environment (the API server "
                     "opens a CUDA context on its first GPU: docs/speaker-backends.md)"),
            Fallback(CPU_ORT, f"leave {ENV_PROCESSOR} unset, or set it to cpu-onnxruntime"),
        ]  # fmt: skip
    return [
        Fallback(CUDA_TORCH, f"set {path}.{model.key}: true (the default)"),
        Fallback(
            CPU_ORT, f"set {path}.{model.key}: false (or env {ENV_BACKEND}=cpu-onnxruntime for that stage)"
        ),
    ]


def _vllm_omni_on_gpu(
    model: Model, platform: str, env: dict[str, str], host: HostCaps, reasons: list[Reason]
) -> SpeakerDecision | None:
    """Where vllm-omni itself already runs the model's CAM++ on the GPU, which the plugin leaves
    alone: CosyVoice3's TensorRT engine, GLM-TTS's ONNX Runtime with onnxruntime-gpu's CUDA provider."""
    if platform != "cuda":
        return None
    if model is COSYVOICE3 and host.tensorrt and cosyvoice3_trt_enabled(env):
        reasons.append(Reason(ENV_COSYVOICE3_TRT, env.get(ENV_COSYVOICE3_TRT, "1"), "vllm-omni (default on)"))
        return SpeakerDecision(
            platform, TENSORRT, "vllm-omni (CosyVoice3's TensorRT engine built from campplus.onnx)",
            "TensorRT engine", "fp32", None, None, reasons,
            [Fallback(CPU_ORT, f"env {ENV_COSYVOICE3_TRT}=0 (then {ENV_PROCESSOR}=cuda-torch gives omni-deploy's "
                      "encoder)")],
        )  # fmt: skip
    if model is GLM_TTS and host.onnxruntime_gpu:
        reasons.append(Reason("onnxruntime-gpu", True, "host"))
        return SpeakerDecision(
            platform, ORT_CUDA, "vllm-omni (ONNX Runtime's CUDA provider, onnxruntime-gpu)", "fp32", "fp32",
            None, None, reasons, [],
            ["onnxruntime-gpu runs GLM-TTS's CAM++ on the GPU already; omni-deploy's plugin leaves it alone"],
        )  # fmt: skip
    return None
