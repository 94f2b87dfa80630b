"""vLLM general plugin: MiniCPM-o 4.5's CAM++ speaker embedding on CUDA inside vllm-omni 0.30.0.

vLLM calls `register()` in every process it starts. It wraps MiniCPM-o 4.5 Code2Wav's
`_build_backend`, which runs only in the Code2Wav stage's process. There, after vllm-omni has built
the token2wav core (ONNX Runtime session loaded, TensorRT swapped in if selected), the wrapper reads
the stage's own config (`vllm_config.model_config.stage_connector_config["extra"]`, where Code2Wav
reads its other options) and the stage process's environment, applies the rules of
`omni_deploy.speaker_rules`, and, when they give cuda-torch, replaces the core's speaker model with
omni-deploy's encoder for the same campplus.onnx through the callable contract vllm-omni already
supports for TensorRT (`_forward_spk_embedding` calls any non-ORT `_spk_model(feat[T, 80]) -> [1,
192]`). So the deploy file decides, however the server was started (`omni-deploy serve`, plain
`vllm serve`, a headless stage, a pod, a Ray worker). Step-Audio2's and CosyVoice3's speaker paths
are never touched.

Nothing here may take a stage down: a failure while building keeps ONNX Runtime with one WARNING;
an encoder failure at request time answers that call from the ONNX Runtime session kept behind it
(rate-limited WARNING, counted), and after N consecutive failures the stage goes back to ONNX
Runtime for good. Each Code2Wav stage logs one INFO report line (backend, device, TF32, kernels,
campplus.onnx, what it replaced) through a `vllm.` logger, the only tree vLLM configures.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import inspect
import logging
import os
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from omni_deploy.speaker_rules import (
    CODE2WAV_MODULE,
    CPU_ORT,
    CUDA_TORCH,
    DEFAULT_MAX_FAILURES,
    ENV_ALLOW_CPU,
    ENV_BACKEND,
    ENV_MAX_FAILURES,
    KEY_DEVICE_SPK,
    LOG_PREFIX,
    LOGGER_NAME,
    REPORT_MARK,
    TENSORRT,
    Choice,
    as_bool,
    choose,
    reads_device_spk,
)

CORE_MODULE = "vllm_omni.model_executor.models.step_audio2.step_audio2_token2wav"
_MARK = "_omni_deploy_campplus"
WARN_INTERVAL_S = 60.0  # request-time fallback warnings: at most one per interval per stage
_warned: set[str] = set()


def logger() -> logging.Logger:
    try:
        from vllm.logger import init_logger  # configures the `vllm` tree on first import

        return init_logger(LOGGER_NAME)
    except Exception:  # vllm missing or its logging changed: the name still sits under `vllm`
        return logging.getLogger(LOGGER_NAME)


def _warn_once(key: str, message: str, *args: Any) -> None:
    if key not in _warned:
        _warned.add(key)
        logger().warning(f"{LOG_PREFIX} {message}", *args)


def compatibility_problem(code2wav_cls: Any, core_cls: Any) -> str | None:
    """Why this vllm-omni cannot take the hook, or None. Checked, not assumed."""
    build = getattr(code2wav_cls, "_build_backend", None)
    if build is None or not callable(build):
        return "MiniCPMO45Code2Wav._build_backend not found"
    if list(inspect.signature(build).parameters) != ["self"]:
        return f"MiniCPMO45Code2Wav._build_backend{inspect.signature(build)} is not (self)"
    forward = getattr(core_cls, "_forward_spk_embedding", None)
    try:
        source = inspect.getsource(forward) if forward is not None else ""
    except (OSError, TypeError):
        source = ""
    if "spk_model(spk_feat)" not in source and "self._spk_model(" not in source:
        return "StepAudio2Token2WavCore._forward_spk_embedding no longer calls a speaker-model callable"
    if "_spk_model" not in inspect.getsource(core_cls.__init__):
        return "StepAudio2Token2WavCore has no _spk_model attribute"
    return None


def reads_device_spk_itself(code2wav_module: Any) -> bool:
    try:
        return reads_device_spk(inspect.getsource(code2wav_module))
    except (OSError, TypeError):
        return False


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
    model_config = getattr(getattr(code2wav, "vllm_config", None), "model_config", None)
    connector = getattr(model_config, "stage_connector_config", None)
    extra = (
        connector.get("extra", connector)
        if isinstance(connector, Mapping)
        else getattr(connector, "extra", None)
    )
    return dict(extra) if isinstance(extra, Mapping) else {}


def stage_label(code2wav: Any) -> str:
    stage_id = getattr(
        getattr(getattr(code2wav, "vllm_config", None), "model_config", None), "stage_id", None
    )
    return f"stage {stage_id}" if stage_id is not None else "stage ?"


def max_failures() -> int:
    raw = os.environ.get(ENV_MAX_FAILURES, "")
    return int(raw) if raw.isdigit() and int(raw) > 0 else DEFAULT_MAX_FAILURES


def _is_ort_session(model: Any) -> bool:
    try:
        import onnxruntime
    except ImportError:
        return False
    return isinstance(model, onnxruntime.InferenceSession)


def _describe(model: Any) -> str:
    if model is None:
        return "nothing"
    if _is_ort_session(model):
        return "onnxruntime-cpu"
    if isinstance(model, GuardedSpeakerModel):
        return "omni-deploy encoder"
    return type(model).__name__


class GuardedSpeakerModel:
    """omni-deploy's encoder in vllm-omni's speaker-model slot, with the ONNX Runtime session that
    vllm-omni loaded kept behind it for calls the encoder cannot answer."""

    def __init__(self, encoder: Any, session: Any, core: Any, label: str, limit: int) -> None:
        self.encoder = encoder
        self.session = session
        self.core = core
        self.label = label
        self.limit = limit
        self.failures = 0  # all encoder failures in this process
        self.fallback_calls = 0  # calls answered by ONNX Runtime
        self.consecutive = 0
        self.retired = False
        self._last_warning = float("-inf")
        self._suppressed = 0
        self._lock = threading.Lock()

    def _onnxruntime(self, feat: Any) -> Any:
        import torch

        # As vllm-omni's own ORT branch feeds the session: [1, T, 80] float32 on the CPU.
        name = self.session.get_inputs()[0].name
        out = self.session.run(None, {name: feat.unsqueeze(dim=0).detach().cpu().float().numpy()})[0]
        return torch.from_numpy(out)

    def __call__(self, feat: Any) -> Any:
        if self.retired:
            return self._onnxruntime(feat)
        try:
            out = self.encoder(feat)
        except Exception as exc:  # CUDA error, out of memory, ...: answer from ONNX Runtime
            self._failed(exc)
            self.fallback_calls += 1
            return self._onnxruntime(feat)
        self.consecutive = 0
        return out

    def _failed(self, exc: Exception) -> None:
        with self._lock:
            self.failures += 1
            self.consecutive += 1
            log = logger()
            if self.consecutive >= self.limit:
                self.retired = True
                self.core._spk_model = self.session  # vllm-omni's own ORT branch from now on
                log.warning(
                    LOG_PREFIX + " %s: the encoder failed %d times in a row (last: %s: %s); "
                    "speaker embedding switched to ONNX Runtime on the CPU for good "
                    "(%d failures in all)",
                    self.label, self.consecutive, type(exc).__name__, exc, self.failures,
                )  # fmt: skip
                return
            now = time.monotonic()
            if now - self._last_warning >= WARN_INTERVAL_S:
                log.warning(
                    LOG_PREFIX + " %s: the encoder failed (%s: %s); this call falls back to "
                    "ONNX Runtime on the CPU (%d failures in all, %d in a row, %d warnings suppressed; "
                    "ONNX Runtime for good after %d in a row)",
                    self.label, type(exc).__name__, exc, self.failures, self.consecutive,
                    self._suppressed, self.limit,
                )  # fmt: skip
                self._last_warning = now
                self._suppressed = 0
            else:
                self._suppressed += 1


@dataclass
class Outcome:
    """What one Code2Wav stage got; logged as the report line."""

    backend: str
    device: str
    why: str
    replaced: str = "nothing"
    tf32: str = "n/a"
    kernels: str = "n/a"
    onnx: str = "n/a"


def report(label: str, outcome: Outcome) -> None:
    """The one INFO line per Code2Wav stage. `omni-deploy serve` reads its key=value fields."""
    logger().info(
        "%s %s backend=%s device=%s tf32=%s kernels=%s onnx=%s replaced=%s decided-by=%s",
        REPORT_MARK, label.replace(" ", "="), outcome.backend, outcome.device, outcome.tf32,
        outcome.kernels, outcome.onnx, outcome.replaced, token(outcome.why),
    )  # fmt: skip


def token(text: str) -> str:
    """One space-free field of the report line: 'token2wav_device_spk (default)' ->
    'token2wav_device_spk(default)'."""
    return text.replace(" (", "(").replace(" ", "_")


def _find_core(code2wav: Any) -> Any:
    facade = getattr(getattr(code2wav, "backend", None), "_token2wav", None)
    return getattr(facade, "_core", None)


def take_over(code2wav: Any, stands_aside: bool = False) -> Outcome:
    """Apply the rules to one freshly built Code2Wav backend; returns what the stage got."""
    label = stage_label(code2wav)
    core = _find_core(code2wav)
    if core is None:
        _warn_once("layout", "%s: the Code2Wav backend no longer exposes its token2wav core; "
                   "the speaker path stays as vllm-omni built it", label)  # fmt: skip
        return Outcome("unknown", "?", "layout")
    import torch

    device = torch.device(getattr(core, "device", "cpu"))
    current = getattr(core, "_spk_model", None)
    if stands_aside:
        backend = CPU_ORT if _is_ort_session(current) else _describe(current)
        logger().warning(
            LOG_PREFIX + " %s: this vllm-omni reads %s itself, so its code decides the speaker "
            "backend; omni-deploy's plugin stands aside", label, KEY_DEVICE_SPK,
        )  # fmt: skip
        return Outcome(backend, str(device), "vllm-omni")
    forced_cpu = os.environ.get(ENV_ALLOW_CPU) == "1"
    choice: Choice = choose(stage_extra(code2wav), os.environ, on_cuda=device.type == "cuda" or forced_cpu)
    for problem in choice.problems:
        logger().warning(LOG_PREFIX + " %s: %s", label, problem)
    if not _is_ort_session(current):
        # TensorRT (vllm-omni swapped in its own callable) or something else: never touched.
        return Outcome(TENSORRT if choice.backend == TENSORRT else _describe(current), str(device),
                       choice.decided_by if choice.backend == TENSORRT else "vllm-omni")  # fmt: skip
    if choice.backend != CUDA_TORCH:
        if device.type != "cuda" and not forced_cpu and _asked_for_cuda(code2wav):
            logger().warning(
                LOG_PREFIX + " %s runs on %s, not CUDA: the speaker embedding stays on ONNX "
                "Runtime on the CPU", label, device,
            )  # fmt: skip
        return Outcome(CPU_ORT, "cpu", choice.decided_by)
    onnx_path = os.path.join(str(core.model_path), "campplus.onnx")
    try:
        from omni_deploy.speaker import load_encoder

        encoder = load_encoder(onnx_path, device=device, allow_tf32=choice.allow_tf32)
    except Exception as exc:  # never break serving: any failure keeps the CPU path
        logger().warning(
            LOG_PREFIX + " %s: cannot load the CUDA CAM++ encoder from %s (%s: %s); keeping "
            "ONNX Runtime on the CPU", label, onnx_path, type(exc).__name__, exc,
        )  # fmt: skip
        return Outcome(CPU_ORT, "cpu", f"fallback: {type(exc).__name__} loading the encoder", onnx=onnx_path)
    core._spk_model = GuardedSpeakerModel(encoder, current, core, label, max_failures())
    kernels = getattr(getattr(encoder, "model", None), "backend", "?")
    return Outcome(
        CUDA_TORCH,
        str(encoder.device),
        choice.decided_by,
        replaced="onnxruntime-cpu",
        tf32=f"{'on' if choice.allow_tf32 else 'off'}:{token(choice.tf32_by)}",
        kernels=str(kernels),
        onnx=onnx_path,
    )


def _asked_for_cuda(code2wav: Any) -> bool:
    """Whether the file or the environment asked for the CUDA path by name (not by default)."""
    return (
        as_bool(stage_extra(code2wav).get(KEY_DEVICE_SPK)) is True
        or os.environ.get(ENV_BACKEND) == CUDA_TORCH
    )


def install(code2wav_cls: Any, stands_aside: bool = False) -> bool:
    """Wrap `_build_backend` once. Returns False when it was already wrapped."""
    original = code2wav_cls._build_backend
    if getattr(original, _MARK, False):
        return False

    @functools.wraps(original)
    def build_backend(self: Any) -> None:
        already = getattr(self, "backend", None) is not None
        original(self)
        if already:
            return  # vllm-omni builds once; a second call is a no-op there and here
        try:
            outcome = take_over(self, stands_aside)
        except Exception as exc:  # never break serving
            logger().warning(
                LOG_PREFIX + " %s: %s: %s; the speaker path stays as vllm-omni built it",
                stage_label(self), type(exc).__name__, exc,
            )  # fmt: skip
            outcome = Outcome("unknown", "?", f"error: {type(exc).__name__}")
        report(stage_label(self), outcome)

    setattr(build_backend, _MARK, True)
    code2wav_cls._build_backend = build_backend
    return True


def register() -> None:
    """vLLM's general-plugin entry point; runs in every vLLM process, and only hooks there."""
    if importlib.util.find_spec("vllm_omni") is None:
        return  # plain vLLM: nothing to do
    try:
        code2wav_module = importlib.import_module(CODE2WAV_MODULE)
        core_module = importlib.import_module(CORE_MODULE)
    except Exception as exc:  # vllm-omni laid out differently
        _warn_once("import", "cannot import vllm-omni's MiniCPM-o Code2Wav (%s: %s); the speaker "
                   "embedding stays on ONNX Runtime on the CPU", type(exc).__name__, exc)  # fmt: skip
        return
    code2wav_cls = getattr(code2wav_module, "MiniCPMO45Code2Wav", None)
    core_cls = getattr(core_module, "StepAudio2Token2WavCore", None)
    problem = (
        "classes not found"
        if code2wav_cls is None or core_cls is None
        else compatibility_problem(code2wav_cls, core_cls)
    )
    if problem:
        _warn_once("compat", "incompatible vllm-omni (%s); the speaker embedding stays on ONNX Runtime "
                   "on the CPU", problem)  # fmt: skip
        return
    install(code2wav_cls, stands_aside=reads_device_spk_itself(code2wav_module))
