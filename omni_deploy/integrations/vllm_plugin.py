"""vLLM general plugin: MiniCPM-o 4.5's CAM++ speaker embedding on CUDA inside vllm-omni 0.30.0.

vLLM calls `register()` in every process it starts. The plugin is inert unless the environment
asks for the CUDA CAM++ path (OMNI_DEPLOY_SPK_BACKEND=cuda-torch, set by `omni-deploy serve`, or by
hand); the matmul TF32 policy comes from OMNI_DEPLOY_SPK_TF32 (default 1).

When active, it wraps MiniCPM-o 4.5 Code2Wav's `_build_backend`. Once vllm-omni has built the
token2wav core (ONNX Runtime session loaded, TensorRT swapped in if that was selected), the core's
speaker model is replaced by omni-deploy's encoder for the same campplus.onnx, through the callable
contract vllm-omni already supports for TensorRT (`_forward_spk_embedding` calls any non-ORT
`_spk_model(feat[T, 80]) -> [1, 192]`). Only that core is touched: Step-Audio2's and CosyVoice3's
speaker paths stay as they are.

Nothing here may break serving: any failure logs one warning with the reason and leaves ONNX
Runtime on the CPU in place. Where the installed vllm-omni reads `token2wav_device_spk` itself, the
plugin stands aside.
"""

from __future__ import annotations

import functools
import inspect
import logging
import os
from typing import Any

from omni_deploy.integration_env import CUDA_TORCH, SPK_BACKEND, SPK_TF32

CODE2WAV_MODULE = "vllm_omni.model_executor.models.minicpmo_4_5.minicpmo_4_5_code2wav"
CORE_MODULE = "vllm_omni.model_executor.models.step_audio2.step_audio2_token2wav"
_MARK = "_omni_deploy_campplus"
_warned: set[str] = set()


def _logger() -> logging.Logger:
    try:
        from vllm.logger import init_logger

        return init_logger("omni_deploy.vllm_plugin")
    except Exception:  # vllm missing or its logging changed: plain logging still works
        return logging.getLogger("omni_deploy.vllm_plugin")


def _warn_once(key: str, message: str) -> None:
    if key not in _warned:
        _warned.add(key)
        _logger().warning("omni-deploy CAM++ plugin: %s; keeping ONNX Runtime on the CPU", message)


def active() -> bool:
    return os.environ.get(SPK_BACKEND) == CUDA_TORCH


def allow_tf32() -> bool:
    return os.environ.get(SPK_TF32, "1") != "0"


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
        return "token2wav_device_spk" in inspect.getsource(code2wav_module)
    except (OSError, TypeError):
        return False


def attach_encoder(core: Any) -> bool:
    """Swap `core`'s ONNX Runtime CAM++ session for omni-deploy's encoder. True when swapped."""
    try:
        import onnxruntime
    except ImportError:
        _warn_once("onnxruntime", "onnxruntime does not import")
        return False
    current = getattr(core, "_spk_model", None)
    if not isinstance(current, onnxruntime.InferenceSession):
        return False  # TensorRT (or something else) was selected: leave it
    device = getattr(core, "device", None)
    import torch

    device = torch.device(device) if device is not None else None
    forced_cpu = os.environ.get("OMNI_DEPLOY_SPK_ALLOW_CPU") == "1"  # tests: the CPU stands in for CUDA
    if device is None or (device.type != "cuda" and not forced_cpu):
        _warn_once("device", f"the Code2Wav stage runs on {device}, not CUDA")
        return False
    onnx_path = os.path.join(str(core.model_path), "campplus.onnx")
    try:
        from omni_deploy.speaker import load_encoder

        encoder = load_encoder(onnx_path, device=device, allow_tf32=allow_tf32())
    except Exception as exc:  # never break serving: any failure keeps the CPU path
        _warn_once(f"load:{onnx_path}", f"cannot load {onnx_path} ({type(exc).__name__}: {exc})")
        return False
    core._spk_model = encoder
    _logger().info(
        "omni-deploy CAM++ plugin: MiniCPM-o Code2Wav speaker embedding runs in torch on %s "
        "(FP32 weights and inputs, matmul TF32 %s, kernels %s) from %s",
        device,
        "on" if allow_tf32() else "off",
        encoder.model.backend,
        onnx_path,
    )
    return True


def _find_core(code2wav: Any) -> Any:
    facade = getattr(getattr(code2wav, "backend", None), "_token2wav", None)
    return getattr(facade, "_core", None)


def install(code2wav_cls: Any) -> bool:
    """Wrap `_build_backend` once. Returns False when it was already wrapped."""
    original = code2wav_cls._build_backend
    if getattr(original, _MARK, False):
        return False

    @functools.wraps(original)
    def build_backend(self: Any) -> None:
        original(self)
        core = _find_core(self)
        if core is None:
            _warn_once("layout", "the Code2Wav backend no longer exposes its token2wav core")
            return
        try:
            attach_encoder(core)
        except Exception as exc:  # never break serving
            _warn_once("attach", f"{type(exc).__name__}: {exc}")

    setattr(build_backend, _MARK, True)
    code2wav_cls._build_backend = build_backend
    return True


def register() -> None:
    """vLLM's general-plugin entry point; runs in every vLLM process."""
    if not active():
        return
    try:
        import importlib

        code2wav_module = importlib.import_module(CODE2WAV_MODULE)
        core_module = importlib.import_module(CORE_MODULE)
    except Exception as exc:  # vllm-omni missing or laid out differently
        _warn_once("import", f"cannot import vllm-omni's MiniCPM-o Code2Wav ({type(exc).__name__}: {exc})")
        return
    if reads_device_spk_itself(code2wav_module):
        if "aside" not in _warned:
            _warned.add("aside")
            _logger().info(
                "omni-deploy CAM++ plugin: this vllm-omni reads token2wav_device_spk itself; standing aside"
            )
        return
    code2wav_cls = getattr(code2wav_module, "MiniCPMO45Code2Wav", None)
    core_cls = getattr(core_module, "StepAudio2Token2WavCore", None)
    problem = (
        "classes not found"
        if code2wav_cls is None or core_cls is None
        else compatibility_problem(code2wav_cls, core_cls)
    )
    if problem:
        _warn_once("compat", f"incompatible vllm-omni: {problem}")
        return
    if install(code2wav_cls):
        _logger().info("omni-deploy CAM++ plugin: hooked MiniCPM-o 4.5 Code2Wav (CUDA CAM++ requested)")
