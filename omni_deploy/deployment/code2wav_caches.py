"""MiniCPM-o Code2Wav's per-voice caches as a release reads them, against the voices a forward batches:
the runtime prompt cache (`token2wav_runtime_prompt_cache_size`, default 4) and the setup cache
(`token2wav_setup_cache_size`, default 1, on the GPU). Names, defaults and lines come from the target's
code through knowledge/; the GiB a cached setup holds is measured (docs/benchmarks.md). Read by
validate's capacity findings (I366/I367) and explain's overview alike.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from omni_deploy.config.nodes import Map, Node, Scalar
from omni_deploy.deployment.model import Deployment
from omni_deploy.knowledge.target import TargetReads

SETUP_KEY = "token2wav_setup_cache_size"
PROMPT_KEY = "token2wav_runtime_prompt_cache_size"
# Measured, not read from code (see the module's docstring): GiB of GPU memory one cached setup holds.
GIB_PER_CACHED_SETUP = 0.36
MEASURED = "H200, 0.32.0rc1, benchmarks/code2wav_stage_gpu.py; docs/benchmarks.md"


@dataclass(frozen=True)
class Cache:
    key: str
    size: int
    node: Node | None  # where the file sets it; None: the target's default
    read_at: str


@dataclass(frozen=True)
class Caches:
    """The Code2Wav stage's batch and caches, as the target reads them."""

    batch: int | None  # max_num_seqs of the Code2Wav stage; None: not set in the file
    batch_node: Node | None
    setup: Cache | None  # None: the target does not read the key
    prompt: Cache | None

    @property
    def setup_gib(self) -> float | None:
        return None if self.setup is None else self.setup.size * GIB_PER_CACHED_SETUP

    def as_dict(self) -> dict[str, Any]:
        """For explain: each cache's size and where it comes from, the batch, the setup cache's GPU memory."""

        def one(cache: Cache | None) -> dict[str, Any] | None:
            if cache is None:
                return None
            origin = str(cache.node.origin) if cache.node is not None else "default"
            return {"key": cache.key, "voices": cache.size, "origin": origin, "read_at": cache.read_at}

        gib = self.setup_gib
        return {
            "max_num_seqs": self.batch,
            "setup": one(self.setup),
            "prompt": one(self.prompt),
            "setup_gib": None if gib is None else round(gib, 2),
            "gib_per_cached_setup": GIB_PER_CACHED_SETUP,
        }


def _int(node: Node | None) -> int | None:
    value = node.value if isinstance(node, Scalar) else None
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())  # the stage casts with int()
    return None


def code2wav_caches(deployment: Deployment, target_reads: TargetReads) -> Caches | None:
    """The Code2Wav stage's caches as `target_reads`' release reads them (None: not MiniCPM-o, or no
    Code2Wav stage). For validate's findings and explain's overview alike."""
    known = deployment.pipeline.known
    if not deployment.pipeline.is_minicpmo or known is None or known.code2wav_stage is None:
        return None
    stage = deployment.stage(known.code2wav_stage)
    batch_node = stage.get("max_num_seqs") if isinstance(stage, Map) else None
    extra = deployment.code2wav_extra()

    def cache(key: str) -> Cache | None:
        read = target_reads.reads("code2wav", key)
        if read is None:
            return None
        node = extra.get(key) if isinstance(extra, Map) else None
        size = _int(node)
        if size is None:
            default = read.default
            if isinstance(default, bool) or not isinstance(default, int):
                return None
            size, node = default, None
        return Cache(key, size, node, read.at[0] if read.at else "")

    return Caches(_int(batch_node), batch_node, cache(SETUP_KEY), cache(PROMPT_KEY))
