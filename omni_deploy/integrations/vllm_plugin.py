"""vLLM general plugin: the CUDA CAM++ speaker embedding inside released vllm-omni (0.30.0).

vLLM calls `register()` in every process it starts (API server, each stage's engine core, its
workers, Ray workers). `register()` imports nothing heavy: it records, per model of
`integrations.targets.TARGETS`, a patch to apply when vllm-omni's module for that model is imported
(`integrations.import_hooks`). A process that never builds a patched model never imports
omni-deploy's encoder, torch, onnx or onnxruntime on the plugin's account.

The patches (one module each: minicpmo, cosyvoice3, glm_tts, ming_tts) apply the rules of
`omni_deploy.integrations.speaker_rules` to the process's own config and environment and, where they give
cuda-torch, put omni-deploy's encoder for the same campplus.onnx in front of the ONNX Runtime
session vllm-omni loaded, behind a guard (`integrations.guard`): every embedding is checked, a
failure or a bad embedding is answered by ONNX Runtime, and N failures in a row retire the encoder.
Before patching, each checks the installed vllm-omni: its version against the releases the plugin
is verified against (a warning on another one; OMNI_DEPLOY_SPK_VERIFIED_ONLY=1 refuses it) and the
shapes of the code it relies on (`integrations.targets`).

Nothing here may take a process down. Each patched component logs one INFO report line through a
`vllm.` logger and writes a report file where OMNI_DEPLOY_SPK_REPORT_DIR says
(`integrations.report`); `omni-deploy serve` reads both.
"""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType

from omni_deploy.integrations import import_hooks
from omni_deploy.integrations.targets import TARGETS, Target

HOOK_NAME = "omni-deploy CAM++"


def _patcher(target: Target) -> import_hooks.Patch:
    def apply(module: ModuleType) -> None:
        where, _, function = target.patch.partition(":")
        getattr(importlib.import_module(where), function)(module)

    return apply


def _patch_failed(hook: import_hooks.Hook, exc: BaseException) -> None:
    from omni_deploy.integrations.report import warn

    warn("patching %s failed (%s: %s); the speaker embedding stays as vllm-omni has it", hook.module,
         type(exc).__name__, exc)  # fmt: skip


def register() -> None:
    """vLLM's general-plugin entry point: hooks, imports nothing of vllm-omni or torch."""
    if importlib.util.find_spec("vllm_omni") is None:
        return  # plain vLLM: nothing to do
    import_hooks.on_error(_patch_failed)
    for target in TARGETS:
        import_hooks.when_imported(
            target.hook_module, f"{HOOK_NAME} {target.model.pipeline}", _patcher(target)
        )
