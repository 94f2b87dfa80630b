"""The shape of a stage entry as vllm-omni 0.30.0 parses it (`StageDeployConfig`).

Only what the merge and platform code needs to mirror upstream lives here: which stage keys are
wrapper keys, which are typed engine fields, and hence which fall into `engine_extras`.
"""

from __future__ import annotations

# Keys `_parse_stage_deploy` handles itself rather than as engine fields.
RESERVED_STAGE_KEYS = frozenset(
    {
        "async_chunk",
        "stage_id",
        "devices",
        "num_replicas",
        "env",
        "output_connectors",
        "input_connectors",
        "default_sampling_params",
        "default_pooling_params",
        "engine_extras",
        "engine_args",
        "runtime",
    }
)

# StageDeployConfig's fields other than the wrapper ones, in declaration order (0.30.0).
STAGE_ENGINE_FIELDS: tuple[str, ...] = (
    "subtalker_sampling_params", "silence_ban_frames", "tensor_parallel_size",
    "enable_expert_parallel", "gpu_memory_utilization", "max_num_seqs", "max_num_batched_tokens",
    "max_model_len", "enforce_eager", "async_scheduling", "disable_hybrid_kv_cache_manager",
    "mm_processor_cache_gb", "mamba_ssm_cache_dtype", "compilation_config", "profiler_config",
    "skip_mm_profiling", "enable_flashinfer_autotune", "config_format", "load_format",
    "tokenizer_mode", "ulysses_degree", "ulysses_mode", "ulysses_a2a_permute", "ring_degree",
    "allgather_degree", "sequence_parallel_size", "cfg_parallel_size", "vae_patch_parallel_size",
    "vae_parallel_mode", "text_encoder_tp_size", "use_hsdp", "hsdp_shard_size",
    "hsdp_replicate_size", "model_class_name", "diffusion_load_format", "lora_path",
    "lora_backend", "lora_scale", "diffusers_load_kwargs", "diffusers_call_kwargs",
    "diffusion_quantization_config", "diffusion_attention_backend", "fastvideo_vsa_topk",
    "diffusion_attention_config", "diffusion_compile_granularity", "diffusion_compile_dynamic",
    "fa_deterministic", "cache_backend", "cache_config", "video_output_transport",
    "enable_cache_dit_summary", "step_execution", "vae_use_slicing", "vae_use_tiling",
    "vae_fast_path", "boundary_ratio", "flow_shift", "diffusion_kv_cache_dtype",
    "diffusion_kv_cache_skip_steps", "diffusion_kv_cache_skip_layers", "auxiliary_text_encoder",
    "enable_multithread_weight_load", "enable_broadcast_weight_load", "num_weight_load_threads",
    "diffusion_offload_config", "enable_cpu_offload", "enable_layerwise_offload",
    "enable_distributed_layerwise_offload", "dlo_use_allgather", "dlo_resident_layers",
    "host_weight_runtime_mode", "host_weight_runtime_root", "dlo_host_registration_limit_gib",
    "enable_diffusion_pipeline_profiler", "max_generated_image_size",
    "tts_max_instructions_length",
)  # fmt: skip

# Attributes of a parsed stage: what a platform entry may set directly (`hasattr` upstream).
STAGE_ATTRIBUTES = frozenset(
    {
        "stage_id", "devices", "num_replicas", "env", "async_chunk", "output_connectors",
        "input_connectors", "default_sampling_params", "default_pooling_params", "engine_extras",
        *STAGE_ENGINE_FIELDS,
    }
)  # fmt: skip

PLATFORMS = ("cuda", "rocm", "npu", "xpu", "musa")
