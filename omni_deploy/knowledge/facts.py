"""What a vllm-omni source tree does with a deploy file beyond which keys it reads, found in its code.

Run by `generate` over every release (never imported): each fact is the first line that shows it,
as `file:line`, or absent when that release's code does not have it. The checks and explain cite
these lines; nothing here is assumed from a version number.

- FACTS: one line of code per behaviour (the connector set-up reads `runtime.connectors`, an inline
  `{name, extra}` input connector is taken, `DuplexSessionRuntimeConfig(**duplex_session)` refuses
  unknown keys, the typed config refuses stage keys it has no owner for, ...).
- pipelines(): the registry's pipelines with their stages (stage_id -> execution type), whether
  one declares an async-chunk producer, and where each is defined.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_CONNECTOR_INIT = "vllm_omni/distributed/omni_connectors/utils/initialization.py"
_OUTPUT_LOOP = r'for output_key, conn_ref in stage_config\.get\("output_connectors"'
_CODE2WAV = "vllm_omni/model_executor/models/minicpmo_4_5/minicpmo_4_5_code2wav.py"
_TOKEN2WAV = "vllm_omni/model_executor/models/step_audio2/step_audio2_token2wav.py"


@dataclass(frozen=True)
class Fact:
    name: str
    files: tuple[str, ...]  # files under the tree root (plain paths), searched in order
    pattern: str  # a regular expression matched against each line
    meaning: str  # what the line shows, for the reference page and messages
    after: str | None = None  # only lines after the first one this matches (a second loop's copy)


FACTS = (
    Fact("runtime_connectors", (_CONNECTOR_INIT,), r'normalized\.get\("runtime"\)',
         "the connector set-up reads top-level runtime.connectors / runtime.edges, which win over connectors / edges"),
    Fact("inline_connectors", (_CONNECTOR_INIT,), r'ConnectorSpec\(name=conn_ref\["name"\]',
         "an input or output connector may be written inline as {name, extra}"),
    Fact("output_only_edges", (_CONNECTOR_INIT,), r'for output_key, conn_ref in stage_config\.get\("output_connectors"',
         "a stage's output_connectors alone wire an edge (the receiver needs no input_connectors)"),
    Fact("connector_name_required", (_CONNECTOR_INIT,), r'name=conn_config\["name"\]',
         "a wired connector without `name` raises KeyError in the connector set-up"),
    Fact("transfer_config_swallowed", ("vllm_omni/engine/stage_init_utils.py",), r"Failed to load transfer config",
         "a failing connector set-up is logged as a warning and the server starts with no connector config"),
    Fact("duplex_session_splat", ("vllm_omni/config/stage_config.py",), r"DuplexSessionRuntimeConfig\(\*\*",
         "duplex_session is splatted into DuplexSessionRuntimeConfig: an unknown key is a TypeError at start-up"),
    Fact("ownership_check", ("vllm_omni/config/omni_config.py",), r"with no structured config owner",
         "the typed config refuses a stage key that no structured config owns"),
    Fact("typed_config_at_startup", ("vllm_omni/entrypoints/cli/serve.py",), r"resolve_omni_config\(",
         "`vllm serve --omni` builds the typed config (VllmOmniConfig) before any engine starts"),
    Fact("legacy_startup", ("vllm_omni/entrypoints/utils.py",), r"create_legacy_stage_configs_from_model\(",
         "start-up builds the legacy stage configs (merge_pipeline_deploy), not the typed config"),
    Fact("async_chunk_refusal", ("vllm_omni/config/stage_config.py", "vllm_omni/config/omni_config.py"),
         r"has async_chunk=True in deploy but no stage",
         "async_chunk: true is refused for a pipeline none of whose stages has an async-chunk producer"),
    Fact("async_chunk_accepts_next_stage_processor", ("vllm_omni/config/stage_config.py",),
         r"ps\.async_chunk_process_next_stage_input_func or ps\.custom_process_next_stage_input_func",
         "a stage's custom next-stage processor counts as an async-chunk producer"),
    Fact("pipeline_unregistered", ("vllm_omni/config/config_factory.py", "vllm_omni/config/stage_config.py"),
         r"Pipeline \{[a-z_.]+!r\} (not in registry|from deploy config is not registered)",
         "a `pipeline:` the registry does not have is a KeyError at start-up"),
    Fact("extra_stage_ignored", ("vllm_omni/config/omni_config.py", "vllm_omni/config/stage_config.py"),
         r"deploy_by_id\.get\(",
         "deploy stages are looked up by the pipeline's stage ids: a stage id the pipeline lacks is ignored"),
    Fact("platform_stage_flat", ("vllm_omni/config/stage_config.py",), r'k not in \("stage_id", "devices", "env"\)',
         "a platform stage entry without engine_args is flat: its `runtime:` is not read, it is one more engine key"),
    Fact("npu_refuses_bf16_attention_cache", ("vllm_omni/platforms/npu/models/minicpmo_4_5_code2wav.py",),
         r"_BF16_ATTENTION_CACHE_KEY, False\)\)",
         "on NPU, code2wav_bfloat16_attention_cache: true is a ValueError when Code2Wav builds"),
    Fact("code2wav_module", (_CODE2WAV,), r"^class MiniCPMO45Code2Wav\b",
         "MiniCPM-o 4.5's Code2Wav stage (the token2wav vocoder in its own stage)"),
    Fact("spk_embedding_hook", (_TOKEN2WAV,), r"def _forward_spk_embedding\(",
         "the token2wav core's one CAM++ call (_forward_spk_embedding), which omni-deploy's plugin replaces"),
    Fact("campplus_onnx", (_TOKEN2WAV,), r"campplus\.onnx",
         "CAM++ runs from campplus.onnx in ONNX Runtime on the CPU"),
    Fact("token2wav_trt", (_CODE2WAV,), r'"token2wav_trt"|_TRT_KEY\s*=|token2wav_trt',
         "Code2Wav reads token2wav_trt (TensorRT token2wav, CUDA only)"),
    Fact("token2wav_trt_env", (_CODE2WAV,), r"MINICPMO_TOKEN2WAV_TRT",
         "Code2Wav reads the environment variable MINICPMO_TOKEN2WAV_TRT"),
    # Code2Wav's own precision, reference and CAM++ behaviour (explain per release, issue 39).
    Fact("code2wav_tf32_env", (_CODE2WAV,), r'os\.environ\.get\("MINICPMO_CODE2WAV_TF32"\)',
         "env MINICPMO_CODE2WAV_TF32, when set and not empty, decides Code2Wav's TF32 matmul policy before any key"),
    Fact("code2wav_tf32_default_on", (_CODE2WAV,),
         r'extra\.get\("token2wav_allow_tf32", extra\.get\("code2wav_allow_tf32", True\)\)',
         "token2wav_allow_tf32, else its alias code2wav_allow_tf32, decides Code2Wav's TF32 matmul policy; on by default"),
    Fact("code2wav_tf32_default_off", (_CODE2WAV,), r'get\("token2wav_allow_tf32", False\)',
         "token2wav_allow_tf32 turns TF32 matmuls on for Code2Wav's whole forward; off by default"),
    Fact("code2wav_tf32_cuda_only", (_CODE2WAV,), r'_tf32_mode\(extra\) if current_omni_platform\.is_cuda\(\) else "off"',
         "the CFM's TF32 policy applies on CUDA only; other platforms run it off"),
    Fact("ref_prefetch", (_CODE2WAV,), r'extra\.get\("token2wav_ref_prefetch", True\)',
         "token2wav_ref_prefetch (default on): a new request's reference voice is prepared in idle steps after it "
         "arrives, before its chunk 0"),
    Fact("ref_prefetch_setup", (_CODE2WAV,), r'extra\.get\("token2wav_ref_prefetch_setup", False\)',
         "token2wav_ref_prefetch_setup (default off): the idle prefetch also runs the flow set-up, not just the prompt"),
    Fact("ref_prefetch_max_waiters", (_CODE2WAV,), r'extra\.get\("token2wav_ref_prefetch_max_waiters", 1\)',
         "token2wav_ref_prefetch_max_waiters (default 1): the idle prefetch runs only while at most this many are queued"),
    Fact("npu_device_spk", (_CODE2WAV,), r"token2wav\.enable_device_spk_embedding\(\)",
         "on NPU, Code2Wav runs CAM++ in torch on the device (weights from campplus.onnx), not in ONNX Runtime",
         after=r"elif current_omni_platform\.is_npu\(\):"),
    Fact("campplus_session_lazy", (_TOKEN2WAV,), r"if self\._spk_model is None:",
         "the CPU ONNX Runtime session for campplus.onnx is built on first use only: a device path installed "
         "at build never allocates it"),
    Fact("campplus_session_eager", (_TOKEN2WAV,), r"^        self\._spk_model = onnxruntime\.InferenceSession\(",
         "the CPU ONNX Runtime session for campplus.onnx is built with the token2wav models when they load, "
         "also where a device path replaces it"),
    # Memory: what a stage's KV budget and memory request come to (issue 31).
    Fact("kv_budget_exact", ("vllm_omni/worker/base.py",),
         r"if kv_cache_memory_bytes := self\.cache_config\.kv_cache_memory_bytes",
         "with kv_cache_memory_bytes set, the stage's KV budget is exactly that, whatever gpu_memory_utilization says"),
    Fact("memory_request_capped", ("vllm_omni/worker/memory_utils.py",), r"Capping requested memory",
         "a stage asking for more memory than is free at start-up is capped to what is free, not refused"),
    # Values as the code applies them.
    Fact("max_model_len_auto", ("vllm_omni/config/omni_config.py",), r"max_model_len: int \| None = Field\(default=None, ge=-1\)",
         "max_model_len: -1 is accepted (vLLM fits the context to the memory)"),
    Fact("num_replicas_int_cast", ("vllm_omni/config/stage_config.py",), r'"num_replicas": int\(num_replicas\)',
         "num_replicas is cast with int(): a string of digits is accepted"),
    Fact("code2wav_values_int_cast", (_CODE2WAV,), r'"codec_chunk_frames": int\(extra\.get\("codec_chunk_frames"',
         "Code2Wav casts codec_chunk_frames and codec_left_context_frames with int(): a string of digits is accepted"),
    Fact("code2wav_flag_bool_cast", (_CODE2WAV,), r'"enabled": bool\(extra\.get\("enable_cfm_graph"',
         "Code2Wav reads its switches (enable_cfm_graph, enable_hift_graph, ...) with bool(): a quoted \"false\" is true"),
    Fact("code2wav_chunk_refusal", (_CODE2WAV,), r"Invalid MiniCPM-o connector chunk configuration",
         "Code2Wav refuses codec_chunk_frames <= 0 or codec_left_context_frames < 0 in the connector it reads"),
    Fact("code2wav_initial_batch_refusal", (_CODE2WAV,), r"code2wav_initial_batch_size must be 0 or >= code2wav_min_batch_size",
         "Code2Wav refuses a non-zero code2wav_initial_batch_size below code2wav_min_batch_size"),
    # The typed config's refusals of LLM stages (read only where start-up builds it).
    Fact("batched_tokens_ge_seqs", ("vllm_omni/config/omni_config.py",), r"must be >= max_num_seqs",
         "the typed config refuses max_num_batched_tokens < max_num_seqs in one stage"),
    Fact("weight_load_threads_ge_1", ("vllm_omni/config/omni_config.py",), r"num_weight_load_threads: int = Field\(default=4, ge=1\)",
         "the typed config refuses num_weight_load_threads below 1"),
    Fact("kv_transfer_with_async_chunk", ("vllm_omni/config/omni_config.py",),
         r'if deploy\.async_chunk and any\(stage\.engine_extras\.get\("kv_transfer_config"\)',
         "the typed config refuses kv_transfer_config on a stage while async_chunk is on"),
    Fact("async_chunk_edge_mismatch", ("vllm_omni/config/stage_config.py",), r"Set the same async_chunk mode on both stages",
         "the typed config refuses an edge whose two stages set different async_chunk modes"),
    Fact("server_vad_path_nonempty", ("vllm_omni/config/stage_config.py",), r"if self\.server_vad_model_path is not None and",
         "an empty server_vad_model_path is refused"),
    # Diffusion stages: the typed config's own path (issue 31).
    Fact("diffusion_shared_only", ("vllm_omni/config/omni_config.py",), r"^_DIFFUSION_SHARED_ONLY_ENGINE_FIELDS = frozenset\(",
         "a diffusion stage refuses the shared engine fields seed and kv_cache_dtype"),
    Fact("diffusion_unknown_field", ("vllm_omni/diffusion/data.py",), r"Unknown diffusion config field\(s\)",
         "a diffusion stage refuses a key its diffusion config does not own (enable_lora, a typo)"),
    Fact("vae_parallel_mode_values", ("vllm_omni/config/omni_config.py",),
         r'if self\.vae_parallel_mode not in \{"tile", ',
         "a diffusion stage's vae_parallel_mode must be one of the release's modes (tile, spatial_shard_height, "
         "spatial_shard_width; batch from 0.32.0rc1 on)"),
    Fact("hsdp_auto_shard_refusal", ("vllm_omni/config/omni_config.py",), r"Cannot auto-calculate hsdp_shard_size",
         "a diffusion stage with use_hsdp, hsdp_shard_size -1 (the default) and no other parallelism is refused"),
    # The stage runtime's device layout, before any engine starts (issue 42): the raising lines.
    Fact("stage_device_layout", ("vllm_omni/engine/stage_init_utils.py",), r"raise ValueError\(message\) from e",
         "a stage whose devices are neither tp x dp x pp nor num_replicas times it is refused before any engine starts",
         after=r"def _check_stage_device_layout\("),
    Fact("replica_device_split", ("vllm_omni/engine/stage_init_utils.py",), r"^    raise ValueError\($",
         "a stage with num_replicas > 1 needs devices for one replica (a template) or for all of them",
         after=r"def split_devices_for_replicas\("),
    Fact("replica_template_offsets", ("vllm_omni/engine/stage_init_utils.py",), r"raise ValueError\($",
         "a replica template's device offsets must lie in [0, devices per replica)",
         after=r"bad = \[a for a in offsets if not"),
    Fact("engine_args_win", ("vllm_omni/config/stage_config.py",), r'if "engine_args" in stage_data:',
         "a stage's engine_args are applied over its flat keys: engine_args.K wins over a flat K"),
    # Connector set-up (the 1->2 edge Code2Wav reads).
    Fact("output_connector_first", (_CONNECTOR_INIT,), r'for output_key, conn_ref in stage_config\.get\("output_connectors"',
         "a sender's output_connectors are registered before the receiver's input_connectors: the first connector for an edge wins"),
    Fact("edge_connector_types_differ", (_CONNECTOR_INIT,), r"Connector type mismatch for edge",
         "connectors of different types on the two ends of one edge fail the connector set-up"),
    Fact("connector_extra_dict", (_CONNECTOR_INIT,), r'extra = dict\(conn_(config|ref)\.get\("extra", \{\}\)\)',
         "a wired connector's extra is taken with dict(): `extra: null` fails the connector set-up"),
    # Where exactly `extra: null` raises, by side and form (the two loops hold identical lines).
    Fact("connector_extra_dict_inline", (_CONNECTOR_INIT,), r'extra = dict\(conn_ref\.get\("extra", \{\}\)\)',
         "an inline input connector's extra is taken with dict()"),
    Fact("connector_extra_dict_output", (_CONNECTOR_INIT,), r'extra = dict\(conn_config\.get\("extra", \{\}\)\)',
         "a named output connector's extra is taken with dict()", after=_OUTPUT_LOOP),
    Fact("connector_extra_dict_output_inline", (_CONNECTOR_INIT,), r'extra = dict\(conn_ref\.get\("extra", \{\}\)\)',
         "an inline output connector's extra is taken with dict()", after=_OUTPUT_LOOP),
)  # fmt: skip


# How a module's text is read: None when it is not there (or, for a release's own code, cannot be
# read). The default reads plainly (a release's wheel, the serving interpreter's own package);
# validate --vllm-omni-source passes omni-deploy's guarded reader (knowledge/code_reader.module_text),
# which refuses a FIFO, a device, a file past its size cap or not UTF-8 instead of reading it.
Read = Callable[[Path], "str | None"]


def plain_read(path: Path) -> str | None:
    """An installed module's text, read the bounded way (no FIFO hangs, no /dev/zero floods)."""
    from omni_deploy.common import guarded

    return guarded.installed_text(path)


def _parse(text: str | None) -> ast.Module | None:
    """The module's tree; None for none or code that does not parse (nothing is found in it)."""
    if text is None:
        return None
    try:
        return ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def find(root: Path, fact: Fact, read: Read = plain_read) -> str | None:
    """`file:line` of the first line under `root` that shows `fact`, or None."""
    pattern = re.compile(fact.pattern)
    after = re.compile(fact.after) if fact.after else None
    for rel in fact.files:  # plain relative paths (no glob: one file each)
        text = read(root / rel)
        if text is None:
            continue
        started = after is None
        for number, line in enumerate(text.splitlines(), 1):
            if not started:
                started = after.search(line) is not None  # type: ignore[union-attr]
            elif pattern.search(line):
                return f"{rel}:{number}"
    return None


def facts(root: Path, read: Read = plain_read) -> dict[str, str]:
    return {fact.name: at for fact in FACTS if (at := find(root, fact, read)) is not None}


def registry(root: Path, read: Read = plain_read) -> dict[str, tuple[str, str, int]]:
    """{name: (module, attribute, line)} from config/pipeline_registry.py, read as text.

    0.20.0-0.22.0 declare `name: ("module", "ATTR")`; 0.24.0 on import each PipelineConfig (or
    resolver) by name and map `name: NAME`. Stdlib only: the server check's child loads this file by
    path in the serving interpreter.
    """
    tree = _parse(read(root / "vllm_omni" / "config" / "pipeline_registry.py"))
    if tree is None:
        return {}
    imported = {
        alias.asname or alias.name: (node.module, alias.name)
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module
        for alias in node.names
    }
    out: dict[str, tuple[str, str, int]] = {}
    for node in ast.walk(tree):
        value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
        if not isinstance(value, ast.Dict):
            continue
        for key, item in zip(value.keys, value.values, strict=True):
            found = _registered(item, imported)
            if found is not None and isinstance(key, ast.Constant) and isinstance(key.value, str):
                out[key.value] = (*found, key.lineno)
    return out


def _registered(item: ast.expr, imported: dict[str, tuple[str, str]]) -> tuple[str, str] | None:
    """(module, attribute) of one registry value: a ("module", "ATTR") pair, or an imported name."""
    if isinstance(item, ast.Tuple) and len(item.elts) == 2:
        parts = [e.value for e in item.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
        return (str(parts[0]), str(parts[1])) if len(parts) == 2 else None
    if isinstance(item, ast.Name) and item.id in imported:
        return imported[item.id]
    return None


def _keyword(call: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def _stages(call: ast.Call) -> dict[str, Any] | None:
    """stage_id -> execution type, and the async-chunk producer, of a literal PipelineConfig(...)."""
    stages_node = _keyword(call, "stages")
    if not isinstance(stages_node, (ast.Tuple, ast.List)):
        return None
    stages: dict[str, str] = {}
    producer = processor = False
    sources: dict[int, list[int]] = {}
    producers: set[int] = set()
    for item in stages_node.elts:
        if not isinstance(item, ast.Call):
            return None
        sid = _keyword(item, "stage_id")
        kind = _keyword(item, "execution_type")
        if not isinstance(sid, ast.Constant) or not isinstance(sid.value, int):
            return None
        stages[str(sid.value)] = kind.attr.lower() if isinstance(kind, ast.Attribute) else "llm_ar"
        has_async = _keyword(item, "async_chunk_process_next_stage_input_func") is not None
        producer = producer or has_async
        if has_async:
            producers.add(sid.value)
        processor = processor or _keyword(item, "custom_process_next_stage_input_func") is not None
        inputs = _keyword(item, "input_sources")
        if isinstance(inputs, (ast.Tuple, ast.List)):
            sources[sid.value] = [
                e.value for e in inputs.elts if isinstance(e, ast.Constant) and isinstance(e.value, int)
            ]
    shape: dict[str, Any] = {
        "stages": stages,
        "async_chunk_producer": producer,
        "next_stage_processor": processor,
    }
    # Edges whose producer has an async-chunk function: both ends must resolve the same
    # async_chunk mode where the release validates it (async_chunk_edge_mismatch).
    async_edges = [[src, dst] for dst, srcs in sorted(sources.items()) for src in srcs if src in producers]
    if async_edges:
        shape["async_chunk_edges"] = async_edges
    return shape


def module_path(root: Path, module: str) -> Path | None:
    """The file of a dotted module name under `root`; None for a name that is not one (empty,
    relative, absolute, or with a part that is no identifier): it would name a file elsewhere."""
    parts = module.split(".")
    if not all(part.isidentifier() for part in parts):
        return None
    return root.joinpath(*parts[:-1], parts[-1] + ".py")


def pipelines(root: Path, read: Read = plain_read) -> dict[str, dict[str, Any]]:
    """{name: {"at", "stages"?, "async_chunk_producer"?, "default_deploy"?}}; a resolver function has no fixed stages."""
    out: dict[str, dict[str, Any]] = {}
    for name, (module, attribute, line) in sorted(registry(root, read).items()):
        entry: dict[str, Any] = {"registered_at": f"vllm_omni/config/pipeline_registry.py:{line}"}
        path = module_path(root, module)
        tree = _parse(read(path)) if path is not None else None
        rel = path.relative_to(root).as_posix() if path is not None else ""
        for node in tree.body if tree else []:
            if (
                isinstance(node, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id == attribute for t in node.targets)
                and isinstance(node.value, ast.Call)
            ):
                entry["at"] = f"{rel}:{node.lineno}"
                shape = _stages(node.value)
                if shape is not None:
                    entry.update(shape)
                # The deploy file the server loads for this pipeline when none is named: a file of
                # that name configures this pipeline (moss_tts.yaml -> moss_tts_delay).
                default = _keyword(node.value, "default_deploy_config_name")
                if isinstance(default, ast.Constant) and isinstance(default.value, str):
                    entry["default_deploy"] = default.value
        out[name] = entry
    return out
