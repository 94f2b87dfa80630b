"""The Code2Wav hook's per-forward work when every voice of the call is cached (issue 29: with cached
voices the plugin must cost vllm-omni's forward nothing but the wrappers' own calls). Stand-ins for
vllm-omni's Code2Wav, its BatchedToken2Wav and the batched preparer (no vLLM): each records what was
asked of it, so the test sees that no decode, no preparation, no encoder check ran."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import torch

from omni_deploy.integrations import refprep


class _Recorder:
    def __init__(self) -> None:
        self.calls: list[str] = []


def _state(cached: dict[tuple[str, str], Any], seen: _Recorder) -> refprep.HookState:
    def decode(path: str) -> tuple[Any, int]:
        seen.calls.append(f"decode {path}")
        raise AssertionError("a cached voice was decoded")

    def active() -> bool:
        seen.calls.append("active")
        return True

    def prepare(voices: Any) -> Any:
        seen.calls.append("prepare")
        raise AssertionError("a cached voice was prepared")

    def prepare_prompt(prompt_cache_id: str, prompt_wav: str) -> Any:
        seen.calls.append(f"vllm-omni prepare_prompt {prompt_cache_id}")
        return cached[(prompt_cache_id, prompt_wav)]

    backend = SimpleNamespace(_prompt_features=cached, prepare_prompt=prepare_prompt)
    preparer = SimpleNamespace(prepare=prepare, device=torch.device("cpu"))
    return refprep.HookState(preparer=preparer, backend=backend, features_cls=dict, decode=decode,
                             label="stage 2", limit=3, log=lambda *a: seen.calls.append("log"),
                             active=active)  # fmt: skip


def _item(voice: int) -> Any:
    return SimpleNamespace(prompt_cache_id=f"v{voice}", prompt_wav=f"/tmp/v{voice}.wav",
                           tokens=torch.ones(24, dtype=torch.int64), last_chunk=True,
                           tts_is_last_chunk=True, previous=None)  # fmt: skip


def test_a_forward_with_every_voice_cached_does_no_preparation_work() -> None:
    seen = _Recorder()
    cached = {(f"v{i}", f"/tmp/v{i}.wav"): f"features {i}" for i in range(8)}
    state = _state(cached, seen)
    items = [_item(i) for i in range(8)]
    code2wav = SimpleNamespace(_parse_item=lambda index, *args: items[index])
    refprep.attach(code2wav, state)

    for _forward in range(3):  # as vllm-omni's forward calls them: every item parsed, then prepared
        parsed = [code2wav._parse_item(i) for i in range(8)]
        got = [state.backend.prepare_prompt(p.prompt_cache_id, p.prompt_wav) for p in parsed]
        assert got == [f"features {i}" for i in range(8)]
    # Only vllm-omni's own cache look-ups ran: no decode, no pass, not even the encoder's check.
    assert seen.calls == [f"vllm-omni prepare_prompt v{i}" for i in range(8)] * 3
    assert state.passes == 0 and state.voices == 0 and state.failures == 0 and state.left == 0
    assert state.pending == []  # nothing carried from one forward to the next


def test_the_pending_list_stays_bounded_by_one_forward() -> None:
    """A forward that never reaches prepare_prompt (all items without tokens) leaves no growing list:
    the next forward's first item starts a new one."""
    seen = _Recorder()
    cached = {(f"v{i}", f"/tmp/v{i}.wav"): i for i in range(4)}
    state = _state(cached, seen)
    for _forward in range(100):
        for index in range(4):
            state.note(index, _item(index))
    assert len(state.pending) == 4 and seen.calls == []
