"""Where MiniCPM-o 4.5's Code2Wav computes CAM++ speaker embeddings, in what precision, and why.

Rules (MiniCPM-o 4.5 Code2Wav only):
- CUDA: `token2wav_trt: true` (or MINICPMO_TOKEN2WAV_TRT=1) selects TensorRT; otherwise
  `token2wav_device_spk` (default true) selects the torch CAM++ on the stage's GPU, FP32 weights
  and inputs, matmul TF32 per `token2wav_allow_tf32` (default true), cuDNN TF32 per PyTorch's own
  flag (on by default); `token2wav_device_spk: false` selects ONNX Runtime on the CPU.
- Every other platform: ONNX Runtime on the CPU.
- The CUDA path comes from the installed vllm-omni where it reads `token2wav_device_spk` itself,
  else from omni-deploy's vLLM plugin; where neither can act, the CPU path is what runs.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from omni_deploy.config.nodes import Map, Node, Scalar, child_path
from omni_deploy.host import HostCaps
from omni_deploy.install_hint import install_hint
from omni_deploy.integration_env import CPU_ORT, CUDA_TORCH, TENSORRT, VLLM_OMNI_TRT, Backend
from omni_deploy.knowledge.keys import by_place
from omni_deploy.knowledge.pipelines import PipelineInfo
from omni_deploy.knowledge.versions import RELEASED

__all__ = ["CPU_ORT", "CUDA_TORCH", "NOT_APPLICABLE", "TENSORRT", "UNKNOWN", "SpeakerDecision", "decide"]
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
    """The knob as set in the Code2Wav extra, else its default from the knowledge table."""
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
        TENSORRT: f"set {extra_path}.token2wav_trt: true (or env {VLLM_OMNI_TRT}=1), or `omni-deploy serve "
        "--spk-backend tensorrt`; needs TensorRT on the host and also moves the DiT estimator to TensorRT",
    }
    return [Fallback(b, how) for b, how in options.items() if b != current]


def decide(
    platform: str,
    pipeline: PipelineInfo,
    extra: Map | None,
    extra_path: str,
    env: dict[str, str],
    host: HostCaps,
    override: Backend | None = None,
) -> SpeakerDecision:
    """The effective speaker backend of one platform. `override` is serve's --spk-backend."""
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
    trt = _setting(extra, extra_path, "token2wav_trt")
    device_spk = _setting(extra, extra_path, "token2wav_device_spk")
    tf32 = _setting(extra, extra_path, "token2wav_allow_tf32")
    env_trt = env.get(VLLM_OMNI_TRT) == "1"
    reasons = [Reason("platform", platform, "--platform")]
    warnings: list[str] = []

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

    wanted: str
    if override is not None:
        reasons.append(Reason("--spk-backend", override, "--spk-backend"))
        wanted = override
    elif env_trt or trt.value is True:
        reasons.append(
            Reason(VLLM_OMNI_TRT, "1", f"env {VLLM_OMNI_TRT}")
            if env_trt
            else Reason(trt.name, trt.value, trt.origin)
        )
        wanted = TENSORRT
    else:
        reasons.append(Reason(trt.name, trt.value, trt.origin))
        reasons.append(Reason(device_spk.name, device_spk.value, device_spk.origin))
        wanted = CUDA_TORCH if device_spk.value is not False else CPU_ORT

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
    reasons.append(Reason(tf32.name, tf32.value, tf32.origin))
    if host.vllm_omni_reads_device_spk:
        provider = "vllm-omni (reads token2wav_device_spk itself)"
        reasons.append(
            Reason("provider", "vllm-omni", "host" if host.probed else f"assumed vllm-omni {host.vllm_omni}")
        )
    else:
        missing = [name for name, ok in (("torch", host.torch), ("onnx", host.onnx)) if not ok]
        if not host.plugin_registered:
            missing.append(f"omni-deploy's vLLM plugin ({install_hint('speaker')})")
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
        if device_spk.explicit:
            warnings.append(
                f"{device_spk.name} is read by omni-deploy serve, which tells its plugin; vllm-omni "
                f"{host.vllm_omni or RELEASED} itself ignores the key"
            )
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
        bool(tf32.value),
        "PyTorch's cuDNN flag (torch.backends.cudnn.allow_tf32, on by default)",
        reasons,
        _fallbacks(extra_path, CUDA_TORCH),
        warnings,
    )
