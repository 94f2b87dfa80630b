"""The server check's stage-engine steps: what vllm-omni's stage runtime runs on the typed config
before it needs a GPU or the model.

Loaded by child.py in the serving interpreter (never imported by validate: it imports vllm_omni
and vllm). The order is the stage runtime's (0.30.0: `engine/stage_runtime.py`
`_prepare_stage_plans` and `_build_logical_stage_init_plans`, `engine/stage_init_utils.py`
`build_vllm_config`):

1. `compute_replica_layout` over every stage (a stage's `devices` split across its replicas),
2. per LLM stage: the engine arguments (`build_engine_args_dict_from_omni_stage_config`, filtered
   to `OmniEngineArgs`' fields), then `_check_stage_device_layout` on them (`OmniEngineArgs(**args)`,
   between the two upstream, resolves the model in its `__post_init__`: not run),
3. vLLM's `SchedulerConfig` on the stage's own values, as `EngineArgs.create_engine_config` builds
   it. That call needs the model's config first, so only what the file decides is built here: a
   stage that sets both `max_model_len` (not -1) and `max_num_batched_tokens`; chunked prefill as
   the file sets it (unset: vLLM's default for a generate model, on).

A stage whose engine arguments are built from the model's own files (some pipelines resolve
subfolders of its snapshot) is skipped after the replica layout: the check has no model.
A step the installed release lacks (an older or newer layout of these functions) is skipped: the
check never invents a refusal the release would not raise.
"""

from __future__ import annotations

from typing import Any


def _get(obj: Any, key: str, default: Any = None) -> Any:
    if hasattr(obj, "get"):
        return obj.get(key, default)
    return getattr(obj, key, default)


_REGISTRY = "vllm_omni.config.pipeline_registry"


def _stage_init_utils() -> Any:
    """`vllm_omni.engine.stage_init_utils`, imported without the pipeline registry.

    The module imports `config_factory`, which imports the registry, which imports every model
    family (and through vLLM's Qwen2-VL code, torchvision): the check imports only the file's own
    pipeline (child.py). While the module is imported, a stand-in registry with no pipelines
    takes the registry's place, and is removed again; none of the steps run here looks a pipeline
    up (the file's pipeline was resolved before, from the registry's text)."""
    import sys
    import types

    if _REGISTRY in sys.modules or "vllm_omni.config.config_factory" in sys.modules:
        from vllm_omni.engine import stage_init_utils

        return stage_init_utils
    stand_in = types.ModuleType(_REGISTRY)
    stand_in.OMNI_PIPELINES = {}  # type: ignore[attr-defined]

    def resolve_pipeline_config(*args: Any, **kwargs: Any) -> Any:
        raise LookupError("the server check's stand-in registry resolves no pipeline")

    stand_in.resolve_pipeline_config = resolve_pipeline_config  # type: ignore[attr-defined]
    sys.modules[_REGISTRY] = stand_in
    try:
        from vllm_omni.engine import stage_init_utils

        return stage_init_utils
    finally:
        if sys.modules.get(_REGISTRY) is stand_in:
            del sys.modules[_REGISTRY]


class _Platform:
    """The platform the check runs for, in place of the host's (a CPU host has no worker classes):
    the engine arguments name a worker class by platform, a string nothing here resolves."""

    def __init__(self, real: Any, name: str) -> None:
        self._real, self._name = real, name

    def __getattr__(self, attribute: str) -> Any:
        return getattr(self._real, attribute)

    def get_omni_ar_worker_cls(self) -> str:
        return f"<{self._name} AR worker>"

    def get_omni_generation_worker_cls(self) -> str:
        return f"<{self._name} generation worker>"

    def is_rocm(self) -> bool:
        return self._name == "rocm"


def stage_engine_steps(config: Any, model: str, platform: str = "cuda") -> None:
    """Run the steps on a VllmOmniConfig (raises what upstream raises)."""
    steps = _stage_init_utils()
    real = getattr(steps, "current_omni_platform", None)
    if real is not None:
        steps.current_omni_platform = _Platform(real, platform)
    try:
        _run(steps, config, model)
    finally:
        if real is not None:
            steps.current_omni_platform = real


def _run(steps: Any, config: Any, model: str) -> None:
    stages = list(getattr(config, "stage_configs", ()) or ())
    layout = getattr(steps, "compute_replica_layout", None)
    if layout is not None:
        layout(stages)
    project = getattr(steps, "build_engine_args_dict_from_omni_stage_config", None)
    check_layout = getattr(steps, "_check_stage_device_layout", None)
    engine_args_class = getattr(steps, "OmniEngineArgs", None)
    keep = getattr(steps, "filter_dataclass_kwargs", None)
    if project is None or check_layout is None or engine_args_class is None or keep is None:
        return
    for stage in stages:
        kind = getattr(stage, "stage_type", "llm")
        if getattr(kind, "value", kind) == "diffusion":
            continue
        try:
            args = keep(engine_args_class, project(stage, model))
        except Exception as exc:
            if _needs_the_model(exc, model):
                continue  # this stage's engine arguments come from the model's files: not decided here
            raise
        # OmniEngineArgs(**args) comes between these in build_vllm_config, but its __post_init__
        # resolves the model (a download): the layout check reads the filtered dict itself.
        check_layout(stage, args)
        _scheduler(args)


def _needs_the_model(exc: BaseException, model: str) -> bool:
    """An error of resolving the model or a checkpoint a stage names (the check has no network, and
    `model` is a placeholder): some pipelines build a stage's engine arguments from the files of a
    snapshot (a subfolder of the model's, or a stage's own checkpoint)."""
    text = str(exc)
    fetching = ("download failed", "cached snapshot", "local snapshot", "outgoing traffic has been disabled")
    return (
        model in text
        or type(exc).__module__.startswith("huggingface_hub")
        or (isinstance(exc, (RuntimeError, OSError)) and any(words in text for words in fetching))
    )


def _scheduler(args: dict[str, Any]) -> None:
    """vLLM's SchedulerConfig on the values the file decides (see the module's docstring)."""
    length = args.get("max_model_len")
    batched = args.get("max_num_batched_tokens")
    if not isinstance(length, int) or length <= 0 or not isinstance(batched, int):
        return
    try:
        from vllm.config import SchedulerConfig
    except ImportError:
        return
    chunked = args.get("enable_chunked_prefill")
    kwargs: dict[str, Any] = {
        "max_model_len": length,
        "is_encoder_decoder": False,
        "max_num_batched_tokens": batched,
        "enable_chunked_prefill": True if chunked is None else bool(chunked),
    }
    seqs = args.get("max_num_seqs")
    if isinstance(seqs, int):
        kwargs["max_num_seqs"] = seqs
    threshold = args.get("long_prefill_token_threshold")
    if isinstance(threshold, int):
        kwargs["long_prefill_token_threshold"] = threshold
    SchedulerConfig(**kwargs)
