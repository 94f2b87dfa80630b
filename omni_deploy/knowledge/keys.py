"""The knowledge table: every deploy key omni-deploy knows, where it sits, its type and bounds,
its default, which vllm-omni versions read it, and what it does.

Places:
- `top`: top level of the file;      - `duplex_session`: inside `duplex_session` (strict keys);
- `stage`: a `stages[]` entry (also a `platforms.<p>.stages[]` entry);
- `connector`: a `connectors.<name>` entry; - `connector_extra`: the connector transport's `extra`;
- `code2wav`: MiniCPM-o 4.5 Code2Wav options, in the `extra` of the connector stage 2 receives;
- `platform`: a `platforms.<p>` section.
Which versions read a key, where, and with which default is not written here: it is generated from
each release's code (`upstream_keys.json`, see `generate.py`) and joined by `status()`. What code
cannot tell lives here: meaning, JSON types, bounds, hints, and who reads the keys vllm-omni's own
code does not (`reader`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from omni_deploy.config.stage_schema import STAGE_ENGINE_FIELDS
from omni_deploy.integrations.speaker_rules import (
    DEFAULT_DEVICE_PREPARE,
    ENV_TRT,
    KEY_ALLOW_TF32,
    KEY_DEVICE_PREPARE,
    KEY_DEVICE_SPK,
    KEY_TRT,
)
from omni_deploy.integrations.speaker_rules import DEFAULTS as SPK_DEFAULTS

NO_DEFAULT = object()

# Who reads a key (Key.reader).
VLLM_OMNI = "vllm-omni"  # vllm-omni's own code: the versions come from upstream_keys.json
VLLM = "vllm"  # a stage key vllm-omni passes to vLLM as an engine argument
PLUGIN = "plugin"  # omni-deploy's own vLLM plugin (omni_deploy/integrations/vllm_plugin.py)
ELSEWHERE = "elsewhere"  # vllm-omni code outside what the generator reads (a different file kind)
NOBODY = "nobody"  # published configs carry it, no release's code reads it


@dataclass(frozen=True)
class Key:
    name: str
    place: str
    types: tuple[str, ...] = ()  # JSON Schema types; empty: anything
    default: Any = NO_DEFAULT
    meaning: str = ""
    reader: str = VLLM_OMNI
    minimum: float | None = None
    exclusive_minimum: float | None = None
    maximum: float | None = None
    enum: tuple[Any, ...] | None = None
    items: str | None = None  # JSON type of list items
    item_minimum: float | None = None
    pattern: str | None = None  # for string values
    pattern_words: str | None = None  # the pattern said in words, for messages
    engine_extra: bool = False  # a stage key that vllm-omni passes to vLLM as an engine argument
    error_if_present: str | None = None  # the key is refused outright


def _k(
    name: str, place: str, types: str = "", default: Any = NO_DEFAULT, meaning: str = "", **kw: Any
) -> Key:
    return Key(name, place, tuple(t for t in types.split("|") if t), default, meaning, **kw)


INT, NUM, BOOL, STR, MAP, LIST = "integer", "number", "boolean", "string", "object", "array"

TOP: list[Key] = [
    _k("base_config", "top", "string|null", None, "File this one overlays; relative to this file's directory."),
    _k("async_chunk", "top", BOOL, True, "Stream chunks between stages as soon as they exist."),
    _k("session_mode", "top", STR, "turn", "turn: one request per chat turn; duplex: realtime sessions.",
       enum=("turn", "duplex")),
    _k("model_runner", "top", STR, "v1", "vLLM model runner generation for every stage.", enum=("v1", "v2")),
    _k("active_stream_window", "top", INT, 0, "Stage-1 active stream slots; 0 cycles all streams.", minimum=0),
    _k("duplex_session", "top", f"{MAP}|null", None, "Realtime session lifecycle and buffering limits."),
    _k("connectors", "top", f"{MAP}|null", None, "Named inter-stage connectors: {name: {name: Class, extra: {...}}}."),
    _k("edges", "top", f"{LIST}|null", None, "Explicit stage graph edges (pipelines that need them)."),
    _k("stages", "top", f"{LIST}", [], "Per-stage deployment settings, matched to the pipeline by stage_id."),
    _k("platforms", "top", f"{MAP}|null", None, "Per-platform overrides: cuda, rocm, npu, xpu, musa."),
    _k("pipeline", "top", f"{STR}|null", None, "Pipeline registry key; default: picked from the model's config."),
    _k("trust_remote_code", "top", f"{BOOL}|null", None, "Allow the checkpoint's custom code (every stage)."),
    _k("distributed_executor_backend", "top", f"{STR}|null", None, "vLLM executor backend (every stage)."),
    _k("dtype", "top", f"{STR}|null", None, "Model dtype (every stage)."),
    _k("quantization", "top", f"{STR}|null", None, "Quantization method (every stage)."),
    _k("enable_prefix_caching", "top", f"{BOOL}|null", None, "Prefix caching (every stage)."),
    _k("enable_chunked_prefill", "top", f"{BOOL}|null", None, "Chunked prefill (every stage)."),
    _k("data_parallel_size", "top", f"{INT}|null", None, "Data-parallel size (every stage).", minimum=1),
    _k("pipeline_parallel_size", "top", f"{INT}|null", None, "Pipeline-parallel size (every stage).", minimum=1),
    _k("custom_voice_dir", "top", f"{STR}|null", None, "Folder of custom reference voices."),
    _k("forced_aligner", "top", f"{MAP}|null", None, "Only in a --forced-aligner-config file: the word-timestamp "
       "pooling stage appended to the pipeline.", reader=ELSEWHERE),
    _k("stage_args", "top", "", NO_DEFAULT, "Removed schema.",
       error_if_present="the `stage_args` schema was removed; vllm-omni refuses the file. Put deployment "
       "settings under `stages` (topology is defined by the pipeline)"),
]  # fmt: skip

DUPLEX: list[Key] = [
    _k("idle_ttl_s", "duplex_session", f"{NUM}|null", 300.0, "Idle session lifetime (null: never).", exclusive_minimum=0),
    _k("disconnect_grace_s", "duplex_session", NUM, 30.0, "Grace period after a disconnect.", exclusive_minimum=0),
    _k("reaper_interval_s", "duplex_session", NUM, 5.0, "How often idle sessions are reaped.", exclusive_minimum=0),
    _k("resume_replay_ttl_s", "duplex_session", NUM, 60.0, "How long output is kept for a resume.", exclusive_minimum=0),
    _k("resume_replay_max_bytes_per_session", "duplex_session", INT, 8 * 1024 * 1024, "Replay buffer per session.",
       exclusive_minimum=0),
    _k("max_pending_input_bytes_per_session", "duplex_session", INT, 16 * 1024 * 1024, "Pending input per session.",
       exclusive_minimum=0),
    _k("max_pending_turns_per_session", "duplex_session", INT, 4, "Pending turns per session.", exclusive_minimum=0),
    _k("max_sessions", "duplex_session", INT, 1, "Concurrent sessions.", exclusive_minimum=0),
    _k("completed_append_cache_size", "duplex_session", INT, 256, "Unread by the plugin framework; kept so older "
       "configs parse.", exclusive_minimum=0),
    _k("server_vad_model_path", "duplex_session", f"{STR}|null", None, "Server-side VAD model."),
    _k("warmup_frames", "duplex_session", INT, 0, "Silent start-up warm-up frames (negative: no warm-up)."),
]  # fmt: skip

_STAGE_TYPED: dict[str, Key] = {
    k.name: k
    for k in [
        _k("stage_id", "stage", INT, NO_DEFAULT, "Which pipeline stage this entry configures.", minimum=0),
        _k("devices", "stage", f"{STR}|{INT}|null", None, "Logical device indices (into CUDA_VISIBLE_DEVICES), e.g. \"0\" or \"0,1\".",
           minimum=0, pattern=r"^\s*\d+\s*(,\s*\d+\s*)*$",
           pattern_words="a comma list of non-negative device indices such as \"0\" or \"0,1\""),
        _k("num_replicas", "stage", INT, 1, "Copies of this stage.", minimum=1),
        _k("env", "stage", f"{MAP}|null", None, "Environment variables of the stage's processes."),
        _k("async_chunk", "stage", f"{BOOL}|null", None, "false opts this stage out of async chunking."),
        _k("output_connectors", "stage", f"{MAP}|null", None, "{to_stage_N: connector name}."),
        _k("input_connectors", "stage", f"{MAP}|null", None, "{from_stage_N: connector name}."),
        _k("default_sampling_params", "stage", f"{MAP}|null", None, "Sampling defaults of this stage (deep-merged)."),
        _k("default_pooling_params", "stage", f"{MAP}|null", None, "Pooling defaults (deep-merged)."),
        _k("engine_extras", "stage", f"{MAP}|null", None, "Extra vLLM engine arguments (deep-merged)."),
        _k("engine_args", "stage", f"{MAP}|null", None, "Nested form of the engine fields (deep-merged)."),
        _k("runtime", "stage", f"{MAP}|null", None, "Nested form: {devices, num_replicas, env}."),
        _k("subtalker_sampling_params", "stage", f"{MAP}|null", None, "Sub-talker sampling defaults (deep-merged)."),
        _k("silence_ban_frames", "stage", INT, 0, "Frames during which silence tokens are banned.", minimum=0),
        _k("tensor_parallel_size", "stage", f"{INT}|null", None, "Tensor-parallel GPUs of this stage.", minimum=1),
        _k("gpu_memory_utilization", "stage", f"{NUM}|null", None, "Share of each of the stage's GPUs it may use.",
           exclusive_minimum=0, maximum=1),
        _k("max_num_seqs", "stage", f"{INT}|null", None, "Concurrent sequences (the stage's capacity).", minimum=1),
        _k("max_num_batched_tokens", "stage", f"{INT}|null", None, "Tokens per scheduler step.", minimum=1),
        _k("max_model_len", "stage", f"{INT}|null", None, "Context length.", minimum=1),
        _k("enforce_eager", "stage", f"{BOOL}|null", None, "Disable vLLM's CUDA graphs for this stage."),
        _k("async_scheduling", "stage", f"{BOOL}|null", None, "vLLM async scheduling."),
        _k("mm_processor_cache_gb", "stage", f"{NUM}|null", None, "Multimodal processor cache size.", minimum=0),
        _k("compilation_config", "stage", f"{MAP}|null", None, "vLLM compilation config."),
        _k("model_runner", "stage", STR, NO_DEFAULT, "Model runner for this stage only (no release reads it per "
           "stage; use the top-level or platform model_runner).", reader=NOBODY, enum=("v1", "v2")),
    ]
}  # fmt: skip

# Stage keys vllm-omni does not model but passes to vLLM as engine arguments: vLLM's own engine
# arguments that deploy files use, and the keys vllm-omni 0.30.0's bundled deploy files use.
_ENGINE_EXTRAS: list[Key] = [
    _k("kv_cache_memory_bytes", "stage", f"{INT}|null", None, "Explicit KV-cache budget in bytes (null: sized "
       "from gpu_memory_utilization).", minimum=0),
    _k("limit_mm_per_prompt", "stage", f"{MAP}|null", None, "Most multimodal items per prompt, per modality."),
    _k("enable_chunked_prefill", "stage", f"{BOOL}|null", None, "Chunked prefill for this stage."),
    _k("enable_prefix_caching", "stage", f"{BOOL}|null", None, "Prefix caching for this stage."),
    _k("trust_remote_code", "stage", f"{BOOL}|null", None, "Allow the checkpoint's custom code."),
    _k("additional_config", "stage", f"{MAP}|null", None, "Platform- and model-specific options (e.g. NPU graphs)."),
    _k("interleave_mm_strings", "stage", f"{BOOL}|null", None, "Interleave multimodal placeholders in prompts."),
    _k("media_io_kwargs", "stage", f"{MAP}|null", None, "Media loading options (video fps, frames, ...)."),
    _k("mm_processor_kwargs", "stage", f"{MAP}|null", None, "Multimodal processor options."),
    _k("hf_overrides", "stage", f"{MAP}|null", None, "Overrides of the model's HF config."),
    _k("kv_cache_dtype", "stage", f"{STR}|null", None, "KV-cache dtype."),
    _k("block_size", "stage", f"{INT}|null", None, "KV-cache block size.", minimum=1),
    # A diffusion stage hands it on as its quantization_config, which takes a per-component mapping
    # too (0.30.0 config/omni_config.py:1451-1458, diffusion/data.py:1078; 0.32.0rc1's
    # taomate_h3_usp2_realtime.yaml ships one).
    _k("quantization", "stage", f"{STR}|{MAP}|null", None, "Quantization method (a diffusion stage also takes "
       "a per-component mapping, its quantization_config)."),
    _k("dtype", "stage", f"{STR}|null", None, "Model dtype."),
    _k("seed", "stage", f"{INT}|null", None, "Random seed."),
    _k("max_cudagraph_capture_size", "stage", f"{INT}|null", None, "Largest batch captured in a CUDA graph (0: none).",
       minimum=0),
    _k("cuda_graph_sizes", "stage", f"{LIST}|null", None, "Batch sizes captured in CUDA graphs."),
    _k("max_logprobs", "stage", f"{INT}|null", None, "Most log-probabilities returned."),
    _k("swap_space", "stage", f"{NUM}|null", None, "CPU swap space (GiB).", minimum=0),
    _k("cpu_offload_gb", "stage", f"{NUM}|null", None, "Weights offloaded to CPU (GiB).", minimum=0),
    _k("disable_log_stats", "stage", f"{BOOL}|null", None, "No periodic stats logging."),
    _k("served_model_name", "stage", "", None, "Name the model is served under."),
    _k("revision", "stage", f"{STR}|null", None, "Model revision."),
    _k("tokenizer_revision", "stage", f"{STR}|null", None, "Tokenizer revision."),
    _k("enable_lora", "stage", f"{BOOL}|null", None, "LoRA adapters."),
    _k("max_loras", "stage", f"{INT}|null", None, "Concurrent LoRA adapters."),
    _k("max_lora_rank", "stage", f"{INT}|null", None, "Largest LoRA rank."),
    _k("speculative_config", "stage", f"{MAP}|null", None, "Speculative decoding."),
    _k("scheduling_policy", "stage", f"{STR}|null", None, "fcfs or priority."),
    _k("long_prefill_token_threshold", "stage", f"{INT}|null", None, "Long prefill threshold."),
    _k("max_num_partial_prefills", "stage", f"{INT}|null", None, "Concurrent partial prefills."),
    _k("override_generation_config", "stage", f"{MAP}|null", None, "Generation config overrides."),
    _k("generation_config", "stage", f"{STR}|null", None, "Where the generation config comes from."),
    _k("enable_expert_parallel", "stage", f"{BOOL}|null", None, "Expert parallelism."),
    *[
        _k(name, "stage", "", None, "Used by vllm-omni 0.30.0's own deploy files.")
        for name in (
            "skip_tokenizer_init", "model", "model_config", "parallel_config", "attention_backend",
            "moe_backend", "logits_processors", "tokenizer", "model_loaded", "engine_backend",
            "attention_config", "distributed_executor_backend", "request_batch_max_wait_ms",
            "is_comprehension", "final_output", "final_output_type", "kv_transfer_config", "omni_kv_config",
            "enable_sleep_mode", "diffusion_kv_mode", "diffusion_kv_max_rows_per_request", "streaming_output",
            "kv_cache_dtype_skip_layers", "worker_cls", "scheduler_cls",
        )
    ],
]  # fmt: skip

STAGE: list[Key] = [
    *_STAGE_TYPED.values(),
    *[
        _k(n, "stage", "", None, "vllm-omni stage engine field.")
        for n in STAGE_ENGINE_FIELDS
        if n not in _STAGE_TYPED
    ],
    *[Key(**{**k.__dict__, "engine_extra": True, "reader": VLLM}) for k in _ENGINE_EXTRAS],
]

CONNECTOR: list[Key] = [
    _k("name", "connector", STR, NO_DEFAULT, "Connector class, e.g. SharedMemoryConnector."),
    _k("extra", "connector", f"{MAP}|null", None, "Options of the connector and of the stages it feeds."),
]

# Carried by published profiles (and once ours); no release's connector code reads them.
CONNECTOR_EXTRA: list[Key] = [
    _k("connector_get_sleep_s", "connector_extra", NUM, NO_DEFAULT, "Poll interval of the receiving side (s).",
       minimum=0, reader=NOBODY),
    _k("connector_get_max_wait_first_chunk", "connector_extra", INT, NO_DEFAULT, "Polls to wait for the first chunk.",
       minimum=0, reader=NOBODY),
    _k("connector_get_max_wait", "connector_extra", INT, NO_DEFAULT, "Polls to wait for later chunks.", minimum=0,
       reader=NOBODY),
]  # fmt: skip

CODE2WAV: list[Key] = [
    _k("codec_chunk_frames", "code2wav", INT, 25, "Codec frames per audio chunk (25 = 1 s).", exclusive_minimum=0),
    _k("codec_left_context_frames", "code2wav", INT, 3, "Frames of left context re-decoded per chunk.", minimum=0),
    _k("enable_hift_graph", "code2wav", BOOL, False, "CUDA graphs for the HiFT vocoder."),
    _k("hift_graph_capture_batch_sizes", "code2wav", LIST, [1], "Batch sizes HiFT graphs are captured for.",
       items=INT, item_minimum=1),
    _k("enable_cfm_graph", "code2wav", BOOL, False, "CUDA graphs for the CFM (flow-matching) estimator."),
    _k("cfm_max_graphs", "code2wav", INT, 32, "Most CFM graphs kept.", minimum=0),
    _k("cfm_graph_bucket_frames", "code2wav", INT, 0, "CFM shapes rounded up to multiples of this (0: exact).",
       minimum=0),
    _k("token2wav_float16", "code2wav", BOOL, False, "Run token2wav in float16."),
    _k("token2wav_n_timesteps", "code2wav", INT, 10, "Flow-matching Euler steps.", minimum=1),
    _k(KEY_TRT, "code2wav", BOOL, SPK_DEFAULTS[KEY_TRT], "TensorRT for the DiT estimator and CAM++ (CUDA only; also env "
       f"{ENV_TRT}=1)."),
    _k("token2wav_trt_dtype", "code2wav", STR, "fp16", "TensorRT precision: fp32/float32, anything else fp16."),
    _k("token2wav_trt_max_batch", "code2wav", INT, 16, "Largest TensorRT batch.", minimum=1),
    _k("code2wav_bfloat16_attention_cache", "code2wav", BOOL, False, "bfloat16 attention cache in the CFM."),
    _k("token2wav_runtime_prompt_cache_size", "code2wav", INT, 4, "Reference voices kept prepared.", minimum=0),
    _k("token2wav_setup_cache_size", "code2wav", INT, 1, "Prepared stream set-ups kept.", minimum=0),
    _k("ref_audio_max_seconds", "code2wav", NUM, 6.0, "Reference audio is cut to this length.", exclusive_minimum=0),
    _k("code2wav_min_batch_size", "code2wav", INT, 1, "Smallest decode batch.", minimum=1),
    _k("code2wav_initial_batch_size", "code2wav", INT, 0, "First decode batch (0 or >= code2wav_min_batch_size).",
       minimum=0),
    _k("prompt_cache_id", "code2wav", STR, "HT_ref_audio", "Cache id of the default voice."),
    _k("prompt_wav", "code2wav", STR, None, "Default reference voice (default <model>/assets/HT_ref_audio.wav)."),
    # Read by omni-deploy's vLLM plugin; no vllm-omni release reads them.
    # Names and defaults from speaker_rules, the table the plugin applies.
    _k(KEY_ALLOW_TF32, "code2wav", BOOL, SPK_DEFAULTS[KEY_ALLOW_TF32], "TF32 matmuls for the CUDA CAM++ "
       "speaker embedding and the batched reference preparation; its S3 tokens equal vllm-omni's per-voice "
       "tokens computed under the same setting (true: with TF32 matmuls, a few in a thousand differ from "
       "strict FP32's; false: strict FP32). cuDNN's convolution TF32 stays the process's.", reader=PLUGIN),
    _k(KEY_DEVICE_SPK, "code2wav", BOOL, SPK_DEFAULTS[KEY_DEVICE_SPK], "CAM++ speaker embedding in torch on the "
       "stage's CUDA device; false: ONNX Runtime on the CPU.", reader=PLUGIN),
    _k(KEY_DEVICE_PREPARE, "code2wav", BOOL, DEFAULT_DEVICE_PREPARE, "New reference voices of a forward prepared in "
       "one batched pass on the stage's GPU (needs the CUDA CAM++ path); false: vllm-omni's per-voice "
       "preparation.", reader=PLUGIN),
    # The seed's Code2Wav keys: no release reads them. A newer vllm-omni that does is seen when it is
    # installed (its source is read at run time).
    *[
        _k(name, "code2wav", types, NO_DEFAULT, meaning, reader=NOBODY, **bounds)
        for name, types, meaning, bounds in [
            ("micro_batch_size", INT, "Most requests per CFM estimator call.", {"minimum": 1}),
            ("cfm_graph_precapture", BOOL, "Capture CFM graphs at start-up.", {}),
            ("initial_codec_chunk_frames", INT, "Frames of the first chunk.", {"exclusive_minimum": 0}),
            ("hift_max_lazy_graphs", INT, "Most HiFT graphs captured lazily.", {"minimum": 0}),
            ("max_serial_batch", INT, "Largest batch decoded serially.", {"minimum": 1}),
            ("max_graph_batch", INT, "Largest batch replayed through graphs.", {"minimum": 1}),
            ("enable_whole_euler", BOOL, "All Euler steps in one graph.", {}),
            ("cfm_graph_offset_bucket_frames", INT, "CFM offset bucket.", {"minimum": 0}),
        ]
    ],
]  # fmt: skip

# NPU graph switches: stage 2's `additional_config`, not connector keys.
NPU_GRAPH: list[Key] = [
    _k("code2wav_enable_npu_graph", "stage2_additional_config", BOOL, False, "NPU graphs for the CFM estimator "
       "(NPU only)."),
    _k("code2wav_max_npu_graphs", "stage2_additional_config", INT, 32, "Most NPU graphs kept.", minimum=1),
]  # fmt: skip

PLATFORM: list[Key] = [
    _k("model_runner", "platform", STR, NO_DEFAULT, "Model runner on this platform (v2 is refused on npu/xpu).",
       enum=("v1", "v2")),
    _k("stages", "platform", f"{LIST}|null", None, "Stage overrides for this platform, by stage_id."),
]  # fmt: skip

ALL: list[Key] = [*TOP, *DUPLEX, *STAGE, *CONNECTOR, *CONNECTOR_EXTRA, *CODE2WAV, *NPU_GRAPH, *PLATFORM]

# Keys no release reads although published configs carry them.
UNREAD: dict[tuple[str, str], str] = {
    ("platform", "cuda_mps"): "no vllm-omni release reads platforms.<p>.cuda_mps",
}

# Code2Wav switches that act only on CUDA.
CUDA_ONLY_CODE2WAV = (KEY_TRT, KEY_DEVICE_SPK, KEY_DEVICE_PREPARE)
NPU_GRAPH_KEYS = tuple(k.name for k in NPU_GRAPH)


def by_place(place: str) -> dict[str, Key]:
    return {k.name: k for k in ALL if k.place == place}
