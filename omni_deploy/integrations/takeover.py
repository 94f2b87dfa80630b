"""What every model's patch does the same way: admit the installed vllm-omni (its version, then the
code shapes its patch relies on), load the encoder behind a guard, name the process's settings.

Runs only in a process that imported a patched vllm-omni module, so torch is already there.
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import os
import sys
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from omni_deploy.integrations.guard import GuardedSpeakerModel
from omni_deploy.integrations.report import Outcome, report, warn, warn_once
from omni_deploy.integrations.speaker_rules import (
    CPU_ORT,
    DEFAULT_MAX_FAILURES,
    ENV_ALLOW_CPU,
    ENV_MAX_FAILURES,
    Choice,
    Model,
    version_verdict,
)
from omni_deploy.integrations.targets import BY_MODEL, recognise


def vllm_omni_version() -> str | None:
    """The running vllm-omni's own `__version__` (a source checkout may differ from its metadata)."""
    module = sys.modules.get("vllm_omni")
    version = getattr(module, "__version__", None)
    if isinstance(version, str) and version:
        return version
    try:
        return importlib.metadata.version("vllm-omni")
    except importlib.metadata.PackageNotFoundError:
        return None


def module_source(name: str) -> str | None:
    """The source text of module `name`, read from its file (the module is not executed)."""
    try:
        module = sys.modules.get(name)
        origin = getattr(module, "__file__", None)
        if origin is None:
            spec = importlib.util.find_spec(name)
            origin = spec.origin if spec is not None else None
        if origin is None or not origin.endswith(".py"):
            return None
        from omni_deploy.common import guarded

        return guarded.installed_text(origin)  # bounded: a FIFO or a device link is None
    except (ImportError, OSError, ValueError, UnicodeDecodeError):
        return None


@dataclass(frozen=True)
class Admission:
    ok: bool
    version: str
    why: str  # "", or the reason it was refused (the report line's decided-by)
    layout: str = "n/a"  # the code layout recognised (targets.Layout.name), the report's `layout=`


_admitted: dict[str, Admission] = {}
_admit_lock = threading.Lock()


def admit(model: Model) -> Admission:
    """Whether this process's vllm-omni may have `model` patched; decided once per process."""
    with _admit_lock:
        cached = _admitted.get(model.pipeline)
        if cached is not None:
            return cached
        version = vllm_omni_version()
        shown = version or "?"
        allowed, note = version_verdict(version, os.environ)
        if note is not None:
            warn_once(f"version:{shown}", "%s", note)
        # The layout is read even for a refused version: what the stage holds is described by it.
        known = recognise(BY_MODEL[model.pipeline], module_source)
        layout = known.layout or "unrecognised"
        if not allowed:
            result = Admission(False, shown, f"version {shown} refused", layout)
        elif known.layout is None:
            warn_once(f"shape:{model.pipeline}", "vllm-omni %s's %s code is not a layout the plugin knows (%s); it "
                      "patches nothing there and the speaker path stays as vllm-omni built it", shown,
                      model.title, "; ".join(known.problems))  # fmt: skip
            result = Admission(False, shown, "incompatible vllm-omni", layout)
        else:
            result = Admission(True, shown, "", layout)
        _admitted[model.pipeline] = result
        return result


def max_failures() -> int:
    raw = os.environ.get(ENV_MAX_FAILURES, "")
    return int(raw) if raw.isdigit() and int(raw) > 0 else DEFAULT_MAX_FAILURES


def forced_cpu() -> bool:
    """OMNI_DEPLOY_SPK_ALLOW_CPU=1: the CPU stands in for CUDA (tests)."""
    return os.environ.get(ENV_ALLOW_CPU) == "1"


def is_ort_session(model: Any) -> bool:
    try:
        import onnxruntime
    except ImportError:
        return False
    return isinstance(model, onnxruntime.InferenceSession)


def session_on_gpu(session: Any) -> bool:
    """An ONNX Runtime session that already runs on a GPU (onnxruntime-gpu's providers)."""
    try:
        providers = session.get_providers()
    except Exception:
        return False
    return any(p != "CPUExecutionProvider" for p in providers[:1])


def tf32_field(choice: Choice) -> str:
    from omni_deploy.integrations.report import token

    return f"{'on' if choice.allow_tf32 else 'off'}:{token(choice.tf32_by)}"


WARMUP_FRAMES = 598  # a 6 s reference, the longest MiniCPM-o keeps: kernels compiled, its graph captured


def is_cuda_error(exc: BaseException) -> bool:
    """A CUDA error proper (an illegal access, a launch failure: the process's CUDA context may be
    unusable from then on), as opposed to an ordinary failure (a Python error, a refused launch,
    out of memory) after which the stage can go on as vllm-omni built it."""
    import torch

    if isinstance(exc, torch.OutOfMemoryError):
        return False
    accelerator_error = getattr(torch, "AcceleratorError", None)
    if accelerator_error is not None and isinstance(exc, accelerator_error):
        return True
    text = str(exc)
    return any(
        mark in text
        for mark in (
            "CUDA error",
            "Triton Error [CUDA]",
            "cudaError",
            "CUBLAS_STATUS",
            "CUDNN_STATUS_EXECUTION",
        )
    )


def settle(device: Any) -> None:
    """Wait for everything queued on `device` and surface any asynchronous CUDA error now, before
    the stage is changed: an error that surfaced later would land in vllm-omni's next forward."""
    import torch

    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


@dataclass
class WarmUp:
    problem: str | None  # why the encoder is not fit to serve, or None
    seconds: float
    cuda_error: bool = False  # the problem is a CUDA error (reported as such, never as a plain fallback)


def warm_up(encoder: Any, batches: tuple[int, ...] = (1,)) -> WarmUp:
    """Embeddings of stand-in features before any request, one call per batch size in `batches`:
    the first call compiles the Triton kernels and each captures its (batch, length) bucket's graph
    (seconds on a fresh host), which a request would otherwise wait for, and an encoder that
    answers badly is caught before it serves. Every tensor here names its dtype and device: the
    take-over runs under vLLM's loader (bf16 default dtype, maybe a `torch.device` context)."""
    import time

    import torch

    from omni_deploy.integrations.guard import embedding_problem

    start = time.perf_counter()
    try:
        generator = torch.Generator(device="cpu").manual_seed(0)
        feats = torch.randn(WARMUP_FRAMES, 80, generator=generator, dtype=torch.float32, device="cpu")
        feats = feats - feats.mean(dim=0, keepdim=True)
        problem = embedding_problem(encoder(feats))
        for batch in batches:
            if problem is None and batch > 1 and callable(getattr(encoder, "embed_features", None)):
                rows = encoder.embed_features([feats] * batch)
                problem = next((p for p in map(embedding_problem, rows.split(1)) if p), None)
        settle(getattr(encoder, "device", "cpu"))
    except Exception as exc:  # reported by the caller, which keeps ONNX Runtime
        return WarmUp(f"{type(exc).__name__}: {exc}", time.perf_counter() - start, is_cuda_error(exc))
    return WarmUp(problem, time.perf_counter() - start)


def load_guard(
    onnx_path: str, device: Any, choice: Choice, fallback: Any, label: str, outcome: Outcome
) -> tuple[GuardedSpeakerModel | None, Any]:
    """omni-deploy's encoder for `onnx_path` on `device` behind a guard whose fallback is vllm-omni's
    own session; (None, encoder or None) when the encoder cannot load (a WARNING says why and
    `outcome` is set to the CPU path)."""
    try:
        from omni_deploy.speaker import load_encoder

        encoder = load_encoder(onnx_path, device=device, allow_tf32=choice.allow_tf32)
    except Exception as exc:  # never break serving: any failure keeps the CPU path
        warn("%s: cannot load the CUDA CAM++ encoder from %s (%s: %s); keeping ONNX Runtime on the CPU",
             label, onnx_path, type(exc).__name__, exc)  # fmt: skip
        outcome.backend, outcome.device = CPU_ORT, "cpu"
        outcome.why = f"fallback: {type(exc).__name__} loading the encoder"
        return None, None

    warmed = warm_up(encoder)
    outcome.warmup_s = round(warmed.seconds, 3)
    if warmed.problem is not None:
        fail_warm_up(outcome, label, "encoder", warmed)
        return None, None

    def retired(what: str) -> None:
        outcome.backend, outcome.device, outcome.retired = CPU_ORT, "cpu", what
        outcome.why = "retired after failures"
        report(outcome)

    guard = GuardedSpeakerModel(
        encoder, fallback, label, max_failures(), warn=lambda m: warn("%s", m), on_retire=retired
    )
    return guard, encoder


def fail_warm_up(outcome: Outcome, label: str, what: str, warmed: WarmUp) -> None:
    """Say that a warm-up failed, and how: a CUDA error is named as one (the process's CUDA context
    may be unusable, so the operator must hear it as more than a fallback)."""
    if warmed.cuda_error:
        warn("%s: a CUDA error in omni-deploy's %s warm-up (%s): the speaker path stays as vllm-omni built it, "
             "but this process's CUDA context may be unusable; restart the stage with token2wav_device_spk: "
             "false and report this with the log", label, what, warmed.problem)  # fmt: skip
        outcome.why = f"fallback: CUDA error in the {what} warm-up"
    else:
        warn("%s: omni-deploy's %s failed its warm-up (%s); keeping ONNX Runtime on the CPU", label, what,
             warmed.problem)  # fmt: skip
        outcome.why = f"fallback: {what} warm-up failed"
    outcome.backend, outcome.device = CPU_ORT, "cpu"


_guards: dict[tuple[str, str, str], tuple[GuardedSpeakerModel | None, Outcome]] = {}
_guards_lock = threading.Lock()


def take_session(
    model: Model,
    session: Any,
    onnx_path: str,
    extra: Mapping[str, Any],
    stage: str,
    device: Any = None,
) -> Any:
    """For a caller that holds vllm-omni's ONNX Runtime CAM++ session (a processor, an extractor):
    the session to use instead (a guarded facade over the encoder) or `session` itself, after the
    rules for `model`; reports once per (model, stage, campplus.onnx) in this process. `device` is
    the stage's device (None for a processor: the current CUDA device, only looked up when the
    switch asks for CUDA)."""
    from omni_deploy.integrations.guard import SessionFacade

    if isinstance(session, SessionFacade) or session is None:
        return session
    label = f"{model.title} ({'stage ' + stage if stage.isdigit() else stage})"
    key = (model.pipeline, stage, os.path.realpath(onnx_path))
    with _guards_lock:
        known = _guards.get(key)
        if known is not None:
            return SessionFacade(known[0], session) if known[0] is not None else session
        outcome = Outcome(CPU_ORT, "cpu", "?", model=model.pipeline, stage=stage, onnx=onnx_path)
        guard = _decide(model, session, onnx_path, extra, label, device, outcome)
        _guards[key] = (guard, outcome)
    report(outcome)
    return SessionFacade(guard, session) if guard is not None else session


def _decide(
    model: Model,
    session: Any,
    onnx_path: str,
    extra: Mapping[str, Any],
    label: str,
    device: Any,
    outcome: Outcome,
) -> GuardedSpeakerModel | None:
    from omni_deploy.integrations.guard import session_embedder
    from omni_deploy.integrations.speaker_rules import CUDA_TORCH, choose_for

    admission = admit(model)
    outcome.vllm_omni = admission.version
    if not is_ort_session(session) or session_on_gpu(session):
        outcome.backend, outcome.why = _describe_session(session), "vllm-omni"
        return None
    # A processor's device is looked up only once the settings ask for CUDA: one that was not opted
    # in must not touch CUDA at all.
    on_cuda = device is None or str(device).startswith("cuda") or forced_cpu()
    choice = choose_for(model, extra, os.environ, on_cuda=on_cuda)
    for problem in choice.problems:
        warn("%s: %s", label, problem)
    outcome.warnings, outcome.why = list(choice.problems), choice.decided_by
    if choice.backend != CUDA_TORCH:
        return None
    if not admission.ok:
        outcome.why = admission.why
        return None
    import torch

    device = torch.device(device if device is not None else ("cuda" if torch.cuda.is_available() else "cpu"))
    if device.type != "cuda" and not forced_cpu():
        outcome.why = "platform (not CUDA)"
        return None
    guard, encoder = load_guard(onnx_path, device, choice, session_embedder(session), label, outcome)
    if guard is None:
        return None
    outcome.backend, outcome.device = CUDA_TORCH, str(encoder.device)
    outcome.replaced, outcome.tf32 = "onnxruntime-cpu", tf32_field(choice)
    outcome.kernels = str(getattr(getattr(encoder, "model", None), "backend", "?"))
    return guard


def _describe_session(session: Any) -> str:
    if is_ort_session(session):
        providers = session.get_providers()
        return (
            f"onnxruntime-{providers[0].replace('ExecutionProvider', '').lower()}"
            if providers
            else "onnxruntime"
        )
    return type(session).__name__


MARK = "_omni_deploy_campplus"  # on every function the plugin put in place of vllm-omni's
_wrap_lock = threading.Lock()


def wrap_once(owner: Any, name: str, make: Callable[[Any], Callable[..., Any]]) -> bool:
    """Replace `owner.name` by `make(original)` unless the plugin already did; returns whether it
    did now. The replacement carries the original's name, docstring and `__wrapped__`."""
    with _wrap_lock:
        original = getattr(owner, name)
        if getattr(original, MARK, False):
            return False
        replacement = functools.wraps(original)(make(original))
        setattr(replacement, MARK, True)
        setattr(owner, name, replacement)
        return True
