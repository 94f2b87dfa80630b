"""Where MiniCPM-o 4.5's Code2Wav computes CAM++ speaker embeddings, in what precision, and why.

The rules themselves are `omni_deploy.speaker_rules.choose`, the function omni-deploy's vLLM plugin
applies inside the Code2Wav stage; this module feeds it the deploy file's settings and the stage's
environment (the process environment plus the stage's `runtime.env` from the file) and adds what
the plugin cannot know beforehand: where each setting came from (file:line:col), what this host can
provide, and how to switch. cuDNN TF32 follows PyTorch's own flag (on by default).
The CUDA path comes from the installed vllm-omni where it reads `token2wav_device_spk` itself,
else from omni-deploy's vLLM plugin; where neither can act, the CPU path is what runs.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from omni_deploy.config.nodes import Map, Node, Scalar, child_path, to_plain
from omni_deploy.host import HostCaps
from omni_deploy.install_hint import install_hint
from omni_deploy.knowledge.keys import by_place
from omni_deploy.knowledge.pipelines import PipelineInfo
from omni_deploy.knowledge.versions import RELEASED
from omni_deploy.speaker_rules import (
    CPU_ORT,
    CUDA_TORCH,
    DECISION_ENV,
    ENV_BACKEND,
    ENV_TF32,
    ENV_TRT,
    KEY_ALLOW_TF32,
    KEY_DEVICE_SPK,
    KEY_TRT,
    PLUGIN_NAME,
    PLUGINS_ALLOWLIST_ENV,
    TENSORRT,
    Backend,
    choose,
)

if TYPE_CHECKING:
    from omni_deploy.deployment import Deployment

__all__ = [
    "CPU_ORT",
    "CUDA_TORCH",
    "NOT_APPLICABLE",
    "TENSORRT",
    "UNKNOWN",
    "SpeakerDecision",
    "speaker_decision",
]
VLLM_OMNI_TRT = ENV_TRT
NOT_APPLICABLE, UNKNOWN = "not-applicable", "unknown"


@dataclass(frozen=True)
class Reason:
    setting: str
    value: Any
    origin: str  # file:line:col (layer), "env NAME", "default", "--spk-backend", "host"


@dataclass(frozen=True)
class Fallback:
    backend: Backend
    how: str


@dataclass
class SpeakerDecision:
    platform: str
    speaker_backend: str
    provider: str
    weights_dtype: str | None = None
    inputs_dtype: str | None = None
    matmul_tf32: bool | None = None
    cudnn_tf32: str | None = None
    reasons: list[Reason] = field(default_factory=list)
    fallbacks: list[Fallback] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out.pop("platform")
        return out


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


@dataclass(frozen=True)
class StageEnv:
    """A variable the deploy file sets for the Code2Wav stage (`runtime.env`, `env`, or a platform
    section's stage `env`), which vllm-omni applies when it spawns that stage."""

    value: str
    origin: str


def _stage_env(stages: list[Map], stage_id: int | None) -> dict[str, StageEnv]:
    """The decision variables the (platform-applied) stage `stage_id` sets in its environment."""
    found: dict[str, StageEnv] = {}
    for stage in stages:
        sid = stage.get("stage_id")
        if stage_id is None or not isinstance(sid, Scalar) or sid.value != stage_id:
            continue
        env = stage.get("env")
        if not isinstance(env, Map):
            continue
        for name in DECISION_ENV:
            node = env.get(name)
            if isinstance(node, Scalar) and node.value is not None:
                value = to_plain(node)
                text = str(value).lower() if isinstance(value, bool) else str(value)
                found[name] = StageEnv(text, f"{node.origin} (stages[{stage_id}] env)")
    return found


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
        TENSORRT: f"set {extra_path}.token2wav_trt: true (or env {VLLM_OMNI_TRT}=1), or `omni-deploy serve "
        "--spk-backend tensorrt`; needs TensorRT on the host and also moves the DiT estimator to TensorRT",
    }
    return [Fallback(b, how) for b, how in options.items() if b != current]


def speaker_decision(
    deployment: Deployment,
    platform: str,
    *,
    env: dict[str, str],
    host: HostCaps,
    override: Backend | None = None,
) -> SpeakerDecision:
    """The effective speaker backend of the Code2Wav stage on `platform`, and why.

    Gathers its own inputs from the Deployment: the pipeline, the Code2Wav extra and its path, and
    the environment the file gives that stage (the platform view's stage `env`). `env` is the
    environment of the process that starts the server (the pod's for k8s), `host` what the serving
    host provides, `override` serve's --spk-backend.
    """
    return _decide(
        platform,
        deployment.pipeline,
        deployment.code2wav_extra(),
        deployment.code2wav_extra_path,
        env,
        host,
        override,
        _code2wav_stage_env(deployment, platform),
    )


def _decide(
    platform: str,
    pipeline: PipelineInfo,
    extra: Map | None,
    extra_path: str,
    env: dict[str, str],
    host: HostCaps,
    override: Backend | None = None,
    stage_env_vars: dict[str, StageEnv] | None = None,
) -> SpeakerDecision:
    """The effective speaker backend of one platform. `override` is serve's --spk-backend;
    `stage_env_vars` what the file's Code2Wav stage sets in its own environment (`_stage_env`)."""
    if not pipeline.is_minicpmo:
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
    trt = _setting(extra, extra_path, KEY_TRT)
    device_spk = _setting(extra, extra_path, KEY_DEVICE_SPK)
    tf32 = _setting(extra, extra_path, KEY_ALLOW_TF32)
    in_file = stage_env_vars or {}
    stage_environ = {**env, **{name: var.value for name, var in in_file.items()}}
    plain = {s.name.rsplit(".", 1)[-1]: s.value for s in (trt, device_spk, tf32) if s.explicit}
    choice = choose(plain, stage_environ, on_cuda=platform == "cuda")
    reasons = [Reason("platform", platform, "--platform")]
    warnings: list[str] = list(choice.problems)

    def env_reason(name: str) -> Reason:
        origin = in_file[name].origin if name in in_file else f"env {name}"
        return Reason(name, stage_environ.get(name), origin)

    if platform != "cuda":
        for s in (trt, device_spk):
            if s.explicit:
                warnings.append(f"{s.name} has no effect on {platform} (set at {s.origin})")
        if override not in (None, CPU_ORT):
            warnings.append(f"--spk-backend {override} has no effect on {platform}")
        reasons.append(
            Reason("platform rule", "CAM++ runs with ONNX Runtime on the CPU off CUDA", "vllm-omni")
        )
        return _cpu(platform, reasons, [], warnings)

    for name, var in in_file.items():
        warnings.append(
            f"the Code2Wav stage's env sets {name}={var.value} at {var.origin}; it applies to that stage "
            "only and wins over the process environment"
        )
    wanted: Backend
    if override is not None:
        reasons.append(Reason("--spk-backend", override, "--spk-backend"))
        wanted = override
    else:
        wanted = choice.backend
        if choice.decided_by == f"env {ENV_TRT}":
            reasons.append(env_reason(ENV_TRT))
        elif choice.decided_by == KEY_TRT:
            reasons.append(Reason(trt.name, trt.value, trt.origin))
        elif choice.decided_by == f"env {ENV_BACKEND}":
            reasons.append(Reason(trt.name, trt.value, trt.origin))
            reasons.append(env_reason(ENV_BACKEND))
            if device_spk.explicit:
                warnings.append(
                    f"{ENV_BACKEND}={stage_environ[ENV_BACKEND]} overrides {device_spk.name} "
                    f"(set at {device_spk.origin})"
                )
        else:
            reasons.append(Reason(trt.name, trt.value, trt.origin))
            reasons.append(Reason(device_spk.name, device_spk.value, device_spk.origin))
    tf32_reason = (
        env_reason(ENV_TF32)
        if choice.tf32_by == f"env {ENV_TF32}"
        else Reason(tf32.name, tf32.value, tf32.origin)
    )

    if wanted == TENSORRT:
        if host.probed and not host.tensorrt:
            warnings.append("tensorrt does not import on this host: the TensorRT build will fail at start-up")
        return SpeakerDecision(
            platform,
            TENSORRT,
            "vllm-omni (TensorRT engine built from campplus.onnx)",
            "TensorRT engine",
            "fp32",
            None,
            None,
            reasons,
            _fallbacks(extra_path, TENSORRT),
            warnings,
        )
    if wanted == CPU_ORT:
        return _cpu(platform, reasons, _fallbacks(extra_path, CPU_ORT), warnings)

    # cuda-torch: who can provide it on this host?
    reasons.append(tf32_reason)
    if host.vllm_omni_reads_device_spk:
        provider = "vllm-omni (reads token2wav_device_spk itself)"
        reasons.append(
            Reason("provider", "vllm-omni", "host" if host.probed else f"assumed vllm-omni {host.vllm_omni}")
        )
    else:
        missing = [name for name, ok in (("torch", host.torch), ("onnx", host.onnx)) if not ok]
        if not host.plugin_registered:
            missing.append(f"omni-deploy's vLLM plugin ({install_hint('speaker')})")
        if not host.plugin_allowed:
            missing.append(
                f"omni-deploy's vLLM plugin in {PLUGINS_ALLOWLIST_ENV}={host.plugins_allowlist} (an allowlist: "
                f"add {PLUGIN_NAME})"
            )
        if host.vllm_elsewhere:
            missing.append(
                f"omni-deploy in the environment of the `vllm` first on PATH ({host.vllm_on_path}, run by "
                f"{host.vllm_on_path_python}): the plugin registered here is not visible to that server"
            )
        if missing:
            warnings.append(f"the CUDA CAM++ path cannot act on this host: missing {', '.join(missing)}")
            reasons.append(Reason("provider", "none", "host"))
            return _cpu(
                platform,
                reasons,
                _fallbacks(extra_path, CPU_ORT),
                warnings,
                "vllm-omni (ONNX Runtime, CPU): fallback, CUDA path unavailable",
            )
        provider = f"omni-deploy vLLM plugin (vllm-omni {host.vllm_omni or RELEASED} does not read token2wav_device_spk)"
        reasons.append(Reason("provider", "omni-deploy plugin", "host" if host.probed else "assumed"))
    if tf32.explicit and not host.vllm_omni_reads_device_spk:
        warnings.append(
            f"{tf32.name} is applied to CAM++ by omni-deploy's plugin; vllm-omni {host.vllm_omni or RELEASED} "
            "ignores it for the rest of Code2Wav"
        )
    return SpeakerDecision(
        platform,
        CUDA_TORCH,
        provider,
        "fp32",
        "fp32",
        choice.allow_tf32,
        "PyTorch's cuDNN flag (torch.backends.cudnn.allow_tf32, on by default)",
        reasons,
        _fallbacks(extra_path, CUDA_TORCH),
        warnings,
    )


def _code2wav_stage_env(deployment: Deployment, platform: str) -> dict[str, StageEnv]:
    """`_stage_env` of the Code2Wav stage in `platform`'s view of the file, as vllm-omni spawns it;
    empty when the file cannot be applied for that platform (validate reports why)."""
    from omni_deploy.errors import OmniDeployError

    known = deployment.pipeline.known
    if known is None or known.code2wav_stage is None:
        return {}
    try:
        applied = deployment.on(platform)
    except OmniDeployError:
        return {}
    return _stage_env(applied.stages, known.code2wav_stage)
