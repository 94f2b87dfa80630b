"""The stage's warm-up before its first request: what the first requests would otherwise compile
or capture, inside a start-up budget.

After the encoder's own warm-up (takeover.warm_up: one 6 s embedding, kernels compiled), a
MiniCPM-o Code2Wav stage warms
- the encoder's per-voice graphs: one reference at each length bucket (vllm-omni's own
  `_forward_spk_embedding` path, and the guard's checks);
- the batched reference preparation (when hooked): passes of 1, 2, 4, ... up to the stage's
  max_num_seqs new voices at each length bucket, through the same `prepare` a request runs (S3
  tokenizer buckets, CAM++ waveform graphs, flow mel), its results discarded; or, where the
  preparer has its own warm-up entry point (issue 30: `ReferencePreparer.warm_up`), that.
Every tensor is made with its dtype and device named (the take-over runs under vLLM's loader).
The budget (OMNI_DEPLOY_SPK_WARMUP_BUDGET_S, default defaults.SPK_WARMUP_BUDGET_S) is checked
between steps: past it the rest is left to the first requests, and the report says so.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from omni_deploy.common.defaults import SPK_WARMUP_BUDGET_S
from omni_deploy.integrations.takeover import WarmUp, is_cuda_error, settle

ENV_BUDGET = "OMNI_DEPLOY_SPK_WARMUP_BUDGET_S"
DEFAULT_MAX_SEQS = 8  # deploy/turn-bench.yaml's Code2Wav max_num_seqs, when the stage does not say
FEATURE_FRAMES = (150, 350)  # the 200- and 400-frame buckets (takeover.warm_up did the 600 one)
VOICE_SECONDS_DEFAULT = 6.0  # vllm-omni 0.30.0's ref_audio_max_seconds default


def budget_s(env: Mapping[str, str]) -> float:
    raw = env.get(ENV_BUDGET, "")
    try:
        value = float(raw)
    except ValueError:
        return float(SPK_WARMUP_BUDGET_S)
    # inf or 1e400 would mean no budget at all: the stage's start-up must stay bounded.
    return value if math.isfinite(value) and value >= 0 else float(SPK_WARMUP_BUDGET_S)


def max_num_seqs(code2wav: Any) -> int:
    """The stage's max_num_seqs (vllm_config.scheduler_config), else DEFAULT_MAX_SEQS."""
    scheduler = getattr(getattr(code2wav, "vllm_config", None), "scheduler_config", None)
    value = getattr(scheduler, "max_num_seqs", None)
    return int(value) if isinstance(value, int) and value > 0 else DEFAULT_MAX_SEQS


def batch_sizes(limit: int) -> list[int]:
    """1, 2, 4, ... and `limit` itself: the batch buckets a pass of at most `limit` voices meets."""
    sizes, size = [], 1
    while size < limit:
        sizes.append(size)
        size *= 2
    return [*sizes, limit]


def voice_seconds(extra: Mapping[str, Any]) -> list[float]:
    """Reference lengths that cover the length buckets: a quarter, half and all of the window."""
    try:
        longest = float(extra.get("ref_audio_max_seconds", VOICE_SECONDS_DEFAULT))
    except (TypeError, ValueError):
        longest = VOICE_SECONDS_DEFAULT
    longest = min(max(longest, 1.0), VOICE_SECONDS_DEFAULT)
    return [longest / 4, longest / 2, longest]


@dataclass
class StageWarmUp:
    steps: list[str] = field(default_factory=list)  # what was warmed, in order
    skipped: int = 0  # steps left to the first requests (the budget ran out)
    seconds: float = 0.0
    problem: str | None = None
    cuda_error: bool = False

    def as_warm_up(self) -> WarmUp:
        return WarmUp(self.problem, self.seconds, self.cuda_error)


def synthetic_voice(seconds: float, rate: int, seed: int) -> Any:
    """A voiced test signal (a tone and noise): float32 on the host, named so."""
    import numpy as np

    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * rate), dtype=np.float64) / rate
    wave = 0.3 * np.sin(2 * np.pi * (150 + 20 * seed) * t) + 0.05 * rng.standard_normal(t.shape)
    return wave.astype(np.float32)


def warm_stage(
    encoder: Any,
    state: Any,
    max_seqs: int,
    extra: Mapping[str, Any],
    budget: float,
    clock: Callable[[], float] = time.perf_counter,
) -> StageWarmUp:
    """Warm `encoder` (features, batch 1, each length bucket) and, with a hook `state`
    (integrations.refprep.HookState), its batched passes up to `max_seqs` voices. Never raises."""
    start = clock()
    out = StageWarmUp()
    steps = _encoder_steps(encoder)
    if state is not None:
        steps += _batched_steps(encoder, state, max_seqs, extra, lambda: budget - (clock() - start), out)
    for index, (name, step) in enumerate(steps):
        if clock() - start > budget:
            out.skipped += len(steps) - index
            break
        try:
            step()
            settle(getattr(encoder, "device", "cpu"))
        except Exception as exc:  # the caller undoes what it changed and reports
            out.problem = f"{name}: {type(exc).__name__}: {exc}"
            out.cuda_error = is_cuda_error(exc)
            break
        out.steps.append(name)
    out.seconds = clock() - start
    return out


_Steps = list[tuple[str, Callable[[], None]]]


def _encoder_steps(encoder: Any) -> _Steps:
    """The encoder's feature-length buckets, on float32 host features (named, not the default)."""
    import torch

    steps: _Steps = []
    generator = torch.Generator(device="cpu").manual_seed(1)
    for frames in FEATURE_FRAMES:
        feats = torch.randn(frames, 80, generator=generator, dtype=torch.float32, device="cpu")

        def features(feats: Any = feats) -> None:
            encoder(feats - feats.mean(dim=0, keepdim=True))

        steps.append((f"encoder features {frames} frames", features))
    return steps


def _batched_steps(
    encoder: Any,
    state: Any,
    max_seqs: int,
    extra: Mapping[str, Any],
    remaining: Callable[[], float],
    out: StageWarmUp,
) -> _Steps:
    """The batched preparation's warm-up: on CUDA the preparer's own entry point (issue 30 knows its
    buckets best), one long step handed the rest of the budget; without CUDA nothing is captured or
    compiled per bucket, so one small pass checks the path (the CPU stands in for CUDA in tests)."""
    on_cuda = str(getattr(encoder, "device", "cpu")).startswith("cuda")
    own = getattr(state.preparer, "warm_up", None)
    if on_cuda and callable(own):

        def batched() -> None:
            done = own(max_seqs, budget_s=max(remaining(), 0.0))
            out.skipped += int(getattr(done, "skipped", 0))

        return [(f"batched preparation up to {max_seqs} voices", batched)]
    lengths = voice_seconds(extra) if on_cuda else voice_seconds(extra)[:1]
    counts = batch_sizes(max_seqs) if on_cuda else [1]
    return [
        (f"batched pass {count}x{seconds:g}s", _pass(state, seconds, count))
        for seconds in lengths
        for count in counts
    ]


def _pass(state: Any, seconds: float, count: int) -> Callable[[], None]:
    return lambda: state.warm(seconds, count)


def budget_from_env() -> float:
    return budget_s(os.environ)
