"""The rule table for MiniCPM-o 4.5 Code2Wav's speaker-embedding (CAM++) backend: key names,
defaults, environment variables and their precedence, in one place.

Standard library only: the vLLM plugin applies these rules inside the Code2Wav stage process (where
jsonschema and the config code may be missing), and the resolver behind `explain`, `serve
--dry-run` and the validate key table applies the same rules to a deploy file. Both import this
module, so the two can only disagree about facts (what the host has), never about rules.

Precedence, first match wins (Code2Wav stage of MiniCPM-o 4.5):
1. TensorRT: `token2wav_trt: true` or env MINICPMO_TOKEN2WAV_TRT=1, on CUDA. vllm-omni swaps its own
   TensorRT speaker model in; nothing here touches it.
2. Env OMNI_DEPLOY_SPK_BACKEND=cuda-torch|cpu-onnxruntime: an explicit override for the process (a
   stage's `runtime.env` in the deploy file sets it for that stage only).
3. `token2wav_device_spk` (default true): true -> cuda-torch, false -> cpu-onnxruntime.
A stage that does not run on CUDA keeps ONNX Runtime on the CPU whatever the above says (env
OMNI_DEPLOY_SPK_ALLOW_CPU=1 lets the CPU stand in for CUDA, for tests). Matmul TF32 for cuda-torch:
env OMNI_DEPLOY_SPK_TF32=1|0 if set, else `token2wav_allow_tf32` (default true).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

Backend = Literal["cuda-torch", "cpu-onnxruntime", "tensorrt"]
CUDA_TORCH: Backend = "cuda-torch"
CPU_ORT: Backend = "cpu-onnxruntime"
TENSORRT: Backend = "tensorrt"
BACKENDS: tuple[Backend, ...] = (CUDA_TORCH, CPU_ORT, TENSORRT)

# Keys of the Code2Wav stage's connector extra (stages[2].input_connectors.from_stage_1).
KEY_TRT = "token2wav_trt"
KEY_DEVICE_SPK = "token2wav_device_spk"
KEY_ALLOW_TF32 = "token2wav_allow_tf32"
DEFAULTS: dict[str, bool] = {KEY_TRT: False, KEY_DEVICE_SPK: True, KEY_ALLOW_TF32: True}

# Environment variables, read in the Code2Wav stage process.
ENV_BACKEND = "OMNI_DEPLOY_SPK_BACKEND"  # explicit override: cuda-torch | cpu-onnxruntime
ENV_TF32 = "OMNI_DEPLOY_SPK_TF32"  # explicit override: 1 | 0
ENV_TRT = "MINICPMO_TOKEN2WAV_TRT"  # vllm-omni's own TensorRT switch
ENV_ALLOW_CPU = "OMNI_DEPLOY_SPK_ALLOW_CPU"  # 1: the CPU stands in for CUDA (tests)
ENV_MAX_FAILURES = "OMNI_DEPLOY_SPK_MAX_FAILURES"  # consecutive encoder failures before ORT for good
DEFAULT_MAX_FAILURES = 3
# The variables that change the decision; a stage's `runtime.env` may set any of them.
DECISION_ENV = (ENV_TRT, ENV_BACKEND, ENV_TF32)

# How the plugin is found and heard.
PLUGIN_GROUP = "vllm.general_plugins"
PLUGIN_NAME = "omni_deploy_campplus"
PLUGINS_ALLOWLIST_ENV = "VLLM_PLUGINS"
LOGGER_NAME = "vllm.omni_deploy.campplus"  # under `vllm`: the only logger tree vLLM configures
REPORT_MARK = "omni-deploy CAM++ report:"  # the one INFO line per Code2Wav stage; serve reads it

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def as_bool(value: Any) -> bool | None:
    """A YAML/env switch as a bool; None when it is not one (callers then use the default)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    return None


@dataclass(frozen=True)
class Choice:
    backend: Backend
    decided_by: str  # "token2wav_device_spk", "env OMNI_DEPLOY_SPK_BACKEND", "platform", ...
    explicit: bool  # False: a default decided
    allow_tf32: bool
    tf32_by: str
    problems: tuple[str, ...] = ()  # settings that could not be read and were taken as their default


def choose(extra: Mapping[str, Any], env: Mapping[str, str], on_cuda: bool) -> Choice:
    """The backend the rules give one Code2Wav stage. `extra` is its connector extra, `env` the
    stage process's environment, `on_cuda` whether the stage's device is CUDA."""
    problems: list[str] = []

    def setting(key: str) -> tuple[bool, bool]:
        raw = extra.get(key)
        value = as_bool(raw) if raw is not None else None
        if raw is not None and value is None:
            problems.append(f"{key}: {raw!r} is not a boolean; taken as {DEFAULTS[key]}")
        return (DEFAULTS[key], False) if value is None else (value, True)

    tf32, tf32_explicit = setting(KEY_ALLOW_TF32)
    tf32_by = KEY_ALLOW_TF32 if tf32_explicit else f"{KEY_ALLOW_TF32} (default)"
    env_tf32 = as_bool(env.get(ENV_TF32)) if env.get(ENV_TF32) else None
    if env_tf32 is not None:
        tf32, tf32_by = env_tf32, f"env {ENV_TF32}"

    def done(backend: Backend, by: str, explicit: bool) -> Choice:
        return Choice(backend, by, explicit, tf32, tf32_by, tuple(problems))

    trt, _ = setting(KEY_TRT)
    device_spk, device_spk_explicit = setting(KEY_DEVICE_SPK)
    if not on_cuda:
        return done(CPU_ORT, "platform (not CUDA)", False)
    if env.get(ENV_TRT) == "1":
        return done(TENSORRT, f"env {ENV_TRT}", True)
    if trt:
        return done(TENSORRT, KEY_TRT, True)
    override = env.get(ENV_BACKEND, "").strip()
    if override == CUDA_TORCH:
        return done(CUDA_TORCH, f"env {ENV_BACKEND}", True)
    if override == CPU_ORT:
        return done(CPU_ORT, f"env {ENV_BACKEND}", True)
    if override:
        problems.append(
            f"env {ENV_BACKEND}={override!r} ignored: it takes cuda-torch or cpu-onnxruntime "
            f"(TensorRT is {KEY_TRT} or {ENV_TRT}=1)"
        )
    if device_spk:
        return done(CUDA_TORCH, KEY_DEVICE_SPK if device_spk_explicit else f"{KEY_DEVICE_SPK} (default)",
                    device_spk_explicit)  # fmt: skip
    return done(CPU_ORT, KEY_DEVICE_SPK, True)


def allowlist_drops_plugin(value: str | None) -> bool:
    """VLLM_PLUGINS, when set, is an allowlist of general plugins (vllm/plugins/__init__.py)."""
    if value is None:
        return False
    return PLUGIN_NAME not in [name.strip() for name in value.split(",")]
