"""Building a patched model the way vLLM 0.30.0 builds a stage's model.

`load_as_vllm` runs vLLM's own `BaseModelLoader.load_model` (vllm/model_executor/model_loader/
base_loader.py): construction under `set_default_torch_dtype(model_config.dtype)` and
`with torch.device(target)`, then `load_weights` still under the default dtype, then vLLM's
`process_weights_after_loading` and `.eval()`. Only the two steps a real loader gets from the
checkpoint are ours: `create_model` constructs the given class with the given (minimal) stage
config instead of resolving an architecture from a Hugging Face config, and `load_weights` feeds
the model no checkpoint tensors (the Code2Wav and speech models load their own assets in
`load_weights`, which is what the plugin patches).

`forward_as_runner` calls a forward as vLLM's model runner does: under `torch.inference_mode()`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import SimpleNamespace
from typing import Any

import torch

DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}


def stage_config(dtype: torch.dtype, device: str = "cpu", **model_fields: Any) -> Any:
    """A minimal VllmConfig: what load_model and the models read."""
    model_config = SimpleNamespace(dtype=dtype, quantization=None, word_embeddings_untied_by_checkpoint=False,
                                   **model_fields)  # fmt: skip
    return SimpleNamespace(
        model_config=model_config,
        device_config=SimpleNamespace(device=torch.device(device)),
        load_config=SimpleNamespace(device=None),
        quant_config=None,
    )


def load_as_vllm(build: Callable[[Any], Any], vllm_config: Any) -> Any:
    """vLLM's BaseModelLoader.load_model around `build(vllm_config)` (the model's constructor)."""
    from vllm.model_executor.model_loader.base_loader import BaseModelLoader

    class StageLoader(BaseModelLoader):
        def download_model(self, model_config: Any) -> None:  # pragma: no cover - never called
            raise NotImplementedError

        def create_model(self, vllm_config: Any, model_config: Any, prefix: str = "") -> Any:
            return build(vllm_config)

        def load_weights(self, model: Any, model_config: Any) -> None:
            model.load_weights(iter(()))

    with _accelerator_cache_release_on_cpu():
        return StageLoader(SimpleNamespace()).load_model(vllm_config, vllm_config.model_config)


@contextmanager
def _accelerator_cache_release_on_cpu() -> Iterator[None]:
    """vLLM 0.32.0's load_model releases the accelerator's cached blocks after load_weights
    (`torch.accelerator.empty_cache()`), which a CPU-only torch refuses ("Cannot access accelerator
    device when none is available"); on a GPU host it frees unused cache and changes no model. Where
    no accelerator exists, that one call is a no-op here; everything else runs as vLLM wrote it."""
    accelerator = getattr(torch, "accelerator", None)
    if accelerator is None or accelerator.is_available():
        yield
        return
    original = accelerator.empty_cache
    accelerator.empty_cache = lambda: None
    try:
        yield
    finally:
        accelerator.empty_cache = original


@contextmanager
def as_runner() -> Iterator[None]:
    """The model runner's context around a forward."""
    with torch.inference_mode():
        yield


def runner_forward(
    code2wav: Any, refs: list[tuple[torch.Tensor, int]], tag: str, tokens: int = 24
) -> list[Any]:
    """One Code2Wav forward as vLLM's runner calls it: several requests, the flattened input ids on
    the stage's device, each request's reference voice a CPU tensor in its additional information,
    under `torch.inference_mode()`. Request ids are `tag`-i (new ids: new requests)."""
    device = torch.device(code2wav.backend._token2wav._core.device)
    infos: list[dict[str, Any]] = []
    codes: list[torch.Tensor] = []
    for i, (ref, rate) in enumerate(refs):
        generator = torch.Generator(device="cpu").manual_seed(10 + i)
        ids = torch.randint(0, 6561, (tokens,), generator=generator, dtype=torch.int64, device="cpu")
        meta = {"request_id": f"{tag}-{i}", "cache_epoch": 0, "chunk_seq": 0, "last_chunk": True,
                "ref_audio_sr": rate, "code_flat_numel": tokens}  # fmt: skip
        infos.append(
            {"meta": meta, "codes": {"audio": ids, "ref": ref.to(dtype=torch.float32, device="cpu")}}
        )
        codes.append(ids)
    with as_runner():
        output = code2wav.forward(
            input_ids=torch.cat(codes).to(device),
            runtime_additional_information=infos,
            request_ids=[info["meta"]["request_id"] for info in infos],
            seq_token_counts=[tokens] * len(refs),
        )
    return list(output.multimodal_outputs["model_outputs"])


def configure_vllm_logging() -> None:
    """The `vllm` logger tree as a stage process has it before its model loads: up to vLLM 0.30
    importing vllm.logger configures it; vLLM 0.32 configures it only when a process applies its
    logging config (vllm-omni 0.32's stage process calls `configure_logging(vllm_config.
    logging_config)` first thing), so a process here does the same with the default config."""
    import vllm.logger

    configure = getattr(vllm.logger, "configure_logging", None)
    if configure is None:
        return
    from vllm.config.logging import LoggingConfig

    configure(LoggingConfig())
