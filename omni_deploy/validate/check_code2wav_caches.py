"""Capacity advice for MiniCPM-o's Code2Wav stage: what a returning voice costs with the caches the
file sets, and omni-deploy's plugin switches that cannot act.

Code2Wav keeps two per-voice caches (read from the connector extra it receives; names, defaults and
lines from the target's code through knowledge/): the runtime prompt cache
(`token2wav_runtime_prompt_cache_size`, default 4: a voice's prepared prompt) and the setup cache
(`token2wav_setup_cache_size`, default 1: a voice's flow set-up, on the GPU). A forward batches up to
the stage's max_num_seqs requests; with fewer cache slots than voices in a batch, every cached
voice's setup runs again. Measured on an H200 with the real stages (benchmarks/code2wav_stage_gpu.py,
docs/benchmarks.md, /work/shared/reference/vllm-omni.md last section): a forward of 8 cached voices
took 1270-1287 ms on 0.30.0 and 822-948 ms on 0.32.0rc1 with the setup cache at 1, 649 and 478 ms at
16; each cached setup held about 0.36 GiB of GPU memory (0.32.0rc1), outside vLLM's accounting.
"""

from __future__ import annotations

from pathlib import Path

from omni_deploy.common import codes
from omni_deploy.config.nodes import Map, Origin, to_plain
from omni_deploy.deployment.code2wav_caches import (
    GIB_PER_CACHED_SETUP,
    MEASURED,
    PROMPT_KEY,
    SETUP_KEY,
    Cache,
    Caches,
    code2wav_caches,
)
from omni_deploy.validate.context import Context
from omni_deploy.validate.findings import Finding, at
from omni_deploy.validate.rules import emits


@emits(codes.I366, codes.I367, codes.W374)
def check_code2wav_caches(ctx: Context) -> list[Finding]:
    """Code2Wav's voice caches against the voices one forward batches; plugin switches that cannot act.

    I366:
        What it does: compares Code2Wav's setup cache (token2wav_setup_cache_size, default 1) and
            runtime prompt cache (token2wav_runtime_prompt_cache_size, default 4), as the target reads
            them, with the Code2Wav stage's max_num_seqs; offers the setup cache at max_num_seqs as the
            fix where the file sets it.
        Why: a forward of more cached voices than setup slots runs every voice's setup again: measured
            on an H200 with 8 cached voices, 1270-1287 ms on 0.30.0 and 822-948 ms on 0.32.0rc1 with
            the setup cache at 1, against 649 and 478 ms at 16 (docs/benchmarks.md). A voice that
            left the prompt cache prepares its prompt again (87 ms a voice on 0.32.0rc1).
        Fails:
            base_config: minicpmo_4_5_turn.yaml
            connectors:
              connector_of_shared_memory:
                extra:
                  token2wav_setup_cache_size: 1
        Passes:
            base_config: minicpmo_4_5_turn.yaml
            connectors:
              connector_of_shared_memory:
                extra:
                  token2wav_setup_cache_size: 64
                  token2wav_runtime_prompt_cache_size: 64
    I367:
        What it does: says how much GPU memory the setup cache holds when it is set above 1: about
            0.36 GiB per cached voice (measured on an H200 with 0.32.0rc1: 16 slots left 9.995 GiB
            allocated against 4.22 GiB with 1), outside vLLM's memory accounting
            (gpu_memory_utilization does not include it).
        Why: the stage's device must have that memory free beside what the stages sharing it ask for.
        Fails:
            base_config: minicpmo_4_5_turn.yaml
            connectors:
              connector_of_shared_memory:
                extra:
                  token2wav_setup_cache_size: 16
        Passes:
            base_config: minicpmo_4_5_turn.yaml
    W374:
        What it does: reports token2wav_device_prepare: true where the speaker embedding does not run
            on omni-deploy's CUDA CAM++ path (token2wav_device_spk: false, or token2wav_trt), on CUDA:
            the switch has no effect, each voice is prepared by vllm-omni itself.
        Why: the batched reference preparation the file asks for never runs; the switches are read
            exactly as the plugin reads them (integrations/speaker_rules.py).
        Fails:
            base_config: minicpmo_4_5_turn.yaml
            connectors:
              connector_of_shared_memory:
                extra:
                  token2wav_device_spk: false
                  token2wav_device_prepare: true
        Passes:
            base_config: minicpmo_4_5_turn.yaml
            connectors:
              connector_of_shared_memory:
                extra:
                  token2wav_device_spk: true
                  token2wav_device_prepare: true
    """
    out = _prepare_without_effect(ctx)
    caches = code2wav_caches(ctx.deployment, ctx.target_reads)
    if caches is None:
        return out
    where = ctx.deployment.code2wav_extra_path
    setup, prompt, batch = caches.setup, caches.prompt, caches.batch
    top = ctx.deployment.top.resolve()
    if setup is not None and batch is not None and setup.size < batch and _spot(setup, caches, top):
        fix = None
        if setup.node is not None:
            old = str(to_plain(setup.node))
            fix = (
                ((old, str(batch)), (f'"{old}"', str(batch)), (f"'{old}'", str(batch))),
                f"set {SETUP_KEY} to {batch} (max_num_seqs)",
            )
        said = "" if setup.node is not None else " (the default)"
        out.append(
            at(
                _spot(setup, caches, top),
                ctx.file,
                codes.I366,
                f"{where}.{SETUP_KEY}",
                f"Code2Wav's setup cache holds {setup.size} voice(s){said} but a forward batches up to "
                f"{batch} (max_num_seqs): with more cached voices than slots every voice's setup runs again "
                f"(8 cached voices, H200: 1270-1287 ms on 0.30.0 with 1 slot against 649 ms with 16; read at "
                f"{setup.read_at}); each slot holds about {GIB_PER_CACHED_SETUP} GiB of GPU memory",
                f"set {SETUP_KEY}: {batch}",
                fix,
            )
        )
    if prompt is not None and batch is not None and prompt.size < batch and _spot(prompt, caches, top):
        out.append(
            at(
                _spot(prompt, caches, top),
                ctx.file,
                codes.I366,
                f"{where}.{PROMPT_KEY}",
                f"Code2Wav's runtime prompt cache holds {prompt.size} voice(s) but a forward batches up to "
                f"{batch} (max_num_seqs): a voice that left it prepares its prompt again (read at "
                f"{prompt.read_at})",
                f"set {PROMPT_KEY} to at least {batch}",
            )
        )
    gib = caches.setup_gib
    if setup is not None and setup.node is not None and setup.size > 1 and gib is not None:
        out.append(
            at(
                setup.node.origin,
                ctx.file,
                codes.I367,
                f"{where}.{SETUP_KEY}",
                f"{setup.size} cached setups hold about {gib:.1f} GiB of GPU memory on the Code2Wav stage's "
                f"device ({GIB_PER_CACHED_SETUP} GiB each, measured: {MEASURED}), outside vLLM's memory "
                "accounting: leave it free beside gpu_memory_utilization",
            )
        )
    return out


def _spot(cache: Cache, caches: Caches, top: Path) -> Origin | None:
    """Where advice about `cache` points: at its value where a file sets it, else at the max_num_seqs
    it falls short of where the file validated sets that (a base's batch with the release's default
    cache is the base's choice, said where the base is validated); None: no advice."""
    if cache.node is not None:
        return cache.node.origin
    batch = caches.batch_node
    if batch is None or batch.origin.layer == "default" or Path(batch.origin.file).resolve() != top:
        return None
    return batch.origin


def _prepare_without_effect(ctx: Context) -> list[Finding]:
    from omni_deploy.config.nodes import to_plain
    from omni_deploy.integrations import speaker_rules as rules

    if "cuda" not in ctx.applied or not ctx.deployment.pipeline.is_minicpmo:
        return []
    extra = ctx.deployment.code2wav_extra()
    node = extra.get(rules.KEY_DEVICE_PREPARE) if isinstance(extra, Map) else None
    plain = to_plain(extra) if isinstance(extra, Map) else {}
    if node is None or not isinstance(plain, dict) or rules.as_bool(to_plain(node)) is not True:
        return []
    choice = rules.choose(plain, {}, on_cuda=True)
    if choice.backend == rules.CUDA_TORCH:
        return []
    return [
        at(
            node.origin,
            ctx.file,
            codes.W374,
            f"{ctx.deployment.code2wav_extra_path}.{rules.KEY_DEVICE_PREPARE}",
            f"{rules.KEY_DEVICE_PREPARE}: true has no effect on cuda: the speaker embedding is {choice.backend} "
            f"({choice.decided_by}), and the batched preparation needs omni-deploy's CUDA CAM++ path; "
            "vllm-omni prepares each voice itself",
            f"remove {rules.KEY_DEVICE_PREPARE}, or turn {rules.KEY_DEVICE_SPK} on",
        )
    ]
