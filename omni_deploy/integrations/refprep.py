"""Batched reference preparation in MiniCPM-o 4.5's Code2Wav stage (vllm-omni 0.30.0 on).

vllm-omni prepares each new reference voice on its own, on the request's critical path:
`MiniCPMO45Code2Wav.forward` parses every item of the call (`_parse_item`, which also writes
request references to WAV files), then, bucket by bucket, calls `BatchedToken2Wav.prepare_prompt`,
which on a miss of its `_prompt_features` cache runs the core's `_prepare_prompt` for that one
voice. The hook here changes none of that code. It notes the (prompt_cache_id, prompt_wav) of
each parsed item that the forward will prepare, and at the forward's first `prepare_prompt` it
prepares every one of them that is not cached yet in one batched pass
(omni_deploy.speaker.refprep) and puts the same `PromptFeatures` vllm-omni would have built into
vllm-omni's own cache; the unchanged forward then finds them there.

Never worse than vllm-omni's own path: a voice the pass cannot take (too short, over 30 s, a file
vLLM cannot decode, an embedding the guard would refuse) is left to it, and so is the whole call
when the pass fails (rate-limited WARNING, counted; after `limit` failures in a row the hook
retires for good). Tokens equal vllm-omni's: voices whose quantizer values lie within rounding of a
boundary are recomputed by vllm-omni's own per-voice operations (see refprep/prepare.py).

Any other miss of `prepare_prompt` (a voice the forward did not announce, vllm-omni 0.32's prefetch
at request arrival) goes through the same pass, as a batch of one. Where 0.32 prefetches while
several references wait (`token2wav_ref_prefetch_max_waiters` above 1), the idle step's phase runs
for each of them with `prepare_prompt` only noting its reference, and one pass prepares them all
(`plug_prefetch`); the requests' forwards then find them in the cache.
"""

from __future__ import annotations

import contextlib
import dataclasses
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from omni_deploy.integrations.speaker_rules import Choice, choose_prepare

CODE2WAV_MODULE = "vllm_omni.model_executor.models.minicpmo_4_5.minicpmo_4_5_code2wav"
BATCHED_MODULE = "vllm_omni.model_executor.models.minicpmo_4_5.batched_token2wav"
CORE_MODULE = "vllm_omni.model_executor.models.step_audio2.step_audio2_token2wav"
SUMMARY_INTERVAL_S = 60.0  # the INFO line with the counts: the first pass, then at most this often


@dataclass
class HookState:
    """One Code2Wav stage's hook: what the current forward will prepare, and the counts."""

    preparer: Any  # omni_deploy.speaker.refprep.ReferencePreparer
    backend: Any  # vllm-omni's BatchedToken2Wav
    features_cls: Any  # vllm-omni's PromptFeatures
    decode: Callable[[str], tuple[Any, int]]  # vLLM's load_audio(path, sr=None, mono=True)
    label: str
    limit: int
    log: Callable[..., None]  # (level, message, *args)
    active: Callable[[], bool] = lambda: True  # False once the speaker encoder has been retired
    pending: list[tuple[str, str]] = field(default_factory=list)
    collecting: bool = False  # prepare_prompt only notes its reference (a batched prefetch)
    # References this forward's pass failed on or left to vllm-omni: its per-voice path takes them
    # (a miss of one of them does not start another pass); cleared when a forward starts.
    left_this_call: set[tuple[str, str]] = field(default_factory=set)
    prefetched: int = 0  # references prepared ahead of their request (0.32's prefetch)
    failures: int = 0
    consecutive: int = 0
    retired: bool = False
    passes: int = 0
    voices: int = 0
    rechecked: int = 0
    left: int = 0
    _last_summary: float = float("-inf")
    _last_warning: float = float("-inf")
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def note(self, index: int, item: Any) -> None:
        """After `_parse_item`: the first item of a forward starts a new list."""
        if index == 0:
            self.pending.clear()
            self.left_this_call.clear()
        if will_prepare(item):
            self.pending.append((str(item.prompt_cache_id), str(item.prompt_wav)))

    def before_prepare(self, key: tuple[str, str] | None = None) -> None:
        """At each `prepare_prompt` (of `key`): the forward's first prepares what the forward will
        need; a later miss prepares its own reference."""
        with self._lock:
            if key is not None:
                self.pending.append(key)
            cache = self.backend._prompt_features
            keys = [k for k in dict.fromkeys(self.pending) if k not in cache and k not in self.left_this_call]
            self.pending.clear()
            if not keys or self.retired or not self.active():
                return
            try:
                self._prepare(keys)
            except Exception as exc:  # vllm-omni's own path prepares this call's voices
                self.left_this_call.update(keys)
                self._failed(exc)
            else:
                self.consecutive = 0
                self.left_this_call.update(k for k in keys if k not in cache)

    def _prepare(self, keys: list[tuple[str, str]]) -> None:
        from omni_deploy.speaker.refprep.prepare import Voice
        from omni_deploy.speaker.refprep.upstream_ops import as_vllm_omni_prepares

        decoded: list[tuple[tuple[str, str], Any]] = []
        for key in keys:
            try:
                samples, rate = self.decode(key[1])
            except Exception:  # vllm-omni's own path raises its own error for this voice
                self.left += 1
                continue
            decoded.append((key, Voice(samples, int(rate))))
        if not decoded:
            return
        with as_vllm_omni_prepares(self.preparer.device):
            prepared, stats = self.preparer.prepare([voice for _, voice in decoded])
        for (key, _), voice in zip(decoded, prepared, strict=True):
            if voice is not None:
                self.backend._prompt_features[key] = self.features_cls(
                    cache_key=key,
                    speech_tokens=voice.speech_tokens,
                    speaker_embedding=voice.speaker_embedding,
                    mels=voice.mels,
                )
        self.passes += stats.passes
        self.voices += stats.voices
        self.rechecked += stats.rechecked
        self.left += stats.left_to_caller
        now = time.monotonic()
        if now - self._last_summary >= SUMMARY_INTERVAL_S:
            self._last_summary = now
            self.log("info", "%s: %s", self.label, self.summary())

    def warm(self, seconds: float, count: int) -> None:
        """One pass of `count` synthetic voices of `seconds` at 16 kHz through the preparer, as a
        request's pass runs (vllm-omni's default dtype and autocast context), results discarded
        and the preparer's counts left as they were: the buckets it meets are compiled and captured
        before the first request."""
        import copy

        from omni_deploy.integrations.warmup import synthetic_voice
        from omni_deploy.speaker.refprep.prepare import Voice
        from omni_deploy.speaker.refprep.upstream_ops import as_vllm_omni_prepares

        voices = [Voice(synthetic_voice(seconds, 16000, seed), 16000) for seed in range(count)]
        before = copy.deepcopy(self.preparer.stats)
        try:
            with as_vllm_omni_prepares(self.preparer.device):
                self.preparer.prepare(voices)
        finally:
            self.preparer.stats = before

    def summary(self) -> str:
        return (
            f"batched reference preparation: {self.voices} voices in {self.passes} passes "
            f"({self.prefetched} ahead of their request), "
            f"{self.rechecked} tokens rechecked one by one, {self.left} left to vllm-omni, "
            f"{self.failures} failed passes"
        )

    def _failed(self, exc: Exception) -> None:
        self.failures += 1
        self.consecutive += 1
        if self.consecutive >= self.limit:
            self.retired = True
            self.log("warning", "%s: batched reference preparation failed %d times in a row (last: %s: %s); "
                     "vllm-omni's per-voice preparation from now on", self.label, self.consecutive,
                     type(exc).__name__, exc)  # fmt: skip
            return
        now = time.monotonic()
        if now - self._last_warning >= SUMMARY_INTERVAL_S:
            self._last_warning = now
            self.log("warning", "%s: batched reference preparation failed (%s: %s); this call's voices are "
                     "prepared by vllm-omni one by one (%d failures in all)", self.label, type(exc).__name__,
                     exc, self.failures)  # fmt: skip


def will_prepare(item: Any) -> bool:
    """Whether vllm-omni 0.30.0's forward calls prepare_prompt for this parsed item: a chunk with
    tokens, or an initial segment marker (tts_is_last_chunk, no tokens, no previous state)."""
    tokens = item.tokens.numel()
    if tokens > 0:
        return True
    return not item.last_chunk and bool(item.tts_is_last_chunk) and item.previous is None


WORK_ITEM_FIELDS = ("prompt_cache_id", "prompt_wav", "tokens", "last_chunk", "tts_is_last_chunk", "previous")


def layout_problem(code2wav: Any, code2wav_module: Any, batched_module: Any) -> str | None:
    """Why this vllm-omni's Code2Wav cannot take the hook, checked on the live objects."""
    backend = getattr(code2wav, "backend", None)
    if not callable(getattr(code2wav, "_parse_item", None)):
        return "MiniCPMO45Code2Wav._parse_item not found"
    if not callable(getattr(backend, "prepare_prompt", None)):
        return "BatchedToken2Wav.prepare_prompt not found"
    if not isinstance(getattr(backend, "_prompt_features", None), dict):
        return "BatchedToken2Wav._prompt_features is not a dict"
    work_item = getattr(code2wav_module, "_WorkItem", None)
    names = {f.name for f in dataclasses.fields(work_item)} if dataclasses.is_dataclass(work_item) else set()
    missing = [n for n in WORK_ITEM_FIELDS if n not in names]
    if missing:
        return "_WorkItem without " + ", ".join(missing)
    features = getattr(batched_module, "PromptFeatures", None)
    fields = {f.name for f in dataclasses.fields(features)} if dataclasses.is_dataclass(features) else set()
    if fields != {"cache_key", "speech_tokens", "speaker_embedding", "mels"}:
        return "PromptFeatures is not (cache_key, speech_tokens, speaker_embedding, mels)"
    return None


def attach(code2wav: Any, state: HookState) -> None:
    """Wrap this Code2Wav's `_parse_item` and its backend's `prepare_prompt` (instance attributes:
    the class and every other instance stay as vllm-omni wrote them)."""
    parse_item = code2wav._parse_item
    prepare_prompt = state.backend.prepare_prompt

    def parse(index: int, *args: Any, **kwargs: Any) -> Any:
        item = parse_item(index, *args, **kwargs)
        with contextlib.suppress(Exception):  # a layout this hook does not know: the item is not batched
            state.note(index, item)
        return item

    def prepare(prompt_cache_id: str, prompt_wav: str) -> Any:
        key = (str(prompt_cache_id), str(prompt_wav))
        if state.collecting and key not in state.backend._prompt_features:
            state.pending.append(key)
            return None  # a prefetch phase discards it; the batched pass fills the cache
        state.before_prepare(key)
        return prepare_prompt(prompt_cache_id, prompt_wav)

    code2wav._parse_item = parse
    state.backend.prepare_prompt = prepare
    code2wav._omni_deploy_refprep = state


def detach(code2wav: Any) -> None:
    """Undo `attach`: vllm-omni's own methods again (the instance attributes go; the class's stay)."""
    state = vars(code2wav).pop("_omni_deploy_refprep", None)
    vars(code2wav).pop("_parse_item", None)
    vars(code2wav).pop("_run_prefetch_phase", None)
    if state is not None:
        vars(state.backend).pop("prepare_prompt", None)


def make_state(
    code2wav: Any,
    core: Any,
    encoder: Any,
    modules: tuple[Any, Any],
    label: str,
    limit: int,
    log: Callable[..., None],
    active: Callable[[], bool] = lambda: True,
    allow_tf32: bool = True,
) -> HookState:
    """The hook for one Code2Wav stage: its core's S3 tokenizer, omni-deploy's CAM++ encoder, and
    vLLM's own decoder and resampler (`modules`: vllm-omni's token2wav core module, which imports
    them, and its batched_token2wav module, which defines PromptFeatures). `allow_tf32` is the
    stage's matmul policy (token2wav_allow_tf32), under which the whole preparation runs."""
    import numpy as np
    import torch

    from omni_deploy.speaker.refprep import upstream_ops
    from omni_deploy.speaker.refprep.prepare import ReferencePreparer, Voice

    core_module, batched_module = modules
    device = torch.device(core.device)
    tokenizer = core.audio_tokenizer

    def resample(audio: Any, orig: int, new: int) -> Any:
        return core_module.AudioResampler(target_sr=new).resample(audio, orig_sr=orig)

    def exact(voice: Voice, mel: Any) -> Any:
        return upstream_ops.s3_tokens(
            np.asarray(voice.samples), voice.sample_rate, tokenizer, device, resample, mel=mel
        )[0]

    def host_mel(voice: Voice) -> Any:
        return upstream_ops.s3_mel(np.asarray(voice.samples), voice.sample_rate, resample)

    def embed(waves: list[Any]) -> Any:
        return encoder.embed_waveforms(waves, 16000)

    def decode(path: str) -> tuple[Any, int]:
        samples, rate = core_module.load_audio(path, sr=None, mono=True)
        return samples, int(rate)

    preparer = ReferencePreparer(
        tokenizer,
        embed,
        device,
        up_rate=int(core.flow.up_rate),
        exact_tokens=exact,
        host_s3_mels=host_mel,
        allow_tf32=allow_tf32,
    )
    return HookState(
        preparer, code2wav.backend, batched_module.PromptFeatures, decode, label, limit, log, active
    )


def hook_stage(
    code2wav: Any,
    core: Any,
    encoder: Any,
    extra: Mapping[str, Any],
    speaker: Choice,
    label: str,
    limit: int,
    log: Callable[..., None],
    active: Callable[[], bool] = lambda: True,
) -> str:
    """Apply `token2wav_device_prepare` to one Code2Wav stage whose speaker embedding the plugin has
    just moved to `encoder` (behind its guard; `active` turns False once the guard retires it).
    Returns the report line's `prepare` field: "batched", or "per-voice(<why>)"."""
    choice = choose_prepare(extra, speaker.backend, speaker.decided_by)
    for note in choice.problems:
        log("warning", "%s: %s", label, note)
    if not choice.batched:
        return f"per-voice({choice.decided_by})"
    modules = [sys.modules.get(name) for name in (CODE2WAV_MODULE, CORE_MODULE, BATCHED_MODULE)]
    if any(module is None for module in modules):
        problem: str | None = "vllm-omni's Code2Wav modules are not imported"
    else:
        problem = layout_problem(code2wav, modules[0], modules[2])
    if problem is None and not callable(getattr(encoder, "embed_waveforms", None)):
        problem = "the speaker encoder takes no waveforms"
    if problem is not None:
        log("warning", "%s: batched reference preparation is off (%s); vllm-omni prepares each voice itself",
            label, problem)  # fmt: skip
        return "per-voice(layout)"
    state = make_state(
        code2wav, core, encoder, (modules[1], modules[2]), label, limit, log, active, speaker.allow_tf32
    )
    attach(code2wav, state)
    return "batched"


def plug(code2wav: Any, core: Any, guard: Any, encoder: Any, extra: Mapping[str, Any], speaker: Choice,
         label: str) -> str:  # fmt: skip
    """For the plugin's MiniCPM-o patch (integrations/minicpmo), once its guarded encoder is in the
    core's speaker slot: the batched preparation over the same encoder, stopping when the guard
    retires it. Returns the report line's `prepare` field; never raises into vLLM."""
    from omni_deploy.integrations.report import logger, warn

    def log(level: str, message: str, *args: Any) -> None:
        if level == "warning":
            warn(message, *args)
        else:
            logger().info(message, *args)

    try:
        return hook_stage(code2wav, core, encoder, extra, speaker, label, int(guard.limit), log,
                          active=lambda: not guard.retired)  # fmt: skip
    except Exception as exc:  # never break serving: vllm-omni's own preparation stays
        warn("%s: batched reference preparation could not be set up (%s: %s); vllm-omni prepares each voice "
             "itself", label, type(exc).__name__, exc)  # fmt: skip
        return f"per-voice(error: {type(exc).__name__})"


def plug_prefetch(code2wav: Any, state: HookState, label: str) -> str:
    """vllm-omni 0.32's reference prefetch through the batched pass (after `plug` gave
    "batched"): wraps the stage's `_run_prefetch_phase`. Returns the report line's `prefetch`."""
    from omni_deploy.integrations.report import warn

    if getattr(code2wav, "_ref_prefetch_enabled", None) is False:
        return "off"
    queue = getattr(code2wav, "_prefetch_queue", None)
    run_phase = getattr(code2wav, "_run_prefetch_phase", None)
    if not isinstance(queue, Mapping) or not callable(run_phase):
        warn("%s: vllm-omni's reference prefetch has no queue the plugin knows; it prepares each reference "
             "itself (on the plugin's encoder)", label)  # fmt: skip
        return "per-voice(layout)"

    def waiting(record: Any) -> list[tuple[Any, Any]]:
        """The other queued references whose phase A has not run, in queue order."""
        return [
            (sid, r) for sid, r in list(queue.items()) if r is not record and getattr(r, "entry", 1) is None
        ]

    def run_prefetch_phase(state_id: Any, record: Any) -> Any:
        if state.collecting or getattr(record, "entry", 1) is not None:
            return run_phase(state_id, record)  # phase B, or inside a batched phase A
        others = waiting(record)
        ready = len(state.backend._prompt_features)
        if not others:
            ran = run_phase(state_id, record)  # a lone reference: prepare_prompt's miss is one pass
        else:
            state.collecting = True
            try:
                ran = run_phase(state_id, record)
                for other_id, other in others:
                    run_phase(other_id, other)
            finally:
                state.collecting = False
            state.before_prepare()
        state.prefetched += max(0, len(state.backend._prompt_features) - ready)
        return ran

    code2wav._run_prefetch_phase = run_prefetch_phase
    return "batched"
