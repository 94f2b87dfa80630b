"""The stage warm-up's pure pieces and its budget, with stand-in encoders (no vLLM)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
import torch

from omni_deploy.common.defaults import READY_TIMEOUT_S, SPK_WARMUP_BUDGET_S
from omni_deploy.integrations import takeover, warmup
from omni_deploy.integrations.report import startup_fallback


def test_batch_sizes_cover_every_bucket_up_to_max_num_seqs() -> None:
    assert warmup.batch_sizes(1) == [1]
    assert warmup.batch_sizes(8) == [1, 2, 4, 8]
    assert warmup.batch_sizes(6) == [1, 2, 4, 6]


def test_voice_lengths_follow_the_reference_window() -> None:
    assert warmup.voice_seconds({}) == [1.5, 3.0, 6.0]
    assert warmup.voice_seconds({"ref_audio_max_seconds": 2.0}) == [0.5, 1.0, 2.0]
    assert warmup.voice_seconds({"ref_audio_max_seconds": "x"}) == [1.5, 3.0, 6.0]


def test_the_budget_lies_inside_the_readiness_wait() -> None:
    assert 0 < SPK_WARMUP_BUDGET_S <= READY_TIMEOUT_S / 10
    assert warmup.budget_s({}) == SPK_WARMUP_BUDGET_S
    assert warmup.budget_s({warmup.ENV_BUDGET: "5"}) == 5.0
    assert warmup.budget_s({warmup.ENV_BUDGET: "-1"}) == SPK_WARMUP_BUDGET_S
    assert warmup.budget_s({warmup.ENV_BUDGET: "soon"}) == SPK_WARMUP_BUDGET_S
    for unbounded in ("inf", "1e400", "nan"):  # no budget at all is not a budget
        assert warmup.budget_s({warmup.ENV_BUDGET: unbounded}) == SPK_WARMUP_BUDGET_S


def test_max_num_seqs_is_the_stages_own() -> None:
    stage = SimpleNamespace(vllm_config=SimpleNamespace(scheduler_config=SimpleNamespace(max_num_seqs=12)))
    assert warmup.max_num_seqs(stage) == 12
    assert warmup.max_num_seqs(SimpleNamespace()) == warmup.DEFAULT_MAX_SEQS


class Recorder:
    device = torch.device("cpu")

    def __init__(self, fail_at: int | None = None, error: str = "RuntimeError") -> None:
        self.calls: list[tuple[Any, Any]] = []
        self.fail_at, self.error = fail_at, error

    def __call__(self, feat: Any) -> Any:
        self.calls.append((feat.dtype, feat.device))
        if self.fail_at is not None and len(self.calls) == self.fail_at:
            raise RuntimeError("CUDA error: an illegal memory access was encountered (stand-in)")
        return torch.ones(1, 192, dtype=torch.float32)


class State:
    def __init__(self) -> None:
        self.preparer = SimpleNamespace()
        self.passes: list[tuple[float, int]] = []

    def warm(self, seconds: float, count: int) -> None:
        self.passes.append((seconds, count))


def test_warm_up_inputs_name_dtype_and_device_under_a_bf16_default() -> None:
    encoder, state = Recorder(), State()
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        with torch.device("cpu"):
            done = warmup.warm_stage(encoder, state, 8, {}, budget=60.0)
            warmed = takeover.warm_up(encoder)
    finally:
        torch.set_default_dtype(previous)
    assert done.problem is None and warmed.problem is None
    assert all(dtype == torch.float32 for dtype, _ in encoder.calls)
    assert state.passes == [(1.5, 1)]  # on the CPU: one small pass checks the path


def test_a_cuda_warm_up_runs_every_bucket_and_stops_at_the_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(warmup, "settle", lambda device: None)  # no CUDA here to synchronise
    encoder, state = Recorder(), State()
    encoder.device = torch.device("cuda", 0)  # only read, never used: the stand-in computes nothing
    ticks = iter(range(1000))
    done = warmup.warm_stage(encoder, state, 8, {}, budget=1e9, clock=lambda: 0.0)
    assert done.problem is None and len(state.passes) == 12 and done.skipped == 0
    state = State()
    done = warmup.warm_stage(encoder, state, 8, {}, budget=3.0, clock=lambda: float(next(ticks)))
    assert done.skipped > 0 and len(done.steps) < 14


def test_the_preparers_own_warm_up_gets_the_rest_of_the_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """The batched warm-up is one long step: it is handed what is left of the budget and its own
    skipped passes count as the stage's."""
    monkeypatch.setattr(warmup, "settle", lambda device: None)  # no CUDA here to synchronise
    encoder, state = Recorder(), State()
    encoder.device = torch.device("cuda", 0)  # only read, never used
    asked: list[tuple[int, float]] = []

    def own(max_voices: int, budget_s: float) -> Any:
        asked.append((max_voices, budget_s))
        return SimpleNamespace(skipped=3)

    state.preparer = SimpleNamespace(warm_up=own)
    now = iter([0.0, 1.0, 2.0, 4.0, 5.0, 6.0, 7.0, 8.0])
    done = warmup.warm_stage(encoder, state, 8, {}, budget=10.0, clock=lambda: next(now))
    assert done.problem is None and asked == [(8, 5.0)] and done.skipped == 3


def test_a_cuda_error_in_the_warm_up_is_named_as_one() -> None:
    done = warmup.warm_stage(Recorder(fail_at=1), None, 8, {}, budget=60.0)
    assert done.cuda_error and "illegal memory access" in (done.problem or "")
    assert not takeover.is_cuda_error(ValueError("prepare: feats has dtype bfloat16, needs float32"))
    assert takeover.is_cuda_error(
        RuntimeError("Triton Error [CUDA]: an illegal memory access was encountered")
    )
    assert not takeover.is_cuda_error(torch.OutOfMemoryError("CUDA out of memory"))


@pytest.mark.parametrize(
    ("why", "prepare", "says"),
    [
        ("fallback: CUDA error in the stage warm-up", "n/a", "CUDA context may be unusable"),
        ("fallback:_encoder_warm-up_failed", "n/a", "fell back at start-up"),
        ("fallback: RuntimeError loading the encoder", "n/a", "spk parity"),
        ("error: KeyError", "n/a", "take-over failed"),
        (
            "token2wav_device_spk (default)",
            "per-voice(warm-up failed)",
            "batched reference preparation failed",
        ),
    ],
)
def test_a_start_up_fallback_says_why_and_what_to_do(why: str, prepare: str, says: str) -> None:
    advice = startup_fallback(why, prepare)
    assert advice is not None and says in advice


def test_no_advice_when_the_fast_path_runs() -> None:
    assert startup_fallback("token2wav_device_spk (default)", "batched") is None
    assert startup_fallback("token2wav_device_spk", "per-voice(token2wav_device_prepare)") is None
