"""Where MiniCPM-o 4.5's Code2Wav computes CAM++ speaker embeddings, in what precision, and why.

The rules themselves are `omni_deploy.integrations.speaker_rules.choose`, the function omni-deploy's vLLM plugin
applies inside the Code2Wav stage; this module feeds it the deploy file's settings and the stage's
environment (the process environment plus the stage's `runtime.env` from the file) and adds what
the plugin cannot know beforehand: where each setting came from (file:line:col), what this host can
provide, and how to switch. cuDNN TF32 follows PyTorch's own flag (on by default).
The CUDA path comes from the installed vllm-omni where it reads `token2wav_device_spk` itself,
else from omni-deploy's vLLM plugin; where neither can act, the CPU path is what runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from omni_deploy.config.nodes import Map, Node, Scalar, child_path
from omni_deploy.config.stage_process import StageEnv
from omni_deploy.integrations.speaker_rules import (
    CPU_ORT,
    CUDA_TORCH,
    DECISION_ENV,
    ENV_BACKEND,
    ENV_TF32,
    ENV_TRT,
    KEY_ALLOW_TF32,
    KEY_DEVICE_SPK,
    KEY_TRT,
    MINICPMO,
    TENSORRT,
    Backend,
    Choice,
    choose,
)
from omni_deploy.knowledge.keys import by_place
from omni_deploy.knowledge.pipelines import PipelineInfo
from omni_deploy.knowledge.versions import RELEASED
from omni_deploy.speaker_backend.host import HostCaps, plugin_cannot_act
from omni_deploy.speaker_backend.ray_env import ray_env_warnings
from omni_deploy.speaker_backend.types import (
    NOT_APPLICABLE,
    UNKNOWN,
    Fallback,
    Reason,
    SpeakerDecision,
)

if TYPE_CHECKING:
    from omni_deploy.speaker_backend.from_deployment import SpeakerInputs


@dataclass(frozen=True)
class Setting:
    name: str
    value: Any
    origin: str
    explicit: bool


def _setting(extra: Map | None, path: str, name: str) -> Setting:
    """The knob as set in the Code2Wav extra, else its default from the knowledge table (which takes
    the three speaker keys' defaults from speaker_rules, the plugin's table)."""
    node: Node | None = extra.get(name) if extra is not None else None
    if isinstance(node, Scalar):
        return Setting(child_path(path, name), node.value, str(node.origin), True)
    return Setting(child_path(path, name), by_place("code2wav")[name].default, "default", False)


def _cpu(
    platform: str,
    reasons: list[Reason],
    fallbacks: list[Fallback],
    warnings: list[str],
    provider: str = "vllm-omni (ONNX Runtime, CPU, 1 intra-op thread)",
) -> SpeakerDecision:
    return SpeakerDecision(
        platform, CPU_ORT, provider, "fp32", "fp32", None, None, reasons, fallbacks, warnings
    )


def _fallbacks(extra_path: str, current: str) -> list[Fallback]:
    options = {
        CUDA_TORCH: f"set {extra_path}.token2wav_device_spk: true (the default) with token2wav_trt off, "
        "or `omni-deploy serve --spk-backend cuda-torch`",
        CPU_ORT: f"set {extra_path}.token2wav_device_spk: false, or `omni-deploy serve --spk-backend "
        "cpu-onnxruntime`",
        TENSORRT: f"set {extra_path}.token2wav_trt: true (or env {ENV_TRT}=1), or `omni-deploy serve "
        "--spk-backend tensorrt`; needs TensorRT on the host and also moves the DiT estimator to TensorRT",
    }
    return [Fallback(b, how) for b, how in options.items() if b != current]


def code2wav_decision(
    inputs: SpeakerInputs,
    *,
    env: dict[str, str],
    host: HostCaps,
    override: Backend | None = None,
) -> SpeakerDecision:
    """The effective speaker backend of the Code2Wav stage on `inputs.platform`, and why (the
    package's `speaker_decision` asks `other_models.model_decision` instead for CosyVoice3, GLM-TTS
    and Ming-TTS).

    `inputs` is the deploy file's part (`from_deployment.speaker_inputs`): the pipeline, the Code2Wav extra
    and its path, what the platform view's Code2Wav stage sets in its `env`, and whether that
    stage's model runs in Ray workers. `env` is the environment of the process that starts the
    server (the pod's for k8s), `host` what the serving host provides, `override` serve's --spk-backend.
    """
    platform, pipeline = inputs.platform, inputs.pipeline
    if not pipeline.is_minicpmo:
        return _not_minicpmo(platform, pipeline)
    ask = _ask(inputs, env)
    if platform != "cuda":
        return _off_cuda(ask, override)
    for name, var in ask.in_file.items():
        ask.warnings.append(
            f"the Code2Wav stage's env sets {name}={var.value} at {var.origin}; it applies to that stage "
            "only and wins over the process environment"
        )
    wanted = _wanted(ask, override)
    if wanted == TENSORRT:
        return _tensorrt(ask, host)
    if wanted == CPU_ORT:
        return _cpu(platform, ask.reasons, _fallbacks(inputs.extra_path, CPU_ORT), ask.warnings)
    return _cuda_torch(ask, host)


@dataclass
class _Ask:
    """One platform's decision in the making: its settings, the stage's environment, what the
    rules chose, and the reasons and warnings gathered so far."""

    platform: str
    extra_path: str
    trt: Setting
    device_spk: Setting
    tf32: Setting
    in_file: dict[str, StageEnv]  # what the file's Code2Wav stage sets in its own environment
    environ: dict[str, str]  # the stage process's environment: the process's, then the file's
    choice: Choice
    reasons: list[Reason]
    warnings: list[str]

    def setting_reason(self, setting: Setting) -> Reason:
        return Reason(setting.name, setting.value, setting.origin)

    def env_reason(self, name: str) -> Reason:
        origin = self.in_file[name].origin if name in self.in_file else f"env {name}"
        return Reason(name, self.environ.get(name), origin)


def _not_minicpmo(platform: str, pipeline: PipelineInfo) -> SpeakerDecision:
    if pipeline.name is None:
        return SpeakerDecision(
            platform,
            UNKNOWN,
            "unknown",
            reasons=[Reason("pipeline", None, pipeline.source)],
            warnings=["the pipeline is unknown: pass --pipeline minicpmo_4_5 if this is MiniCPM-o 4.5"],
        )
    return SpeakerDecision(
        platform,
        NOT_APPLICABLE,
        f"{pipeline.name} keeps its own speaker path",
        reasons=[Reason("pipeline", pipeline.name, pipeline.source)],
    )


def _ask(inputs: SpeakerInputs, env: dict[str, str]) -> _Ask:
    """The settings, the stage process's environment and what the rules chose from them."""
    path = inputs.extra_path
    trt = _setting(inputs.extra, path, KEY_TRT)
    device_spk = _setting(inputs.extra, path, KEY_DEVICE_SPK)
    tf32 = _setting(inputs.extra, path, KEY_ALLOW_TF32)
    environ = {**env, **{name: var.value for name, var in inputs.in_file.items()}}
    ray_warnings: list[str] = []
    if (
        inputs.ray is not None
    ):  # the stage's model runs in Ray workers: what they see of its environment decides
        hint = f"{path}.{KEY_DEVICE_SPK}, {KEY_TRT}, {KEY_ALLOW_TF32}"
        environ, ray_warnings = ray_env_warnings(
            "the Code2Wav stage", inputs.ray, environ, DECISION_ENV, hint
        )
    plain = {s.name.rsplit(".", 1)[-1]: s.value for s in (trt, device_spk, tf32) if s.explicit}
    choice = choose(plain, environ, on_cuda=inputs.platform == "cuda")
    reasons = [Reason("platform", inputs.platform, "--platform")]
    warnings = [*ray_warnings, *choice.problems]
    return _Ask(
        inputs.platform, path, trt, device_spk, tf32, inputs.in_file, environ, choice, reasons, warnings
    )


def _off_cuda(ask: _Ask, override: Backend | None) -> SpeakerDecision:
    for s in (ask.trt, ask.device_spk):
        if s.explicit:
            ask.warnings.append(f"{s.name} has no effect on {ask.platform} (set at {s.origin})")
    if override not in (None, CPU_ORT):
        ask.warnings.append(f"--spk-backend {override} has no effect on {ask.platform}")
    ask.reasons.append(
        Reason("platform rule", "CAM++ runs with ONNX Runtime on the CPU off CUDA", "vllm-omni")
    )
    return _cpu(ask.platform, ask.reasons, [], ask.warnings)


def _wanted(ask: _Ask, override: Backend | None) -> Backend:
    """The backend asked for (--spk-backend, else the rules), with the settings that decided it."""
    if override is not None:
        ask.reasons.append(Reason("--spk-backend", override, "--spk-backend"))
        return override
    decided_by = ask.choice.decided_by
    if decided_by == f"env {ENV_TRT}":
        ask.reasons.append(ask.env_reason(ENV_TRT))
        return ask.choice.backend
    ask.reasons.append(ask.setting_reason(ask.trt))
    if decided_by == f"env {ENV_BACKEND}":
        ask.reasons.append(ask.env_reason(ENV_BACKEND))
        if ask.device_spk.explicit:
            ask.warnings.append(
                f"{ENV_BACKEND}={ask.environ[ENV_BACKEND]} overrides {ask.device_spk.name} "
                f"(set at {ask.device_spk.origin})"
            )
    elif decided_by != KEY_TRT:
        ask.reasons.append(ask.setting_reason(ask.device_spk))
    return ask.choice.backend


def _tensorrt(ask: _Ask, host: HostCaps) -> SpeakerDecision:
    if host.probed and not host.tensorrt:
        ask.warnings.append("tensorrt does not import on this host: the TensorRT build will fail at start-up")
    return SpeakerDecision(
        ask.platform,
        TENSORRT,
        "vllm-omni (TensorRT engine built from campplus.onnx)",
        "TensorRT engine",
        "fp32",
        None,
        None,
        ask.reasons,
        _fallbacks(ask.extra_path, TENSORRT),
        ask.warnings,
    )


def _cuda_torch(ask: _Ask, host: HostCaps) -> SpeakerDecision:
    """cuda-torch, if someone on this host can provide it: vllm-omni itself or omni-deploy's plugin."""
    tf32 = ask.tf32
    ask.reasons.append(
        ask.env_reason(ENV_TF32) if ask.choice.tf32_by == f"env {ENV_TF32}" else ask.setting_reason(tf32)
    )
    if host.vllm_omni_reads_device_spk:
        provider = "vllm-omni (reads token2wav_device_spk itself)"
        where = "host" if host.probed else f"assumed vllm-omni {host.vllm_omni}"
        ask.reasons.append(Reason("provider", "vllm-omni", where))
    else:
        missing = plugin_cannot_act(host, MINICPMO, ask.environ, ask.warnings)
        if missing:
            ask.warnings.append(f"the CUDA CAM++ path cannot act on this host: missing {', '.join(missing)}")
            ask.reasons.append(Reason("provider", "none", "host"))
            return _cpu(
                ask.platform,
                ask.reasons,
                _fallbacks(ask.extra_path, CPU_ORT),
                ask.warnings,
                "vllm-omni (ONNX Runtime, CPU): fallback, CUDA path unavailable",
            )
        provider = f"omni-deploy vLLM plugin (vllm-omni {host.vllm_omni or RELEASED} does not read token2wav_device_spk)"
        ask.reasons.append(Reason("provider", "omni-deploy plugin", "host" if host.probed else "assumed"))
        if tf32.explicit and not host.vllm_omni_reads_tf32:
            ask.warnings.append(
                f"{tf32.name} is applied to CAM++ by omni-deploy's plugin; vllm-omni {host.vllm_omni or RELEASED} "
                "ignores it for the rest of Code2Wav"
            )
    return SpeakerDecision(
        ask.platform,
        CUDA_TORCH,
        provider,
        "fp32",
        "fp32",
        ask.choice.allow_tf32,
        "PyTorch's cuDNN flag (torch.backends.cudnn.allow_tf32, on by default)",
        ask.reasons,
        _fallbacks(ask.extra_path, CUDA_TORCH),
        ask.warnings,
    )
