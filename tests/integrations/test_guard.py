"""integrations.guard: every embedding is checked; a failure or a bad embedding is answered by the
fallback, counted, and N in a row retire the encoder (CPU torch, no vLLM needed)."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pytest
import torch

from omni_deploy.integrations.guard import GuardedSpeakerModel, SessionFacade, embedding_problem

GOOD = torch.arange(1, 193, dtype=torch.float32).reshape(1, 192) / 100
FALLBACK = torch.full((1, 192), 0.5)
FEAT = torch.zeros(30, 80)


@pytest.mark.parametrize(
    ("out", "words"),
    [
        (GOOD.index_fill(1, torch.tensor([3]), float("nan")), "non-finite"),
        (GOOD.index_fill(1, torch.tensor([0]), float("-inf")), "non-finite"),
        (torch.zeros(1, 192), "norm 0"),
        (torch.full((1, 192), 1e-9), "vanishing"),
        (GOOD[:, :191], "shape [1, 191]"),
        (GOOD.reshape(192), "shape [192]"),
        (GOOD.to(torch.bfloat16), "dtype bfloat16"),
        (GOOD.double(), "dtype float64"),
        (GOOD.numpy(), "not a tensor"),
        (torch.full((1, 192), 3e38), "non-finite"),  # finite values whose float32 norm overflows
    ],
)
def test_each_kind_of_bad_embedding_is_named(out: Any, words: str) -> None:
    problem = embedding_problem(out)
    assert problem is not None and words in problem


def test_a_good_embedding_passes() -> None:
    assert embedding_problem(GOOD) is None


def _guard(encoder: Any, limit: int = 3) -> tuple[GuardedSpeakerModel, list[str], list[str]]:
    warnings: list[str] = []
    retired: list[str] = []
    guard = GuardedSpeakerModel(
        encoder, lambda feat: FALLBACK, "stage 2", limit, warnings.append, retired.append
    )
    return guard, warnings, retired


def test_a_bad_embedding_counts_as_a_failure_and_the_fallback_answers() -> None:
    guard, warnings, _ = _guard(lambda feat: torch.zeros(1, 192))
    assert guard(FEAT) is FALLBACK
    assert guard.failures == 1 and guard.fallback_calls == 1 and guard.consecutive == 1
    (warning,) = warnings
    assert "EmbeddingRejected: norm 0" in warning and "this call falls back" in warning


def test_failures_in_a_row_retire_the_encoder_once() -> None:
    calls = []

    def broken(feat: torch.Tensor) -> torch.Tensor:
        calls.append(1)
        return GOOD.to(torch.bfloat16)

    guard, warnings, retired = _guard(broken, limit=2)
    for _ in range(4):
        assert guard(FEAT) is FALLBACK
    assert guard.retired and len(calls) == 2  # retired: the encoder is not asked again
    assert len(retired) == 1 and "dtype bfloat16" in retired[0]
    assert sum("switched to ONNX Runtime on the CPU for good" in w for w in warnings) == 1


def test_a_good_answer_resets_the_run_of_failures() -> None:
    answers = iter([torch.zeros(1, 192), GOOD, torch.zeros(1, 192)])
    guard, _, _ = _guard(lambda feat: next(answers), limit=2)
    assert [guard(FEAT) is FALLBACK for _ in range(3)] == [True, False, True]
    assert guard.failures == 2 and guard.consecutive == 1 and not guard.retired


def test_concurrent_callers_are_all_counted() -> None:
    guard, _, _ = _guard(lambda feat: torch.zeros(1, 192), limit=10**6)
    threads = [threading.Thread(target=lambda: [guard(FEAT) for _ in range(50)]) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert guard.calls == 400 and guard.failures == 400 and guard.fallback_calls == 400


class _Session:
    """The face of an ONNX Runtime session: get_inputs()[0].name and run(None, {name: [B, T, 80]})."""

    class _Input:
        name = "input"

    def get_inputs(self) -> list[Any]:
        return [self._Input()]

    def run(self, names: Any, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        return [np.full((feeds["input"].shape[0], 192), 0.25, dtype=np.float32)]


def test_the_session_facade_answers_as_a_session_does() -> None:
    session = _Session()
    guard, _, _ = _guard(lambda feat: GOOD * feat.shape[0])
    facade = SessionFacade(guard, session)
    name = facade.get_inputs()[0].name  # delegated to the real session
    (out,) = facade.run(None, {name: np.zeros((1, 30, 80), dtype=np.float32)})
    assert out.shape == (1, 192) and out.dtype == np.float32
    np.testing.assert_allclose(out, (GOOD * 30).numpy())
