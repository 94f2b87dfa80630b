"""Loading a deploy file as vllm-omni loads it: YAML, the base_config chain, stage merging and the
platform sections. What cannot be loaded stops here, as one finding (the codes below).

The loader itself lives in config/ (below validate); this step owns and documents its codes.
"""

from __future__ import annotations

from omni_deploy.common import codes
from omni_deploy.deployment.model import Deployment
from omni_deploy.validate.context import Options
from omni_deploy.validate.rules import emits

LOADING = (
    codes.E101, codes.E102, codes.E103, codes.E104, codes.E105, codes.E106, codes.E107, codes.E108,
    codes.E109, codes.E110, codes.E111, codes.E112, codes.E113, codes.E114, codes.E120, codes.E121,
    codes.E122, codes.E123, codes.E124, codes.E130, codes.E370,
)  # fmt: skip


@emits(*LOADING)
def load_deployment(
    name: str, options: Options, text: str | bytes | None = None, *, named: bool = True
) -> Deployment:
    """Load the file named `name` (or `text` so named) and its base_config chain; platform
    sections are applied per platform checked (validate's runner), with the same codes.

    E101:
        What it does: parses the file as YAML, keeping the position of every value; a syntax error
            stops the file at the line and column where the parser gave up.
        Why: vllm-omni refuses the file at server start-up with a Python traceback; here it is one
            line with its position, before a GPU is touched.
        Fails:
            stages:
              - {stage_id: 0, max_num_seqs: 4
            async_chunk: true
        Passes:
            stages:
              - {stage_id: 0, max_num_seqs: 4}
            async_chunk: true
    E102:
        What it does: refuses a mapping that names the same key twice.
        Why: YAML loaders keep only the last value, so the first one is silently lost, and the file
            no longer says what it does.
        Fails:
            base_config: minicpmo_4_5_turn.yaml
            stages:
              - stage_id: 2
                max_num_seqs: 4
                max_num_seqs: 16
        Passes:
            base_config: minicpmo_4_5_turn.yaml
            stages:
              - stage_id: 2
                max_num_seqs: 16
    E103:
        What it does: refuses YAML tags (`!name`, `!!python/...`): deploy files are plain YAML.
        Why: vllm-omni loads with a safe loader that refuses them at start-up; a Python object tag is
            also how unsafe loaders are made to run code.
        Fails:
            base_config: minicpmo_4_5_turn.yaml
            async_chunk: !maybe true
        Passes:
            base_config: minicpmo_4_5_turn.yaml
            async_chunk: true
    E104:
        What it does: requires the top level of the file to be a mapping.
        Why: vllm-omni reads keys (stages, connectors, platforms) from the top level; a list or a
            scalar there is a file it cannot use.
        Fails:
            - stage_id: 0
              max_num_seqs: 4
        Passes:
            stages:
              - stage_id: 0
                max_num_seqs: 4
    E105:
        What it does: refuses mapping keys that are not plain scalars (a list or a mapping as a key).
        Why: such a key names no setting vllm-omni reads, and it cannot be written back as JSON.
        Fails:
            base_config: minicpmo_4_5_turn.yaml
            stages:
              - stage_id: 2
                ? [max_num_seqs, max_model_len]
                : 8
        Passes:
            base_config: minicpmo_4_5_turn.yaml
            stages:
              - stage_id: 2
                max_num_seqs: 8
    E106:
        What it does: resolves every `${...}` interpolation (a key of the file, or
            `${oc.env:NAME,default}`) and reports the ones that cannot be resolved.
        Why: vllm-omni resolves them at start-up and stops there; a missing variable without a
            default is the usual cause.
        Fails:
            base_config: minicpmo_4_5_turn.yaml
            stages:
              - stage_id: 2
                max_num_seqs: ${capacity.code2wav}
        Passes:
            base_config: minicpmo_4_5_turn.yaml
            stages:
              - stage_id: 1
                max_num_seqs: 8
              - stage_id: 2  # as many as the Talker (this file's first stage entry)
                max_num_seqs: ${stages.0.max_num_seqs}
    E107:
        What it does: reports a file that cannot be read as a deploy file: missing, a directory, a
            device, a system pseudo-file, or a FIFO it was not named as (a pipe named as the file
            itself, `<(...)` or /dev/stdin, is read; one found in a folder, a glob or a
            base_config is not).
        Why: reading a FIFO or a device would hang or never end; a missing file is most often a typo
            in its path.
        Fails:
            $ omni-deploy validate no_such_profile.yaml  # exit 1: no such file
        Passes:
            $ omni-deploy validate minicpmo_4_5_turn.yaml
    E108:
        What it does: requires strict UTF-8 text without control characters or lone surrogates.
        Why: such bytes come from copy and paste or a binary file; vllm-omni either refuses them or
            reads a value that is not what the file shows.
        Fails:
            # shown, not run by the tests: a control character (U+0001) after the x, invisible here
            async_chunk: x
        Passes:
            async_chunk: true
    E109:
        What it does: keeps loading within budgets: nesting depth, values after alias expansion,
            alias expansions and file size (2 MiB, stdin too); a folder or glob given to validate
            is walked at most 64 levels deep and to 10,000 files.
        Why: a few lines of aliases can expand to billions of values (a "billion laughs" file);
            loading such a file would exhaust memory instead of failing.
        Fails:
            deep: [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]
        Passes:
            deep: [[[[1]]]]
    E110:
        What it does: follows `base_config` and reports a base file that does not exist (a relative
            path is taken from the folder of the file that names it, as vllm-omni does).
        Why: vllm-omni fails on it at start-up; the usual cause is a typo or a file moved without its
            base.
        Fails:
            base_config: minicpmo_4_5_trun.yaml
        Passes:
            base_config: minicpmo_4_5_turn.yaml
    E111:
        What it does: reports a base_config chain that comes back to a file already in it.
        Why: vllm-omni would follow the cycle until it runs out of stack.
        Fails:
            # the example names itself
            base_config: example.yaml
        Passes:
            base_config: minicpmo_4_5_turn.yaml
    E112:
        What it does: requires `base_config` to be one file path, a string without NUL characters.
        Why: vllm-omni takes it as one path; a list of bases is not merged, and the file fails at
            start-up.
        Fails:
            base_config: [minicpmo_4_5_turn.yaml]
        Passes:
            base_config: minicpmo_4_5_turn.yaml
    E113:
        What it does: caps a base_config chain at 32 files.
        Why: a chain that long is a generated or hostile file; following it without a cap costs
            unbounded time and memory.
        Fails:
            # shown, not run by the tests: the 33 files of a chain do not fit an example
            base_config: chain/c01.yaml  # c01 names c02, ..., c32 names c33
        Passes:
            base_config: minicpmo_4_5_turn.yaml  # a chain of two files
    E114:
        What it does: refuses integers beyond 64 bits and floats beyond a double's range.
        Why: vLLM reads these values into 64-bit fields; a larger number overflows there, or turns
            into infinity, far from the line that wrote it.
        Fails:
            base_config: minicpmo_4_5_turn.yaml
            stages:
              - stage_id: 1
                kv_cache_memory_bytes: 100000000000000000000000000000
        Passes:
            base_config: minicpmo_4_5_turn.yaml
            stages:
              - stage_id: 1
                kv_cache_memory_bytes: 2147483648
    E120:
        What it does: requires the sections vllm-omni merges key by key (engine_args, runtime, a
            platform section and its stage entries) to be mappings.
        Why: vllm-omni's merge indexes them as mappings and stops with a traceback otherwise.
        Fails:
            base_config: minicpmo_4_5_turn.yaml
            stages:
              - stage_id: 0
                engine_args: 5
        Passes:
            base_config: minicpmo_4_5_turn.yaml
            stages:
              - stage_id: 0
                engine_args: {enforce_eager: true}
    E121:
        What it does: requires every entry of a stage list to be a mapping.
        Why: vllm-omni merges stages by their stage_id; an entry that is not a mapping has none and
            stops the merge.
        Fails:
            base_config: minicpmo_4_5_turn.yaml
            stages:
              - 3
        Passes:
            base_config: minicpmo_4_5_turn.yaml
            stages:
              - stage_id: 2
                max_num_seqs: 3
    E122:
        What it does: requires every stage entry to name its stage_id.
        Why: an overlay's stage is merged into the base's stage of the same id; without one, vllm-omni
            cannot tell which stage the settings are for.
        Fails:
            base_config: minicpmo_4_5_turn.yaml
            stages:
              - max_num_seqs: 8
        Passes:
            base_config: minicpmo_4_5_turn.yaml
            stages:
              - stage_id: 2
                max_num_seqs: 8
    E123:
        What it does: requires stage_id and num_replicas to be integers.
        Why: vllm-omni compares stage ids and counts replicas as integers; a string there matches no
            stage or stops the launch.
        Fails:
            base_config: minicpmo_4_5_turn.yaml
            stages:
              - stage_id: 0
                runtime:
                  devices: "0"
                  num_replicas: two
        Passes:
            base_config: minicpmo_4_5_turn.yaml
            stages:
              - stage_id: 0
                runtime:
                  devices: "0"
                  num_replicas: 1
    E124:
        What it does: requires `stages` to be a list.
        Why: vllm-omni iterates the stages to merge and start them; anything else stops it.
        Fails:
            base_config: minicpmo_4_5_turn.yaml
            stages: 3
        Passes:
            base_config: minicpmo_4_5_turn.yaml
            stages:
              - stage_id: 2
                max_num_seqs: 3
    E130:
        What it does: requires model_runner (top level or a platform section's) to be v1 or v2.
        Why: vllm-omni picks its model runner from this value and refuses any other at start-up.
        Fails:
            base_config: minicpmo_4_5_turn.yaml
            model_runner: v3
        Passes:
            base_config: minicpmo_4_5_turn.yaml
            model_runner: v1
    E370:
        What it does: refuses model_runner v2 on a platform whose vllm-omni cannot run it (npu, xpu),
            when that platform's section applies.
        Why: vllm-omni stops at start-up on that platform; on the others the same file runs.
        Fails:
            base_config: minicpmo_4_5_turn.yaml
            platforms:
              npu:
                model_runner: v2
        Passes:
            base_config: minicpmo_4_5_turn.yaml
            platforms:
              npu:
                model_runner: v1
    """
    return Deployment.load(name, pipeline=options.pipeline, text=text, named=named)
