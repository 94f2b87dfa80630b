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

Other vllm-omni 0.30.0 models that run CAM++ on the CPU (`MODELS`, `choose_for`):
- Ming-TTS runs it in its stage-0 process (which owns a GPU): on by default, `ming_device_spk` in
  that stage's connector extra (the connector of its edge to stage 1) turns it off, env
  OMNI_DEPLOY_SPK_BACKEND overrides as for MiniCPM-o.
- CosyVoice3 and GLM-TTS run it in their multimodal processor, in the API server process, which
  owns no GPU of its own: off unless env OMNI_DEPLOY_SPK_PROCESSOR=cuda-torch (opt-in). A speaker
  model vllm-omni already runs on the GPU (CosyVoice3's TensorRT engine, GLM-TTS's ONNX Runtime with
  the CUDA provider) is never replaced.

The environment rules mirror the code that applies them, character for character: vLLM's
VLLM_PLUGINS allowlist (split on commas, nothing stripped), its logging switches, what its Ray
executor copies to workers, and vllm-omni's MINICPMO_TOKEN2WAV_TRT (`== "1"`) and `token2wav_trt`
(Python truth, so the string "false" is true there).
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
# vllm-omni 0.32's own Code2Wav TF32 switches (its `_tf32_mode`): an env, and an alias of the key.
ENV_CODE2WAV_TF32 = "MINICPMO_CODE2WAV_TF32"
KEY_TF32_ALIAS = "code2wav_allow_tf32"
ENV_TRT = "MINICPMO_TOKEN2WAV_TRT"  # vllm-omni's own TensorRT switch
ENV_ALLOW_CPU = "OMNI_DEPLOY_SPK_ALLOW_CPU"  # 1: the CPU stands in for CUDA (tests)
ENV_MAX_FAILURES = "OMNI_DEPLOY_SPK_MAX_FAILURES"  # consecutive encoder failures before ORT for good
DEFAULT_MAX_FAILURES = 3
ENV_PROCESSOR = "OMNI_DEPLOY_SPK_PROCESSOR"  # opt-in for processors in the API server: cuda-torch
ENV_VERIFIED_ONLY = "OMNI_DEPLOY_SPK_VERIFIED_ONLY"  # 1: refuse a vllm-omni not in VERIFIED_VLLM_OMNI
ENV_REPORT_DIR = "OMNI_DEPLOY_SPK_REPORT_DIR"  # where each process writes its report (serve sets it)
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

    trt = vllm_omni_truth(extra, KEY_TRT, problems)
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


def vllm_omni_truth(extra: Mapping[str, Any], key: str, problems: list[str]) -> bool:
    """A key vllm-omni reads itself with `bool(extra.get(key, False))`: Python truth, as it does.
    A string is noted, since `"false"` is true there."""
    raw = extra.get(key)
    if isinstance(raw, str):
        problems.append(f"{key}: {raw!r} is a string; vllm-omni takes bool({raw!r}) = {bool(raw)}")
    return bool(raw)


# --- Other models (vllm-omni 0.30.0): where CAM++ runs and what decides it --------------------------

STAGE, PROCESSOR = "stage", "processor"
KEY_MING_DEVICE_SPK = "ming_device_spk"


@dataclass(frozen=True)
class Model:
    """One vllm-omni model whose CAM++ the plugin can move to CUDA."""

    pipeline: str  # the deploy file's `pipeline:` name
    title: str
    where: str  # STAGE: a stage process that owns a GPU; PROCESSOR: the API server's processor
    key: str | None  # deploy-file switch in that stage's connector extra (None: environment only)
    stage: int | None  # the stage whose connector extra holds `key`
    connector: str | None  # which of that stage's connectors: "input" or "output"


MINICPMO = Model("minicpmo_4_5", "MiniCPM-o 4.5 Code2Wav", STAGE, KEY_DEVICE_SPK, 2, "input")
MING_TTS = Model("ming_tts", "Ming-TTS speaker extractor", STAGE, KEY_MING_DEVICE_SPK, 0, "output")
COSYVOICE3 = Model("cosyvoice3", "CosyVoice3 multimodal processor", PROCESSOR, None, None, None)
GLM_TTS = Model("glm_tts", "GLM-TTS multimodal processor", PROCESSOR, None, None, None)
# By pipeline name; Ming-TTS's dense and MoE pipelines run the same model class (MingTTSForConditionalGeneration).
MODELS: dict[str, Model] = {m.pipeline: m for m in (MINICPMO, MING_TTS, COSYVOICE3, GLM_TTS)} | {
    "ming_tts_moe": MING_TTS
}


ORT_CUDA = "onnxruntime-cuda"  # vllm-omni's own ONNX Runtime session on the GPU (onnxruntime-gpu): left alone
ENV_COSYVOICE3_TRT = "COSYVOICE3_TRT"


def cosyvoice3_trt_enabled(env: Mapping[str, str]) -> bool:
    """vllm-omni 0.30.0's own switch for CosyVoice3's TensorRT CAM++ (cosyvoice3.py
    `_cosyvoice3_trt_enabled`): on unless "0", "false", "False" or empty; it acts only where the
    `tensorrt` package imports and CUDA is there."""
    return env.get(ENV_COSYVOICE3_TRT, "1") not in ("0", "false", "False", "")


def choose_for(model: Model, extra: Mapping[str, Any], env: Mapping[str, str], on_cuda: bool) -> Choice:
    """The backend the rules give `model` in one process. `extra` is the connector extra of the
    model's stage (empty for a processor), `env` that process's environment."""
    if model is MINICPMO:
        return choose(extra, env, on_cuda)
    problems: list[str] = []
    tf32, tf32_by = True, "default"
    env_tf32 = as_bool(env.get(ENV_TF32)) if env.get(ENV_TF32) else None
    if env_tf32 is not None:
        tf32, tf32_by = env_tf32, f"env {ENV_TF32}"
    if not on_cuda:
        backend, by, explicit = CPU_ORT, "platform (not CUDA)", False
    elif model.where == PROCESSOR:
        backend, by, explicit = _processor_switch(env, problems)
    else:
        backend, by, explicit = _stage_switch(model, extra, env, problems)
    return Choice(backend, by, explicit, tf32, tf32_by, tuple(problems))


def _processor_switch(env: Mapping[str, str], problems: list[str]) -> tuple[Backend, str, bool]:
    """A processor in the API server: env OMNI_DEPLOY_SPK_PROCESSOR only, and off unless it says
    cuda-torch (opt-in: the API server owns no GPU; the CUDA path there opens a CUDA context on its
    first device, docs/speaker-backends.md gives what that costs)."""
    raw = env.get(ENV_PROCESSOR, "").strip()
    if raw == CUDA_TORCH:
        return CUDA_TORCH, f"env {ENV_PROCESSOR}", True
    if raw == CPU_ORT:
        return CPU_ORT, f"env {ENV_PROCESSOR}", True
    if raw:
        problems.append(f"env {ENV_PROCESSOR}={raw!r} ignored: it takes cuda-torch or cpu-onnxruntime")
    return CPU_ORT, f"env {ENV_PROCESSOR} (unset: opt-in)", False


def _stage_switch(
    model: Model, extra: Mapping[str, Any], env: Mapping[str, str], problems: list[str]
) -> tuple[Backend, str, bool]:
    """A stage that owns a GPU: env OMNI_DEPLOY_SPK_BACKEND, else the model's key (default true)."""
    override = env.get(ENV_BACKEND, "").strip()
    if override in (CUDA_TORCH, CPU_ORT):
        return (CUDA_TORCH if override == CUDA_TORCH else CPU_ORT), f"env {ENV_BACKEND}", True
    if override:
        problems.append(f"env {ENV_BACKEND}={override!r} ignored: it takes cuda-torch or cpu-onnxruntime")
    assert model.key is not None
    raw_key = extra.get(model.key)
    value = as_bool(raw_key) if raw_key is not None else None
    if raw_key is not None and value is None:
        problems.append(f"{model.key}: {raw_key!r} is not a boolean; taken as true")
    if value is False:
        return CPU_ORT, model.key, True
    return CUDA_TORCH, (model.key if value else f"{model.key} (default)"), value is True


# --- What vLLM and vllm-omni do with the environment, mirrored exactly -------------------------------

# vllm 0.30.0 (vllm/envs.py, vllm/plugins/__init__.py): VLLM_PLUGINS unset loads every plugin; set,
# `os.environ["VLLM_PLUGINS"].split(",")` is the allowlist, compared name for name: nothing is
# stripped, so "a, omni_deploy_campplus" allows " omni_deploy_campplus", not the plugin, and an empty
# value allows none.


def allowlist(value: str | None) -> list[str] | None:
    """The allowlist vLLM reads from VLLM_PLUGINS (None: unset, every plugin loads)."""
    return None if value is None else value.split(",")


def allowlist_drops_plugin(value: str | None) -> bool:
    allowed = allowlist(value)
    return allowed is not None and PLUGIN_NAME not in allowed


def allowlist_fix(value: str) -> str:
    """What VLLM_PLUGINS should say so that vLLM loads the plugin (and every plugin it meant)."""
    names = [name.strip() for name in value.split(",") if name.strip()]
    return ",".join([*[n for n in names if n != PLUGIN_NAME], PLUGIN_NAME])


def allowlist_near_miss(value: str | None) -> str | None:
    """The entry that was meant to name the plugin but does not, as vLLM compares it."""
    for name in allowlist(value) or []:
        if name != PLUGIN_NAME and name.strip() == PLUGIN_NAME:
            return name
    return None


# vllm 0.30.0 vllm/ray/ray_env.py `get_env_vars_to_copy`: what a Ray worker gets of the driver's
# environment (for a vllm-omni stage, the driver is that stage's engine-core process).
RAY_PREFIXES = ("VLLM_", "FLASH_ATTENTION_", "LMCACHE_", "NCCL_", "UCX_", "HF_", "HUGGING_FACE_")
RAY_EXTRA_VARS = ("PYTHONHASHSEED",)
ENV_RAY_EXTRA_PREFIXES = "VLLM_RAY_EXTRA_ENV_VAR_PREFIXES_TO_COPY"
ENV_RAY_EXTRA_VARS = "VLLM_RAY_EXTRA_ENV_VARS_TO_COPY"


def _csv(value: str) -> set[str]:
    return {token.strip() for token in value.split(",") if token.strip()}


def ray_copies(name: str, env: Mapping[str, str], not_carried: frozenset[str] = frozenset()) -> bool:
    """Whether vLLM's Ray executor copies variable `name` from the driver to its workers.
    `not_carried` is the driver's VLLM_CONFIG_ROOT/ray_non_carry_over_env_vars.json list.
    (vLLM also copies every variable it registers itself; none of ours is one.)"""
    if name in not_carried:
        return False
    prefixes = set(RAY_PREFIXES) | _csv(env.get(ENV_RAY_EXTRA_PREFIXES, ""))
    return any(name.startswith(p) for p in prefixes) or name in set(RAY_EXTRA_VARS) | _csv(
        env.get(ENV_RAY_EXTRA_VARS, "")
    )


def ray_view(env: Mapping[str, str], not_carried: frozenset[str] = frozenset()) -> dict[str, str]:
    """The part of the driver's environment a Ray worker sees."""
    return {k: v for k, v in env.items() if ray_copies(k, env, not_carried)}


def ray_fix(names: list[str], env: Mapping[str, str]) -> str:
    """The VLLM_RAY_EXTRA_ENV_VARS_TO_COPY value that carries `names` to Ray workers."""
    have = sorted(_csv(env.get(ENV_RAY_EXTRA_VARS, "")) | set(names))
    return f"{ENV_RAY_EXTRA_VARS}={','.join(have)}"


# vllm 0.30.0 vllm/logger.py + envs.py: whether an INFO record of a `vllm.` logger is printed.
LOGGING_LEVELS = {"CRITICAL": 50, "FATAL": 50, "ERROR": 40, "WARN": 30, "WARNING": 30, "INFO": 20, "DEBUG": 10,
                  "NOTSET": 0}  # fmt: skip


def report_line_logged(env: Mapping[str, str]) -> tuple[bool | None, str]:
    """(whether the plugin's INFO report line reaches the server log, why); None: cannot tell."""
    raw = env.get("VLLM_CONFIGURE_LOGGING", "1")
    try:
        configure = bool(int(raw))  # as vLLM reads it
    except ValueError:
        return None, f"VLLM_CONFIGURE_LOGGING={raw!r} is not an integer (vLLM fails reading it)"
    if not configure:
        return False, "VLLM_CONFIGURE_LOGGING=0: vLLM sets up no log handler, INFO lines are not printed"
    if env.get("VLLM_LOGGING_CONFIG_PATH"):
        return None, f"VLLM_LOGGING_CONFIG_PATH={env['VLLM_LOGGING_CONFIG_PATH']} decides"
    level = env.get("VLLM_LOGGING_LEVEL", "INFO").upper()
    number = LOGGING_LEVELS.get(level)
    if number is None:
        return None, f"VLLM_LOGGING_LEVEL={level!r} is not a logging level"
    if number > LOGGING_LEVELS["INFO"]:
        return False, f"VLLM_LOGGING_LEVEL={level}: INFO lines are not printed"
    return True, f"VLLM_LOGGING_LEVEL={level}"


# --- Versions ----------------------------------------------------------------------------------------

# vllm-omni releases the plugin's hooks are verified against (its vllm tier runs their real classes);
# each is a release of omni_deploy.knowledge.versions.RELEASES (a test holds the two together).
VERIFIED_VLLM_OMNI: tuple[str, ...] = ("0.30.0", "0.32.0rc1")


def version_verdict(version: str | None, env: Mapping[str, str]) -> tuple[bool, str | None]:
    """(whether the plugin may patch this vllm-omni, what to say about its version)."""
    if version in VERIFIED_VLLM_OMNI:
        return True, None
    shown = version or "of unknown version"
    if env.get(ENV_VERIFIED_ONLY) == "1":
        return False, (
            f"vllm-omni {shown} is not a release the plugin is verified against "
            f"({', '.join(VERIFIED_VLLM_OMNI)}) and {ENV_VERIFIED_ONLY}=1 refuses it"
        )
    return True, (
        f"vllm-omni {shown} is not a release the plugin is verified against ({', '.join(VERIFIED_VLLM_OMNI)}); "
        f"it patches only where vllm-omni's code has the shapes it checks ({ENV_VERIFIED_ONLY}=1 refuses)"
    )


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


# --- Batched reference preparation (issue 26): the Code2Wav stage's other switch --------------------
# vllm-omni 0.30.0 prepares each new reference voice on its own (StepAudio2Token2WavCore._prepare_prompt);
# the plugin can prepare all new voices of a forward in one pass on the stage's GPU
# (omni_deploy.integrations.refprep). It needs the CUDA CAM++ path: the pass embeds through that encoder.

KEY_DEVICE_PREPARE = "token2wav_device_prepare"
DEFAULT_DEVICE_PREPARE = True  # where the CUDA CAM++ path is on


@dataclass(frozen=True)
class PrepareChoice:
    batched: bool
    decided_by: str  # "token2wav_device_prepare (default)", "speaker backend cpu-onnxruntime", ...
    explicit: bool
    problems: tuple[str, ...] = ()


def choose_prepare(extra: Mapping[str, Any], backend: str, backend_by: str) -> PrepareChoice:
    """Whether the stage prepares its new voices in one batched pass. `backend` is the speaker
    backend the stage got (`choose`'s answer, as carried out) and `backend_by` what decided it:
    without the CUDA CAM++ path it is vllm-omni's per-voice preparation."""
    raw = extra.get(KEY_DEVICE_PREPARE)
    value = as_bool(raw) if raw is not None else None
    problems: list[str] = []
    if raw is not None and value is None:
        problems.append(f"{KEY_DEVICE_PREPARE}: {raw!r} is not a boolean; taken as {DEFAULT_DEVICE_PREPARE}")
    if backend != CUDA_TORCH:
        if value is True:
            problems.append(
                f"{KEY_DEVICE_PREPARE}: true cannot apply: the speaker embedding is {backend} "
                f"({backend_by}), and the batched pass needs omni-deploy's CUDA CAM++ path; vllm-omni prepares "
                "each voice itself"
            )
        return PrepareChoice(False, f"speaker backend {backend}", False, tuple(problems))
    if value is False:
        return PrepareChoice(False, KEY_DEVICE_PREPARE, True, tuple(problems))
    by = KEY_DEVICE_PREPARE if value is True else f"{KEY_DEVICE_PREPARE} (default)"
    return PrepareChoice(True, by, value is True, tuple(problems))
