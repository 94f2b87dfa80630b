"""MiniCPM-o 4.5 Code2Wav: the CUDA CAM++ encoder in the token2wav core's speaker-model slot.

`patch` runs when vllm-omni's Code2Wav module is imported (only the Code2Wav stage's process does)
and wraps `MiniCPMO45Code2Wav._build_backend`. After vllm-omni has built the token2wav core (ONNX
Runtime session loaded, or left to be built on first use as vllm-omni 0.32 does; TensorRT swapped in
if selected), the wrapper reads the stage's own config
(`vllm_config.model_config.stage_connector_config["extra"]`, where Code2Wav reads its other options)
and the stage process's environment, applies `speaker_rules.choose`, and for cuda-torch puts the
guarded encoder in the core's `_spk_model` slot, through the callable contract vllm-omni already
supports for TensorRT (`_forward_spk_embedding` calls any non-ORT `_spk_model(feat[T, 80]) -> [1,
192]`). Step-Audio2's core is never touched: only a core built by MiniCPM-o's Code2Wav is.

Every start reports (integrations/report): what the stage took, or why the plugin stood aside. The
stage's matmul TF32 policy is the release's own where it has one (0.32's `_tf32_mode`, 0.31's
`token2wav_allow_tf32` read in its forward), so the batched preparation computes what vllm-omni's
own preparation would.
"""

from __future__ import annotations

import dataclasses
import inspect
import os
import sys
from collections.abc import Mapping
from types import ModuleType
from typing import Any

from omni_deploy.integrations.guard import lazy_session_embedder, session_embedder
from omni_deploy.integrations.refprep import detach, plug, plug_prefetch
from omni_deploy.integrations.report import Outcome, report, warn, warn_once
from omni_deploy.integrations.speaker_rules import (
    CPU_ORT,
    CUDA_TORCH,
    ENV_BACKEND,
    ENV_CODE2WAV_TF32,
    ENV_TF32,
    KEY_ALLOW_TF32,
    KEY_DEVICE_SPK,
    KEY_TF32_ALIAS,
    MINICPMO,
    TENSORRT,
    Choice,
    as_bool,
    choose,
    reads_device_spk,
)
from omni_deploy.integrations.takeover import (
    admit,
    fail_warm_up,
    forced_cpu,
    is_ort_session,
    load_guard,
    tf32_field,
    wrap_once,
)
from omni_deploy.integrations.targets import MINICPMO_LAZY
from omni_deploy.integrations.warmup import ENV_BUDGET, budget_from_env, max_num_seqs, warm_stage


def build_backend_problem(code2wav_cls: Any) -> str | None:
    """Why `_build_backend` cannot be wrapped, checked on the live class."""
    build = getattr(code2wav_cls, "_build_backend", None)
    if build is None or not callable(build):
        return "MiniCPMO45Code2Wav._build_backend not found"
    if list(inspect.signature(build).parameters) != ["self"]:
        return f"MiniCPMO45Code2Wav._build_backend{inspect.signature(build)} is not (self)"
    return None


def reads_device_spk_itself(code2wav_module: Any) -> bool:
    """Whether this vllm-omni's Code2Wav reads token2wav_device_spk itself: the rule explain --probe
    applies to the installed file (`speaker_rules.reads_device_spk`), here on the imported module."""
    try:
        return reads_device_spk(inspect.getsource(code2wav_module))
    except (OSError, TypeError):
        return False


def patch(module: ModuleType) -> None:
    code2wav_cls = getattr(module, "MiniCPMO45Code2Wav", None)
    problem = "MiniCPMO45Code2Wav not found" if code2wav_cls is None else build_backend_problem(code2wav_cls)
    if problem:
        warn_once("compat", "incompatible vllm-omni (%s); the speaker embedding stays as vllm-omni builds it",
                  problem)  # fmt: skip
        # Never silent: no stage is built through the plugin, so the process says so once.
        admission = admit(MINICPMO)
        report(Outcome(CPU_ORT, "?", "incompatible vllm-omni", vllm_omni=admission.version,
                       layout=admission.layout))  # fmt: skip
        return
    install(code2wav_cls, stands_aside=reads_device_spk_itself(module))


def install(code2wav_cls: Any, stands_aside: bool = False) -> bool:
    """Wrap `_build_backend` once. Returns False when it was already wrapped."""

    def make(original: Any) -> Any:
        def build_backend(self: Any) -> None:
            already = getattr(self, "backend", None) is not None
            original(self)
            if already:
                return  # vllm-omni builds once; a second call is a no-op there and here
            try:
                outcome = take_over(self, stands_aside)
            except Exception as exc:  # never break serving
                warn("%s: %s: %s; the speaker path stays as vllm-omni built it", stage_label(self),
                     type(exc).__name__, exc)  # fmt: skip
                outcome = Outcome("unknown", "?", f"error: {type(exc).__name__}", stage=stage_id(self))
            report(outcome)

        return build_backend

    return wrap_once(code2wav_cls, "_build_backend", make)


def stage_extra(code2wav: Any) -> dict[str, Any]:
    """The Code2Wav stage's connector extra, read the way vllm-omni 0.30.0 reads it."""
    own = getattr(code2wav, "_extra_config", None)
    if callable(own):
        try:
            extra = own()
            if isinstance(extra, Mapping):
                return dict(extra)
        except Exception:  # fall back to reading the config ourselves
            pass
    return connector_extra(getattr(code2wav, "vllm_config", None))


def connector_extra(vllm_config: Any) -> dict[str, Any]:
    """`model_config.stage_connector_config["extra"]` of a stage's vllm_config ({} when absent)."""
    model_config = getattr(vllm_config, "model_config", None)
    connector = getattr(model_config, "stage_connector_config", None)
    extra = (
        connector.get("extra", connector)
        if isinstance(connector, Mapping)
        else getattr(connector, "extra", None)
    )
    return dict(extra) if isinstance(extra, Mapping) else {}


def stage_id(model: Any) -> str:
    value = getattr(getattr(getattr(model, "vllm_config", None), "model_config", None), "stage_id", None)
    return str(value) if value is not None else "?"


def stage_label(model: Any) -> str:
    return f"stage {stage_id(model)}"


def _find_core(code2wav: Any) -> Any:
    facade = getattr(getattr(code2wav, "backend", None), "_token2wav", None)
    return getattr(facade, "_core", None)


def _describe(model: Any) -> str:
    if model is None:
        return "nothing"
    if is_ort_session(model):
        return "onnxruntime-cpu"
    return type(model).__name__


LAZY_LAYOUT = MINICPMO_LAZY.name  # 0.32: the session built on first use, references prefetched


def release_tf32(module: Any, extra: Mapping[str, Any]) -> tuple[bool, str] | None:
    """The Code2Wav stage's matmul TF32 as this vllm-omni decides it, and by what; None where the
    release has no policy of its own (0.30.0: omni-deploy's rule decides). 0.32's `_tf32_mode` is
    called as it is (env MINICPMO_CODE2WAV_TF32, then token2wav_allow_tf32, then
    code2wav_allow_tf32, on by default); 0.31 reads token2wav_allow_tf32 in its forward, off by
    default."""
    mode = getattr(module, "_tf32_mode", None)
    if callable(mode):
        # The value is vllm-omni's own answer; what decided it is named by its precedence.
        if os.environ.get(ENV_CODE2WAV_TF32, "") != "":
            by = f"env {ENV_CODE2WAV_TF32}"
        else:
            by = next(
                (key for key in (KEY_ALLOW_TF32, KEY_TF32_ALIAS) if key in extra),
                f"{KEY_ALLOW_TF32} (default)",
            )
        return mode(extra) != "off", by
    try:
        source = inspect.getsource(module)
    except (OSError, TypeError):
        return None
    if f'get("{KEY_ALLOW_TF32}", False)' in source:
        value = as_bool(extra.get(KEY_ALLOW_TF32))
        return bool(value), KEY_ALLOW_TF32 if value is not None else f"{KEY_ALLOW_TF32} (vllm-omni's default)"
    return None


def stage_choice(code2wav: Any, on_cuda: bool) -> Choice:
    """`speaker_rules.choose` for this stage, its TF32 the release's own policy unless the
    environment names one (OMNI_DEPLOY_SPK_TF32)."""
    extra = stage_extra(code2wav)
    choice = choose(extra, os.environ, on_cuda=on_cuda)
    own = release_tf32(sys.modules.get(type(code2wav).__module__), extra)
    if own is None or os.environ.get(ENV_TF32):
        return choice
    return dataclasses.replace(choice, allow_tf32=own[0], tf32_by=own[1])


def take_over(code2wav: Any, stands_aside: bool = False) -> Outcome:
    """Apply the rules to one freshly built Code2Wav backend; returns what the stage got."""
    label = stage_label(code2wav)
    outcome = Outcome("unknown", "?", "layout", model=MINICPMO.pipeline, stage=stage_id(code2wav))
    core = _find_core(code2wav)
    if core is None:
        warn_once("layout", "%s: the Code2Wav backend no longer exposes its token2wav core; the speaker path "
                  "stays as vllm-omni built it", label)  # fmt: skip
        return outcome
    import torch

    device = torch.device(getattr(core, "device", "cpu"))
    current = getattr(core, "_spk_model", None)
    admission = admit(MINICPMO)
    outcome.vllm_omni, outcome.device, outcome.layout = admission.version, str(device), admission.layout
    # vllm-omni 0.32 leaves the slot empty and builds its CPU session on first use.
    lazy = current is None and admission.layout == LAZY_LAYOUT
    if stands_aside:
        return _stand_aside(outcome, current, label, lazy)
    choice = stage_choice(code2wav, on_cuda=device.type == "cuda" or forced_cpu())
    for problem in choice.problems:
        warn("%s: %s", label, problem)
    outcome.warnings = list(choice.problems)
    if not (lazy or is_ort_session(current)):
        # TensorRT (vllm-omni swapped in its own callable), torch on an NPU, or something else:
        # never touched.
        trt = choice.backend == TENSORRT
        outcome.backend = TENSORRT if trt else _describe(current)
        outcome.why = choice.decided_by if trt else "vllm-omni"
        return outcome
    outcome.backend, outcome.device, outcome.why = CPU_ORT, "cpu", choice.decided_by
    if choice.backend != CUDA_TORCH:
        if device.type != "cuda" and not forced_cpu() and _asked_for_cuda(code2wav):
            warn(
                "%s runs on %s, not CUDA: the speaker embedding stays on ONNX Runtime on the CPU",
                label,
                device,
            )
        return outcome
    if not admission.ok:
        outcome.why = admission.why
        return outcome
    return _install_guard(code2wav, core, device, current, choice, label, outcome)


def _stand_aside(outcome: Outcome, current: Any, label: str, lazy: bool) -> Outcome:
    """A vllm-omni that reads token2wav_device_spk itself decides; the plugin only reports."""
    warn("%s: this vllm-omni reads %s itself, so its code decides the speaker backend; omni-deploy's plugin "
         "stands aside", label, KEY_DEVICE_SPK)  # fmt: skip
    outcome.backend = CPU_ORT if lazy or is_ort_session(current) else _describe(current)
    outcome.why = "vllm-omni"
    return outcome


def _install_guard(
    code2wav: Any, core: Any, device: Any, current: Any, choice: Choice, label: str, outcome: Outcome
) -> Outcome:
    """The guarded encoder in the core's `_spk_model` slot, vllm-omni's session behind it, and the
    batched reference preparation over the same encoder (issue 26: integrations/refprep); all of
    it warmed first, and the device synchronised and checked, before the stage is changed: a
    take-over that fails leaves the stage as vllm-omni built it."""
    onnx_path = os.path.join(str(core.model_path), "campplus.onnx")
    outcome.onnx = onnx_path
    # vllm-omni's own session behind the guard; where the release builds it on first use, the
    # fallback does too, so a stage whose encoder never fails never pays for it.
    fallback = lazy_session_embedder(onnx_path) if current is None else session_embedder(current)
    guard, encoder = load_guard(onnx_path, device, choice, fallback, label, outcome)
    if guard is None:
        return outcome
    extra = stage_extra(code2wav)
    prepare = plug(code2wav, core, guard, encoder, extra, choice, label)
    state = getattr(code2wav, "_omni_deploy_refprep", None) if prepare == "batched" else None
    if state is not None and outcome.layout == LAZY_LAYOUT:
        outcome.prefetch = plug_prefetch(code2wav, state, label)
    warmed = warm_stage(encoder, state, max_num_seqs(code2wav), extra, budget_from_env())
    outcome.warmup_s = round((outcome.warmup_s or 0.0) + warmed.seconds, 3)
    if warmed.problem is not None and (warmed.cuda_error or state is None):
        detach(code2wav)
        fail_warm_up(outcome, label, "encoder" if state is None else "stage", warmed.as_warm_up())
        return outcome
    if warmed.problem is not None:  # the batched pass failed its warm-up: the per-voice path stays
        detach(code2wav)
        warn("%s: batched reference preparation failed its warm-up (%s); vllm-omni prepares each voice itself",
             label, warmed.problem)  # fmt: skip
        prepare = "per-voice(warm-up failed)"
    if warmed.skipped:
        warn("%s: the warm-up stopped at its budget of %gs (%s) with %d steps left; the first requests finish "
             "them", label, budget_from_env(), ENV_BUDGET, warmed.skipped)  # fmt: skip
    reported = guard.on_retire

    def retire(what: str) -> None:
        core._spk_model = current  # vllm-omni's own ORT branch from now on (None: it builds it)
        if outcome.prepare == "batched":
            outcome.prepare = "per-voice(encoder retired)"  # the hook stops with the encoder
        if reported is not None:
            reported(what)

    guard.on_retire = retire
    core._spk_model = guard
    outcome.backend, outcome.device, outcome.why = CUDA_TORCH, str(encoder.device), choice.decided_by
    outcome.replaced, outcome.tf32 = "onnxruntime-cpu", tf32_field(choice)
    outcome.kernels = str(getattr(getattr(encoder, "model", None), "backend", "?"))
    outcome.prepare = prepare
    return outcome


def _asked_for_cuda(code2wav: Any) -> bool:
    """Whether the file or the environment asked for the CUDA path by name (not by default)."""
    return (
        as_bool(stage_extra(code2wav).get(KEY_DEVICE_SPK)) is True
        or os.environ.get(ENV_BACKEND) == CUDA_TORCH
    )
