"""Prepare many reference voices in one pass: what `_prepare_prompt` gives, for all of them at once.

One pass, on the stage's device, for up to 32 voices (more take several passes):
1. the decoded waveforms go to the device in one transfer, with every length and offset the pass
   needs (computed on the host beforehand, see plan.py);
2. in strict FP32, as vllm-omni computes them on the CPU: resampling to 16 and 24 kHz (one
   convolution per source rate) and the flow's 24 kHz mel on the token grid, on a stream of its own;
3. CAM++ on the 16 kHz waveforms through the embedding callable (omni-deploy's encoder: Kaldi
   fbank and CAM++ in its CUDA graphs, under its own TF32 setting), on another stream;
4. the S3 tokenizer for all voices at once (s3_tokens.py) under the caller's precision settings,
   which are what vllm-omni's own call runs under, its input taken the way route.py chooses for
   them (the device's log-mel, or vllm-omni's own CPU log-mel computed on a few threads while the
   device works, each voice's convolutions then at vllm-omni's shapes);
5. one read back from the device: each voice's token margin and whether its embedding is usable.

Exact tokens: a voice whose margin (the smallest distance of a value the quantizer rounds to a
rounding boundary) is under `margin` could round differently from vllm-omni's one-by-one path,
which computes the same values in another order; its tokens are then recomputed by the caller's
`exact_tokens` (vllm-omni's own per-voice operations). With the batched values within `margin`
of the one-by-one values, every token equals vllm-omni's.

A voice whose embedding is not finite or whose norm is under `min_embedding_norm` comes back as
None: the caller leaves it to vllm-omni's own path (and its speaker-model guard).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from omni_deploy.speaker.precision import precision_scope
from omni_deploy.speaker.refprep.flow_mel import flow_mel, to_token_grid
from omni_deploy.speaker.refprep.plan import FLOW_RATE, S3_RATE, VoicePlan, offsets, why_not_batched
from omni_deploy.speaker.refprep.route import DEVICE, HOST, PER_VOICE, Route, choose_route
from omni_deploy.speaker.refprep.s3_mel import N_MELS, s3_log_mel
from omni_deploy.speaker.refprep.s3_tokens import S3Batcher, TokenPlan, TokenResult, check_tokenizer
from omni_deploy.speaker.refprep.staging import Upload
from omni_deploy.speaker.refprep.upstream_ops import shared_single_threaded
from omni_deploy.speaker.refprep.waves import Ragged, rate_groups, resample_all, resampled_layout

MAX_PASS = 32  # voices per pass: the largest CUDA-graph bucket of CAM++ and of the S3 tokenizer
# Margins under this are recomputed one by one. Batched and one-by-one values differed by at most
# 2.5e-6 on the CPU and 4.8e-6 (host route) / 8.7e-6 (device route, FP32 convolutions) on an
# H200 (docs/benchmarks.md): over twice that.
DEFAULT_MARGIN = 2e-5
HOST_THREADS = 4  # threads for vllm-omni's own CPU log-mel of the voices of one pass (host route)


@dataclass
class Voice:
    """A decoded reference voice: mono float32 samples in [-1, 1] at `sample_rate`."""

    samples: Any  # numpy array or CPU tensor, 1-D
    sample_rate: int


@dataclass
class PreparedVoice:
    """What `_prepare_prompt` returns for one voice, on the device, shaped and typed alike."""

    speech_tokens: torch.Tensor  # [1, L] int32
    speech_token_len: torch.Tensor  # [1] int32
    speaker_embedding: torch.Tensor  # [1, 192] float32
    mels: torch.Tensor  # [1, up_rate * L, 80] float32
    mel_len: torch.Tensor  # [1] int32: flow mel frames before the padding to the token grid
    margin: float  # inf on the per-voice route
    rechecked: bool  # the tokens came from `exact_tokens`
    quantizer_values: torch.Tensor | None  # [L, 8]: what the batched S3 quantizer rounded


@dataclass
class Stats:
    """Counts (per call, and summed since the preparer was built)."""

    calls: int = 0
    passes: int = 0
    voices: int = 0
    rechecked: int = 0
    left_to_caller: int = 0  # too short, too long or a bad embedding: the caller's own path
    routes: dict[str, int] = field(default_factory=dict)  # passes per route

    def add(self, other: Stats) -> None:
        for name in ("calls", "passes", "voices", "rechecked", "left_to_caller"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        for route, count in other.routes.items():
            self.routes[route] = self.routes.get(route, 0) + count


EmbedFn = Callable[[list[torch.Tensor]], torch.Tensor]  # 16 kHz waveforms -> [B, 192]
# One voice (and its host log-mel when the pass computed one) -> [1, L] int32, vllm-omni's way.
ExactFn = Callable[["Voice", "torch.Tensor | None"], torch.Tensor]
HostMelFn = Callable[[Voice], torch.Tensor]  # one voice -> [128, F]: vllm-omni's CPU S3 log-mel


@dataclass
class ReferencePreparer:
    tokenizer: Any  # s3tokenizer.S3TokenizerV2, as vllm-omni loaded it
    embed: EmbedFn
    device: torch.device
    up_rate: int = 2  # the flow's mel frames per S3 token (`flow.up_rate`)
    exact_tokens: ExactFn | None = None  # needed by the per-voice route and the recheck
    host_s3_mels: HostMelFn | None = None  # needed by the host route
    margin: float = DEFAULT_MARGIN
    route: str | None = None  # None: route.choose_route at each pass; else DEVICE, HOST or PER_VOICE
    host_threads: int = HOST_THREADS
    split_k: bool = True  # CUDA: the S3 tokenizer's products with few rows cut along their depth
    min_embedding_norm: float = 1e-6  # the vLLM plugin's guard refuses smaller norms
    cuda_graphs: bool = True
    streams: bool = True  # CUDA: the flow mel and CAM++ on streams of their own
    profile: bool = False  # CUDA, one stream: time the phases of each pass with events
    last_phases: dict[str, float] = field(default_factory=dict)
    # Host CPU time of the last call's passes (thread time of the calling thread and of the host
    # route's pool, the waits on the device excluded), for benchmarks.
    last_host_ms: float = 0.0
    last_route: Route | None = None
    stats: Stats = field(default_factory=Stats)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _side: Any = None
    _pool: ThreadPoolExecutor | None = None

    def __post_init__(self) -> None:
        problem = check_tokenizer(self.tokenizer)
        if problem:
            raise ValueError(problem)
        self.device = torch.device(self.device)
        self._tokens = S3Batcher(self.tokenizer, self.device, self.cuda_graphs, self.split_k)

    def prepare(self, voices: list[Voice]) -> tuple[list[PreparedVoice | None], Stats]:
        """One PreparedVoice per voice (None: left to the caller's own path), and this call's counts."""
        call = Stats(calls=1)
        self.last_host_ms = 0.0
        out: list[PreparedVoice | None] = [None] * len(voices)
        samples = [_as_tensor(v.samples) for v in voices]
        batchable = [i for i, (s, v) in enumerate(zip(samples, voices, strict=True))
                     if why_not_batched(int(s.numel()), int(v.sample_rate)) is None]  # fmt: skip
        call.left_to_caller = len(voices) - len(batchable)
        with self._lock:
            for start in range(0, len(batchable), MAX_PASS):
                chunk = batchable[start : start + MAX_PASS]
                results = self._pass([samples[i] for i in chunk], [voices[i] for i in chunk], call)
                for i, result in zip(chunk, results, strict=True):
                    out[i] = result
            self.stats.add(call)
        return out, call

    def _route(self) -> Route:
        route = Route(self.route, "asked for") if self.route else choose_route(self.device, os.environ)
        if route.s3 in (HOST, PER_VOICE) and self.exact_tokens is None:
            raise RuntimeError(f"the {route.s3} route ({route.why}) needs exact_tokens")
        if route.s3 == HOST and self.host_s3_mels is None:
            raise RuntimeError(f"the host route ({route.why}) needs host_s3_mels")
        return route

    def _pass(
        self, samples: list[torch.Tensor], voices: list[Voice], call: Stats
    ) -> list[PreparedVoice | None]:
        started = time.thread_time()
        route = self.last_route = self._route()
        rates = [int(v.sample_rate) for v in voices]
        lengths = [int(s.numel()) for s in samples]
        plans = [VoicePlan.of(n, r) for n, r in zip(lengths, rates, strict=True)]
        count, raw_total = len(voices), sum(lengths)
        starts16, _ = resampled_layout(lengths, rates, S3_RATE, raw_total)
        starts24, _ = resampled_layout(lengths, rates, FLOW_RATE, raw_total)
        raw_starts = offsets(lengths)
        token_plan = (
            None
            if route.s3 == PER_VOICE
            else self._tokens.plan([p.mel_frames for p in plans], route.s3 == HOST)
        )

        upload = Upload(self.device)
        upload.waves(samples)
        for target in (S3_RATE, FLOW_RATE):
            for group in rate_groups(lengths, rates, target):
                upload.ints(f"{target}/{group.rate}", [raw_starts[i] for i in group.members]
                            + [lengths[i] for i in group.members])  # fmt: skip
        upload.ints("16k", starts16 + [p.samples16 for p in plans] + [p.mel_frames for p in plans])
        upload.ints("24k", starts24 + [p.samples24 for p in plans] + [p.flow_frames for p in plans])
        upload.ints("lengths", [p.tokens for p in plans] + [p.flow_frames for p in plans])
        if token_plan is not None:
            upload.ints("s3", token_plan.ints)
        marks = _Marks(self.profile and self.device.type == "cuda" and not self.streams)
        flat, ints = upload.send()
        raw = Ragged(flat, raw_starts, lengths)
        marks.mark("upload")
        groups = {target: [ints[f"{target}/{g.rate}"].view(2, -1) for g in rate_groups(lengths, rates, target)]
                  for target in (S3_RATE, FLOW_RATE)}  # fmt: skip
        at16, at24 = ints["16k"].view(3, count), ints["24k"].view(3, count)
        streams = self._streams()

        def flow_grid() -> torch.Tensor:
            # vllm-omni resamples and computes both mels on the CPU, in FP32: the device does the
            # same with TF32 off for matmuls and cuDNN convolutions alike.
            with torch.inference_mode(), precision_scope(False, cudnn_tf32=False):
                flat24 = resample_all(raw, rates, FLOW_RATE, groups[FLOW_RATE])
                flow = flow_mel(flat24, at24[0], at24[1], max(p.flow_frames for p in plans))
                return to_token_grid(flow, at24[2], self.up_rate * max(p.tokens for p in plans))

        if streams:  # the flow mel needs the upload only: it runs beside all the rest
            main, flow_stream, cam_stream = streams
            flow_stream.wait_stream(main)
            flat.record_stream(flow_stream)
            at24.record_stream(flow_stream)  # and with it the rest of the integers
            with torch.cuda.stream(flow_stream):
                grid = flow_grid()
        with torch.inference_mode():
            with precision_scope(False, cudnn_tf32=False):
                flat16 = resample_all(raw, rates, S3_RATE, groups[S3_RATE])
                device_mels = (
                    s3_log_mel(flat16, at16[0], at16[1], at16[2], max(p.mel_frames for p in plans))
                    if route.s3 == DEVICE
                    else None
                )
            waves16 = [flat16[s : s + p.samples16] for s, p in zip(starts16, plans, strict=True)]
        marks.mark("resample to 16 kHz" + (", S3 log-mel" if device_mels is not None else ""))
        if not streams:
            grid = flow_grid()
            marks.mark("resample to 24 kHz, flow mel")
        tokens: TokenResult | None = None
        host_mels: list[torch.Tensor] = []
        if streams:
            cam_stream.wait_stream(main)  # before the S3 work is queued: CAM++ waits for 16 kHz only
            flat16.record_stream(cam_stream)
            if device_mels is not None and token_plan is not None:
                tokens = self._tokens.run(token_plan, device_mels, ints["s3"])
            with torch.cuda.stream(cam_stream):
                embeddings = self.embed(waves16)
            if route.s3 == HOST and token_plan is not None:
                tokens, host_mels = self._host_tokens(voices, plans, token_plan, ints["s3"])
            main.wait_stream(cam_stream)
            main.wait_stream(flow_stream)
            embeddings.record_stream(main)
            grid.record_stream(main)
        else:
            embeddings = self.embed(waves16)
            marks.mark("CAM++")
            if token_plan is not None:
                if device_mels is not None:
                    tokens = self._tokens.run(token_plan, device_mels, ints["s3"])
                else:
                    tokens, host_mels = self._host_tokens(voices, plans, token_plan, ints["s3"])
                marks.mark("S3 tokens")
        if tuple(embeddings.shape) != (count, 192):
            raise RuntimeError(f"speaker embeddings {tuple(embeddings.shape)} for {count} voices")
        with torch.inference_mode():
            norms = torch.linalg.vector_norm(embeddings.float(), dim=1)
            usable = torch.isfinite(norms) & (norms >= self.min_embedding_norm)
            lens32 = ints["lengths"].to(torch.int32)
            margins_dev = (
                tokens.margins.float() if tokens is not None else norms.new_full((count,), float("inf"))
            )
            both = torch.cat((margins_dev, usable.float()))
            self.last_host_ms += (time.thread_time() - started) * 1000.0
            host = both.cpu().tolist()  # the one wait
            resumed = time.thread_time()
        self.last_phases = marks.elapsed()
        margins, usable_host = host[:count], host[count:]
        call.passes += 1
        call.voices += count
        call.routes[route.s3] = call.routes.get(route.s3, 0) + 1

        out: list[PreparedVoice | None] = []
        token_starts = offsets([p.tokens for p in plans])
        for i, plan in enumerate(plans):
            if not usable_host[i]:
                call.left_to_caller += 1
                out.append(None)
                continue
            values = None
            if tokens is not None:
                at = token_starts[i]
                codes = tokens.codes[at : at + plan.tokens].view(1, plan.tokens)
                values = tokens.values[at : at + plan.tokens]
            rechecked = tokens is None or (margins[i] < self.margin and self.exact_tokens is not None)
            if rechecked:
                assert self.exact_tokens is not None
                exact = self.exact_tokens(voices[i], host_mels[i] if host_mels else None)
                if tuple(exact.shape) != (1, plan.tokens):
                    raise RuntimeError(
                        f"exact tokens {tuple(exact.shape)} for a voice of {plan.tokens} tokens"
                    )
                codes = exact.to(device=self.device, dtype=torch.int32)
                call.rechecked += 1
            out.append(
                PreparedVoice(
                    speech_tokens=codes,
                    speech_token_len=lens32[i : i + 1],
                    speaker_embedding=embeddings[i : i + 1],
                    mels=grid[i : i + 1, : self.up_rate * plan.tokens],
                    mel_len=lens32[count + i : count + i + 1],
                    margin=float(margins[i]),
                    rechecked=rechecked,
                    quantizer_values=values,
                )
            )
        self.last_host_ms += (time.thread_time() - resumed) * 1000.0
        return out

    def _host_tokens(
        self, voices: list[Voice], plans: list[VoicePlan], token_plan: TokenPlan, ints: torch.Tensor
    ) -> tuple[TokenResult, list[torch.Tensor]]:
        """The host route: vllm-omni's own CPU log-mel of each voice (on a few threads while the
        device works), sent in one transfer, each voice's convolutions at vllm-omni's shapes."""
        assert self.host_s3_mels is not None
        mels = self._host_mels(voices)
        for mel, plan in zip(mels, plans, strict=True):
            if tuple(mel.shape) != (N_MELS, plan.mel_frames):
                raise RuntimeError(
                    f"host S3 mel {tuple(mel.shape)} where {plan.mel_frames} frames were planned"
                )
        upload = Upload(self.device)
        upload.waves(mels)
        flat, _ = upload.send()
        sizes = [N_MELS * p.mel_frames for p in plans]
        views = [flat[s : s + n].view(1, N_MELS, -1) for s, n in zip(offsets(sizes), sizes, strict=True)]
        return self._tokens.run(token_plan, views, ints), mels

    def _host_mels(self, voices: list[Voice]) -> list[torch.Tensor]:
        assert self.host_s3_mels is not None
        if self.host_threads <= 1 or len(voices) == 1:
            return [self.host_s3_mels(v) for v in voices]
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.host_threads, thread_name_prefix="omni-deploy-s3-mel")
        mel = self.host_s3_mels

        def timed(voice: Voice) -> tuple[torch.Tensor, float]:
            start = time.thread_time()
            return mel(voice), time.thread_time() - start

        # Each op on one thread, as vLLM's resampler runs it: the threads work side by side.
        with shared_single_threaded():
            results = list(self._pool.map(timed, voices))
        self.last_host_ms += sum(seconds for _, seconds in results) * 1000.0  # the pool's CPU time too
        return [m for m, _ in results]

    def _streams(self) -> tuple[Any, Any, Any] | None:
        """(the caller's stream, one for the flow mel, one for CAM++) when they may overlap."""
        if not (self.streams and self.device.type == "cuda"):
            return None
        if self._side is None:
            self._side = (torch.cuda.Stream(self.device), torch.cuda.Stream(self.device))
        return (torch.cuda.current_stream(self.device), *self._side)


class _Marks:
    """CUDA events between the phases of a pass (nothing when off)."""

    def __init__(self, on: bool) -> None:
        self.on = on
        self.events: list[tuple[str, Any]] = []
        if on:
            self.mark("start")

    def mark(self, name: str) -> None:
        if self.on:
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            self.events.append((name, event))

    def elapsed(self) -> dict[str, float]:
        """ms of each phase; call after the device has finished them."""
        return {name: first.elapsed_time(event)
                for (_, first), (name, event) in zip(self.events, self.events[1:], strict=False)}  # fmt: skip


def _as_tensor(samples: Any) -> torch.Tensor:
    if isinstance(samples, np.ndarray):
        samples = torch.from_numpy(np.ascontiguousarray(samples, dtype=np.float32))
    tensor = torch.as_tensor(samples, dtype=torch.float32)
    if tensor.dim() != 1:
        raise ValueError(f"a voice must be mono 1-D samples, got shape {tuple(tensor.shape)}")
    return tensor.cpu()
