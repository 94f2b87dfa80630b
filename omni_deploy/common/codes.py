"""The finding-code table: every code omni-deploy reports, declared once.

A code is an id (its letter says error, warning or info; the number groups it: 1xx loading and
merging, 2xx schema, 3xx checks; every number is used once, whatever the letter), its severity, a
one-line summary, and an example file under tests/data/ that produces it (tests/common/test_codes.py runs
each example; a code without one, or an example that produces an undeclared code, fails the suite).

Adding a code: one line here; then the check that reports it declares it (`@emits(codes.W399)`,
validate/rules.py) and documents it in its docstring (what it does, why, an example that fails and
one that passes); report it with `at(origin, file, codes.W399, path, message)`, or with
`ConfigError(message, location, code=codes.E199)` in the loader (validate/check_load.py documents
the loader's codes). Then regenerate the page: `omni-deploy schema --findings > docs/findings.md`.

Imports nothing of the project, so config/ (below validate/) can use it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Severity = Literal["error", "warning", "info"]
ERROR: Severity = "error"
WARNING: Severity = "warning"
INFO: Severity = "info"


@dataclass(frozen=True)
class Code:
    id: str
    severity: Severity
    summary: str
    example: str  # path under tests/data/ of a file that produces this code

    def __str__(self) -> str:
        return self.id


CODES: dict[str, Code] = {}


def _declare(code_id: str, severity: Severity, summary: str, example: str) -> Code:
    if code_id in CODES:
        raise ValueError(f"finding code {code_id} declared twice")
    CODES[code_id] = code = Code(code_id, severity, summary, example)
    return code


def lookup(code_id: str) -> Code:
    """The declared code with this id (KeyError for an undeclared one: add it to the table)."""
    return CODES[code_id]


_L, _V = "loader/negative/", "validate/negative/"

# fmt: off
# Loading and merging: the file cannot be read as vllm-omni would read it.
E101 = _declare("E101", ERROR, "YAML syntax error", _L + "syntax_unclosed_flow.yaml")
E102 = _declare("E102", ERROR, "duplicate mapping key (YAML loaders keep only the last)", _V + "loader_duplicate_key.yaml")
E103 = _declare("E103", ERROR, "YAML tag (custom or Python object): deploy files allow plain YAML only", _L + "custom_tag.yaml")
E104 = _declare("E104", ERROR, "the top level of the file is not a mapping", _L + "top_level_list.yaml")
E105 = _declare("E105", ERROR, "a mapping key that is not a plain scalar", _L + "complex_key.yaml")
E106 = _declare("E106", ERROR, "an ${...} interpolation that cannot be resolved", _L + "interpolation_resolver.yaml")
E107 = _declare("E107", ERROR, "the file named cannot be read: missing, a directory, a FIFO, a device, a system pseudo-file", _L + "no_such_file.yaml")
E108 = _declare("E108", ERROR, "text that is not UTF-8, a control character, or a lone surrogate", _L + "control_character.yaml")
E109 = _declare("E109", ERROR, "too complex to load: nesting, values after alias expansion, alias expansions or file size over the loader's budget", _L + "nesting_too_deep.yaml")
E110 = _declare("E110", ERROR, "base_config names a file that does not exist", _L + "base_missing.yaml")
E111 = _declare("E111", ERROR, "base_config chain with a cycle", _L + "cycle_a.yaml")
E112 = _declare("E112", ERROR, "base_config is not a file path string", _L + "base_not_string.yaml")
E113 = _declare("E113", ERROR, "base_config chain longer than the limit (32 files)", _L + "chain_too_long.yaml")
E114 = _declare("E114", ERROR, "a number beyond 64 bits (an integer) or beyond a float's range", _L + "integer_beyond_64_bits.yaml")
E120 = _declare("E120", ERROR, "a section that must be a mapping is not one", _V + "engine_args_not_mapping.yaml")
E121 = _declare("E121", ERROR, "a stage entry is not a mapping", _V + "stage_not_mapping.yaml")
E122 = _declare("E122", ERROR, "a stage entry has no stage_id", _L + "stage_without_id.yaml")
E123 = _declare("E123", ERROR, "stage_id or num_replicas is not an integer", _V + "num_replicas_not_int.yaml")
E124 = _declare("E124", ERROR, "stages is not a list", _L + "stages_not_list.yaml")
E130 = _declare("E130", ERROR, "model_runner is neither v1 nor v2", _V + "model_runner_v3.yaml")
# Schema: a value of the wrong type or out of bounds.
E201 = _declare("E201", ERROR, "a value of the wrong type or out of bounds (JSON Schema)", _V + "negative_kv_budget.yaml")
I202 = _declare("I202", INFO, "a value of another type that its reader converts to what it says (pydantic lax mode, int(), the plugin's switches)", _V + "coerced_values.yaml")
W203 = _declare("W203", WARNING, "a quoted false in a switch read with bool(): any non-empty string is true, so it turns the switch on", _V + "coerced_values.yaml")
# Keys: unknown, misplaced, or not read by the target version.
W301 = _declare("W301", WARNING, "unknown top-level key: vllm-omni ignores it", _V + "unknown_top_key.yaml")
W302 = _declare("W302", WARNING, "stage key that is neither a stage field nor a vLLM engine argument", _V + "unknown_stage_key.yaml")
W303 = _declare("W303", WARNING, "key in the Code2Wav extra that MiniCPM-o's Code2Wav never reads", _V + "unknown_code2wav_key.yaml")
E304 = _declare("E304", ERROR, "unknown duplex_session key: vllm-omni refuses to start", _V + "unknown_duplex_key.yaml")
W305 = _declare("W305", WARNING, "unknown platform, or unknown key in a platform section", _V + "unknown_platform.yaml")
W306 = _declare("W306", WARNING, "unknown connector key", _V + "unknown_connector_key.yaml")
E307 = _declare("E307", ERROR, "unknown key one slip from a key the target reads there (a typo: did you mean)", _V + "typos.yaml")
W310 = _declare("W310", WARNING, "key the target vllm-omni's code does not read (other versions do, or none)", _V + "newer_version_key.yaml")
E311 = _declare("E311", ERROR, "key the target vllm-omni rejects (removed stage argument)", _V + "removed_stage_args.yaml")
I312 = _declare("I312", INFO, "stage_args file the target still loads with its legacy loader", _V + "legacy_stage_args.yaml")
I313 = _declare("I313", INFO, "key read by omni-deploy's vLLM plugin, not by the target vllm-omni", _V + "plugin_key.yaml")
E315 = _declare("E315", ERROR, "stage key the target's typed config has no owner for: vllm-omni refuses to start", _V + "unowned_stage_key.yaml")
E316 = _declare("E316", ERROR, "pipeline the target vllm-omni does not register: a KeyError at start-up", _V + "pipeline_not_in_release.yaml")
E317 = _declare("E317", ERROR, "async_chunk on for a pipeline that has no async-chunk producer in the target", _V + "async_chunk_unsupported.yaml")
W318 = _declare("W318", WARNING, "platform stage entry's runtime: without engine_args: not applied (one more engine key)", _V + "platform_runtime_flat.yaml")
E319 = _declare("E319", ERROR, "stage value the target's typed config refuses at start-up (max_num_batched_tokens < max_num_seqs, num_weight_load_threads < 1)", _V + "typed_config_values.yaml")
E309 = _declare("E309", ERROR, "unknown speech_cache key: the target's SpeechCacheConfig forbids extra keys, refused at start-up", _V + "unknown_speech_cache_key.yaml")
I308 = _declare("I308", INFO, "the target's typed-config ownership rule (E315) is borrowed from a release with the same code, or unknown and not checked", _V + "owners_unknown.yaml")
I314 = _declare("I314", INFO, "no code of the target version to read: another version's reads stand in", _V + "target_without_code.yaml")
# Topology: stage ids, connector wiring, merges.
E320 = _declare("E320", ERROR, "stage_id appears twice in one list", _V + "duplicate_stage_id.yaml")
E321 = _declare("E321", ERROR, "stage_id missing or not a non-negative integer", _V + "bad_stage_ids.yaml")
W322 = _declare("W322", WARNING, "stage id the target's pipeline does not have: vllm-omni ignores that stage", _V + "bad_stage_ids.yaml")
W324 = _declare("W324", WARNING, "stage_id twice in one list: vllm-omni starts, and says here which entry wins", _V + "stage_id_twice.yaml")
W325 = _declare("W325", WARNING, "quoted stage_id (\"1\"): vllm-omni starts, and applies the entry to no stage", _V + "stage_id_twice.yaml")
W323 = _declare("W323", WARNING, "platform entry for a stage id no stage has (vllm-omni skips it)", _V + "platform_entry_for_missing_stage.yaml")
E330 = _declare("E330", ERROR, "connector name not defined under connectors", _V + "connector_wiring.yaml")
E331 = _declare("E331", ERROR, "connector wired from or to a stage that does not exist", _V + "connector_wiring.yaml")
W332 = _declare("W332", WARNING, "Code2Wav option in a connector stage 2 does not receive", _V + "code2wav_key_in_wrong_connector.yaml")
E334 = _declare("E334", ERROR, "wired connector without name: the connector set-up fails and the server starts with none", _V + "connector_without_name.yaml")
E335 = _declare("E335", ERROR, "connector set-up failure (an edge's two connector classes differ, a wired extra: null): the server starts with no connector config", _V + "connector_setup.yaml")
W333 = _declare("W333", WARNING, "connector wiring key not of the form from_stage_N / to_stage_N", _V + "connector_wiring.yaml")
I326 = _declare("I326", INFO, "a file with no stages: vllm-omni starts the pipeline's defaults with no devices; k8s cannot place it", _V + "no_stages.yaml")
W340 = _declare("W340", WARNING, "an overlay mapping replaces the base's whole, dropping keys", _V + "shallow_replace.yaml")
W341 = _declare("W341", WARNING, "a flat stage key that the same stage's engine_args.KEY overrides: never read", _V + "flat_key_shadowed.yaml")
# Capacity: GPU memory, KV budgets, MiniCPM-o batch coherence.
E350 = _declare("E350", ERROR, "stages sharing a device ask for more than all of its memory", _V + "memory_over.yaml")
W351 = _declare("W351", WARNING, "stages sharing a device leave less than 5 % of its memory", _V + "memory_tight.yaml")
I353 = _declare("I353", INFO, "KV budget not checked against a card: no --gpu-memory-gib given", _V + "unstated.yaml")
E352 = _declare("E352", ERROR, "KV budgets do not fit in the card (--gpu-memory-gib)", _V + "kv_budget_too_big.yaml")
W360 = _declare("W360", WARNING, "HiFT capture batch sizes not positive, duplicated, or all above capacity", _V + "hift_sizes.yaml")
W361 = _declare("W361", WARNING, "CFM micro_batch_size above Code2Wav's max_num_seqs", _V + "micro_batch_above_capacity.yaml")
W362 = _declare("W362", WARNING, "Talker KV budget holds fewer tokens than max_num_seqs x max_model_len", _V + "talker_kv_too_small.yaml")
I364 = _declare("I364", INFO, "Talker KV capacity not checked without --model-config", _V + "talker_kv_unchecked.yaml")
E365 = _declare("E365", ERROR, "vLLM's scheduler config refuses the stage: max_num_batched_tokens below max_model_len with chunked prefill off", _V + "scheduler_refuses.yaml")
W363 = _declare("W363", WARNING, "max_num_batched_tokens below max_model_len with chunked prefill off", _V + "batched_below_model_len.yaml")
I366 = _declare("I366", INFO, "Code2Wav's setup or prompt cache holds fewer voices than a forward batches (max_num_seqs)", _V + "code2wav_caches.yaml")
I367 = _declare("I367", INFO, "GPU memory Code2Wav's setup cache holds (about 0.36 GiB a voice, measured), outside vLLM's accounting", _V + "code2wav_caches.yaml")
# Platforms.
E370 = _declare("E370", ERROR, "model_runner v2 on a platform that does not support it (npu, xpu)", _V + "runner_v2_on_npu.yaml")
I371 = _declare("I371", INFO, "CUDA-only Code2Wav switch that has no effect on another platform", _V + "cuda_only_switch_elsewhere.yaml")
E373 = _declare("E373", ERROR, "Code2Wav option a platform's own Code2Wav refuses (code2wav_bfloat16_attention_cache on NPU)", _V + "npu_bf16_attention_cache.yaml")
W374 = _declare("W374", WARNING, "token2wav_device_prepare: true where the CUDA CAM++ path is off: the switch has no effect", _V + "code2wav_caches.yaml")
W372 = _declare("W372", WARNING, "NPU graph switch in a connector extra instead of stage 2's additional_config", _V + "npu_graph_in_connector.yaml")
E380 = _declare("E380", ERROR, "code2wav_initial_batch_size below code2wav_min_batch_size", _V + "code2wav_types.yaml")
# Several nodes (validate --gpus-per-node, and k8s): what cannot work once stages are spread.
E390 = _declare("E390", ERROR, "a shared-memory connector joins stages placed on different nodes", _V + "cross_node_shm.yaml")
E391 = _declare("E391", ERROR, "a stage needs more GPUs than one node has (--gpus-per-node)", _V + "stage_wider_than_node.yaml")
E392 = _declare("E392", ERROR, "a stage's devices do not match its parallel sizes (tp x dp x pp, replicas): refused before any engine starts", _V + "device_layout.yaml")
# The server check: vllm-omni's own start-up config code, run in a child process.
E395 = _declare("E395", ERROR, "vllm-omni's own start-up config code refuses the file (server check)", _V + "server_check_refuses.yaml")
E396 = _declare("E396", ERROR, "vllm-omni's connector set-up fails; it logs a warning and starts with no connector configuration (server check)", _V + "server_check_connector_setup.yaml")
E397 = _declare("E397", ERROR, "--server-check on/require: the check could not run (require: or could not decide the file)", _V + "server_check_cannot_run.yaml")
W398 = _declare("W398", WARNING, "--server-check on: the check could not decide this file (its verdict is unknown, not refused)", _V + "server_check_cannot_decide.yaml")
# fmt: on
