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

import ast
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

# vllm-omni's MiniCPM-o 4.5 Code2Wav model module: the plugin hooks it, --probe reads its file.
CODE2WAV_MODULE = "vllm_omni.model_executor.models.minicpmo_4_5.minicpmo_4_5_code2wav"

# How the plugin is found and heard.
PLUGIN_GROUP = "vllm.general_plugins"
PLUGIN_NAME = "omni_deploy_campplus"
PLUGINS_ALLOWLIST_ENV = "VLLM_PLUGINS"
LOGGER_NAME = "vllm.omni_deploy.campplus"  # under `vllm`: the only logger tree vLLM configures
LOG_PREFIX = "omni-deploy CAM++:"  # how every warning the plugin logs begins
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
    tf32, tf32_by = _tf32(extra, env, problems)

    def done(backend: Backend, by: str, explicit: bool) -> Choice:
        return Choice(backend, by, explicit, tf32, tf32_by, tuple(problems))

    trt, _ = _setting(extra, KEY_TRT, problems)
    device_spk, device_spk_explicit = _setting(extra, KEY_DEVICE_SPK, problems)
    if not on_cuda:
        return done(CPU_ORT, "platform (not CUDA)", False)
    if env.get(ENV_TRT) == "1":
        return done(TENSORRT, f"env {ENV_TRT}", True)
    if trt:
        return done(TENSORRT, KEY_TRT, True)
    override = _env_backend(env, problems)
    if override is not None:
        return done(override, f"env {ENV_BACKEND}", True)
    if device_spk:
        return done(CUDA_TORCH, KEY_DEVICE_SPK if device_spk_explicit else f"{KEY_DEVICE_SPK} (default)",
                    device_spk_explicit)  # fmt: skip
    return done(CPU_ORT, KEY_DEVICE_SPK, True)


def _setting(extra: Mapping[str, Any], key: str, problems: list[str]) -> tuple[bool, bool]:
    """(value, set explicitly) of a switch of the extra; a value that is no boolean is its default."""
    raw = extra.get(key)
    value = as_bool(raw) if raw is not None else None
    if raw is not None and value is None:
        problems.append(f"{key}: {raw!r} is not a boolean; taken as {DEFAULTS[key]}")
    return (DEFAULTS[key], False) if value is None else (value, True)


def _tf32(extra: Mapping[str, Any], env: Mapping[str, str], problems: list[str]) -> tuple[bool, str]:
    """Matmul TF32 for cuda-torch, and what decided it: env OMNI_DEPLOY_SPK_TF32, else the extra."""
    tf32, explicit = _setting(extra, KEY_ALLOW_TF32, problems)
    env_tf32 = as_bool(env.get(ENV_TF32)) if env.get(ENV_TF32) else None
    if env_tf32 is not None:
        return env_tf32, f"env {ENV_TF32}"
    return tf32, KEY_ALLOW_TF32 if explicit else f"{KEY_ALLOW_TF32} (default)"


def _env_backend(env: Mapping[str, str], problems: list[str]) -> Backend | None:
    """Env OMNI_DEPLOY_SPK_BACKEND, when it names cuda-torch or cpu-onnxruntime."""
    override = env.get(ENV_BACKEND, "").strip()
    if override == CUDA_TORCH:
        return CUDA_TORCH
    if override == CPU_ORT:
        return CPU_ORT
    if override:
        problems.append(
            f"env {ENV_BACKEND}={override!r} ignored: it takes cuda-torch or cpu-onnxruntime "
            f"(TensorRT is {KEY_TRT} or {ENV_TRT}=1)"
        )
    return None


def allowlist_drops_plugin(value: str | None) -> bool:
    """VLLM_PLUGINS, when set, is an allowlist of general plugins (vllm/plugins/__init__.py)."""
    if value is None:
        return False
    return PLUGIN_NAME not in [name.strip() for name in value.split(",")]


def reads_device_spk(source: str) -> bool:
    """Whether a vllm-omni Code2Wav module's source reads token2wav_device_spk itself (then its code
    decides the speaker backend and the plugin stands aside): the key as a string in its code, not
    in a comment or a docstring. The plugin asks it of the imported module and `explain --probe` of
    the installed file, so the two cannot disagree."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return False
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
    }
    return any(
        isinstance(node, ast.Constant) and node.value == KEY_DEVICE_SPK and id(node) not in docstrings
        for node in ast.walk(tree)
    )
