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

import functools
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
from omni_deploy.speaker.refprep.defaults import float32_defaults
from omni_deploy.speaker.refprep.flow_mel import flow_mel, to_token_grid
from omni_deploy.speaker.refprep.plan import FLOW_RATE, S3_RATE, VoicePlan, offsets, why_not_batched
from omni_deploy.speaker.refprep.route import DEVICE, HOST, OWN_SHAPES, PER_VOICE, Route, choose_route
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
WARM_RATES = (24000, 16000, 22050, 44100, 48000)  # what references come at (vllm-omni writes 24 kHz)
WARM_SECONDS = (6.0, 1.0, 3.5, 2.2, 4.8, 1.6)  # 1-6 s: MiniCPM-o caps references at 6 s
WARM_OWN_FRAMES = (100, 600)  # own-shapes graphs the warm-up captures: mel lengths of 1-6 s


@dataclass
class WarmUp:
    """What `ReferencePreparer.warm_up` did."""

    route: str
    graphs_captured: int  # S3 tokenizer CUDA graphs captured by this warm-up
    graphs: int  # held in all
    passes: int  # passes of synthetic voices run (CAM++'s graphs, resampling kernels, FFT plans)
    seconds: float
    skipped: int = 0  # captures and passes left to the first requests (the time budget ran out)


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
    # The stage's matmul policy (token2wav_allow_tf32): the whole preparation runs under it, and
    # so does the per-voice path its tokens equal; cuDNN's TF32 flag stays the process's.
    allow_tf32: bool = True
    route: str | None = None  # None: route.choose_route at each pass; else DEVICE, HOST or PER_VOICE
    host_threads: int = HOST_THREADS
    split_k: bool = True  # CUDA: the S3 tokenizer's products with few rows cut along their depth
    min_embedding_norm: float = 1e-6  # the vLLM plugin's guard refuses smaller norms
    cuda_graphs: bool = True
    # CUDA, own-shapes route (the TF32 policy): a graph per mel length of 1-6 s (s3_tokens.py),
    # captured by warm_up. On an H200 (docs/benchmarks.md, issue 30): exact tokens, 1 / 8 / 32
    # voices 7.5 / 31 / 81 ms against 12 / 63 / 282 ms eagerly, for about 9 s more warm-up.
    own_shape_graphs: bool = True
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
    _force_recheck: bool = False

    def __post_init__(self) -> None:
        problem = check_tokenizer(self.tokenizer)
        if problem:
            raise ValueError(problem)
        self.device = torch.device(self.device)
        self._tokens = S3Batcher(
            self.tokenizer,
            self.device,
            self.cuda_graphs,
            self.split_k,
            self.cuda_graphs and self.own_shape_graphs,
        )

    def prepare(
        self, voices: list[Voice], _force_recheck: bool = False
    ) -> tuple[list[PreparedVoice | None], Stats]:
        """One PreparedVoice per voice (None: left to the caller's own path), and this call's counts."""
        self._force_recheck = _force_recheck
        call = Stats(calls=1)
        self.last_host_ms = 0.0
        out: list[PreparedVoice | None] = [None] * len(voices)
        samples = [_as_tensor(v.samples) for v in voices]
        batchable = [i for i, (s, v) in enumerate(zip(samples, voices, strict=True))
                     if why_not_batched(int(s.numel()), int(v.sample_rate)) is None]  # fmt: skip
        call.left_to_caller = len(voices) - len(batchable)
        # vllm-omni's prepare_prompt runs with the default dtype float32 (vLLM builds stages under
        # bfloat16); the library calls on the way follow it. Everything refprep creates names its own.
        with self._lock, float32_defaults(), precision_scope(self.allow_tf32):
            for start in range(0, len(batchable), MAX_PASS):
                chunk = batchable[start : start + MAX_PASS]
                results = self._pass([samples[i] for i in chunk], [voices[i] for i in chunk], call)
                for i, result in zip(chunk, results, strict=True):
                    out[i] = result
            self.stats.add(call)
        return out, call

    def warm_up(self, max_voices: int = MAX_PASS, budget_s: float | None = None) -> WarmUp:
        """Pay now what the first requests would: every S3 tokenizer graph that the route in force
        can ask for with up to `max_voices` voices of up to 6 s (each pass-size bucket, each frame
        bucket, each packed capacity), then one pass of synthetic voices per pass-size bucket up to
        `max_voices` at the usual rates and 1-6 s (CAM++'s graphs through `embed`, the resampling
        kernels, FFT plans, cuBLAS workspaces, the rechecks' own-shapes run). Safe inside vLLM's
        loader (a bfloat16 default dtype, a torch.device context). The counts stay out of `stats`.
        With `budget_s`, no capture or pass starts once that many seconds have gone: what is left
        is counted in `skipped` (the first requests pay it), so a stage's start-up stays bounded."""
        from omni_deploy.speaker.refprep.s3_tokens import SLOT_BUCKETS

        started = time.perf_counter()
        if max_voices < 1:
            raise ValueError(f"max_voices must be at least 1, not {max_voices}")
        max_voices = min(max_voices, MAX_PASS)

        def out_of_time() -> bool:
            return budget_s is not None and time.perf_counter() - started > budget_s

        skipped = 0
        with self._lock, float32_defaults(), precision_scope(self.allow_tf32):
            route = self._route()
            before = self._tokens.graphs
            captures: list[Callable[[], object]] = []
            if route.s3 in (DEVICE, HOST):
                keys = self._tokens.buckets(max_voices, convs_apart=route.s3 == HOST)
                captures += [functools.partial(self._tokens.capture, key) for key in keys]
            if route.s3 == OWN_SHAPES:  # a graph per mel length, unless own_shape_graphs is off
                frames = range(WARM_OWN_FRAMES[0], WARM_OWN_FRAMES[1] + 1)
                captures += [functools.partial(self._tokens.capture_own, f) for f in frames]
            for done, capture in enumerate(captures):
                if out_of_time():
                    skipped += len(captures) - done
                    break
                capture()
            captured = self._tokens.graphs - before
        sizes = sorted({min(s, max_voices) for s in SLOT_BUCKETS if s < max_voices * 2})
        runs: list[tuple[Callable[[], list[Voice]], bool]] = [
            (functools.partial(_synthetic_pass, size), False) for size in sizes
        ]
        # One voice of each length (its shapes' kernels and plans), then the rechecks' own-shapes run.
        runs += [(functools.partial(_synthetic_pass, 1, seconds), False) for seconds in WARM_SECONDS[1:]]
        runs.append((functools.partial(_synthetic_pass, 1), True))
        passes = 0
        saved, self.stats = self.stats, Stats()
        try:
            for voices, recheck in runs:
                if out_of_time():
                    skipped += len(runs) - passes
                    break
                self.prepare(voices(), _force_recheck=recheck)
                passes += 1
        finally:
            self.stats = saved
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        seconds = time.perf_counter() - started
        return WarmUp(route.s3, captured, self._tokens.graphs, passes, seconds, skipped)

    def _route(self) -> Route:
        route = (
            Route(self.route, "asked for")
            if self.route
            else choose_route(self.device, self.allow_tf32, os.environ)
        )
        if route.s3 in (HOST, PER_VOICE) and self.exact_tokens is None and self.host_s3_mels is None:
            raise RuntimeError(f"the {route.s3} route ({route.why}) needs exact_tokens or host_s3_mels")
        if route.s3 == PER_VOICE and self.exact_tokens is None:
            raise RuntimeError(f"the per-voice route ({route.why}) needs exact_tokens")
        if route.s3 in (HOST, OWN_SHAPES) and self.host_s3_mels is None:
            raise RuntimeError(f"the host route ({route.why}) needs host_s3_mels")
        return route

    def _pass(
        self, samples: list[torch.Tensor], voices: list[Voice], call: Stats
    ) -> list[PreparedVoice | None]:
        started = time.thread_time()
        route = self.last_route = self._route()
        work = self._plan_pass(samples, voices, route)
        marks = _Marks(self.profile and self.device.type == "cuda" and not self.streams)
        work.send(self.device, samples)
        marks.mark("upload")
        streams = self._streams()
        out = self._run_streamed(work, streams) if streams else self._run_serial(work, marks)
        if tuple(out.embeddings.shape) != (work.count, 192):
            raise RuntimeError(f"speaker embeddings {tuple(out.embeddings.shape)} for {work.count} voices")
        with torch.inference_mode():
            norms = torch.linalg.vector_norm(out.embeddings.float(), dim=1)
            usable = torch.isfinite(norms) & (norms >= self.min_embedding_norm)
            lens32 = work.ints["lengths"].to(torch.int32)
            margins_dev = (
                out.tokens.margins.float()
                if out.tokens is not None
                else norms.new_full((work.count,), float("inf"))
            )
            both = torch.cat((margins_dev, usable.float()))
            self.last_host_ms += (time.thread_time() - started) * 1000.0
            host = both.cpu().tolist()  # the one wait
            resumed = time.thread_time()
        self.last_phases = marks.elapsed()
        margins, usable_host = host[: work.count], host[work.count :]
        call.passes += 1
        call.voices += work.count
        call.routes[route.s3] = call.routes.get(route.s3, 0) + 1
        token_starts = offsets([p.tokens for p in work.plans])
        exact = self._recheck(work, out, [i for i in range(work.count) if usable_host[i]], margins)
        call.rechecked += len(exact)
        results = [
            self._voice(work, out, lens32, i, token_starts[i], margins[i], exact.get(i))
            if usable_host[i]
            else None
            for i in range(work.count)
        ]
        call.left_to_caller += sum(1 for flag in usable_host if not flag)
        self.last_host_ms += (time.thread_time() - resumed) * 1000.0
        return results

    def _plan_pass(self, samples: list[torch.Tensor], voices: list[Voice], route: Route) -> _Work:
        rates = [int(v.sample_rate) for v in voices]
        lengths = [int(s.numel()) for s in samples]
        plans = [VoicePlan.of(n, r) for n, r in zip(lengths, rates, strict=True)]
        frames = [p.mel_frames for p in plans]
        token_plan = (
            None
            if route.s3 == PER_VOICE
            else self._tokens.plan(frames, route.s3 == HOST, own_shapes=route.s3 == OWN_SHAPES)
        )
        return _Work(voices, route, rates, lengths, plans, token_plan)

    def _flow_grid(self, work: _Work) -> torch.Tensor:
        # vllm-omni resamples and computes both mels on the CPU, in FP32: the device does the same
        # with TF32 off for matmuls and cuDNN convolutions alike.
        with torch.inference_mode(), precision_scope(False, cudnn_tf32=False):
            flat24 = resample_all(work.raw, work.rates, FLOW_RATE, work.groups[FLOW_RATE])
            flow = flow_mel(flat24, work.at24[0], work.at24[1], max(p.flow_frames for p in work.plans))
            return to_token_grid(flow, work.at24[2], self.up_rate * max(p.tokens for p in work.plans))

    def _resample16(self, work: _Work) -> tuple[torch.Tensor, torch.Tensor | None, list[torch.Tensor]]:
        """The 16 kHz waveforms (flat, and one view per voice) and, on the device route, the S3 log-mel."""
        at16, plans = work.at16, work.plans
        with torch.inference_mode():
            with precision_scope(False, cudnn_tf32=False):
                flat16 = resample_all(work.raw, work.rates, S3_RATE, work.groups[S3_RATE])
                device_mels = (
                    s3_log_mel(flat16, at16[0], at16[1], at16[2], max(p.mel_frames for p in plans))
                    if work.route.s3 == DEVICE
                    else None
                )
            waves16 = [flat16[s : s + p.samples16] for s, p in zip(work.starts16, plans, strict=True)]
        return flat16, device_mels, waves16

    def _run_streamed(self, work: _Work, streams: tuple[Any, Any, Any]) -> _Outputs:
        """The flow mel and CAM++ on streams of their own, beside the S3 tokens on the caller's."""
        main, flow_stream, cam_stream = streams
        flow_stream.wait_stream(main)  # the flow mel needs the upload only: it runs beside all the rest
        work.flat.record_stream(flow_stream)
        work.at24.record_stream(flow_stream)  # and with it the rest of the integers
        with torch.cuda.stream(flow_stream):
            grid = self._flow_grid(work)
        flat16, device_mels, waves16 = self._resample16(work)
        out = _Outputs(grid)
        cam_stream.wait_stream(main)  # before the S3 work is queued: CAM++ waits for 16 kHz only
        flat16.record_stream(cam_stream)
        if device_mels is not None and work.token_plan is not None:
            out.tokens = self._tokens.run(work.token_plan, device_mels, work.ints["s3"])
        with torch.cuda.stream(cam_stream):
            out.embeddings = self.embed(waves16)
        if work.route.s3 in (HOST, OWN_SHAPES) and work.token_plan is not None:
            out.tokens, out.host_mels = self._host_tokens(
                work.voices, work.plans, work.token_plan, work.ints["s3"]
            )
        main.wait_stream(cam_stream)
        main.wait_stream(flow_stream)
        out.embeddings.record_stream(main)
        grid.record_stream(main)
        return out

    def _run_serial(self, work: _Work, marks: _Marks) -> _Outputs:
        """Everything on the caller's stream, one phase after another (`marks` times them)."""
        _, device_mels, waves16 = self._resample16(work)
        marks.mark("resample to 16 kHz" + (", S3 log-mel" if device_mels is not None else ""))
        out = _Outputs(self._flow_grid(work))
        marks.mark("resample to 24 kHz, flow mel")
        out.embeddings = self.embed(waves16)
        marks.mark("CAM++")
        if work.token_plan is not None:
            if device_mels is not None:
                out.tokens = self._tokens.run(work.token_plan, device_mels, work.ints["s3"])
            else:
                out.tokens, out.host_mels = self._host_tokens(
                    work.voices, work.plans, work.token_plan, work.ints["s3"]
                )
            marks.mark("S3 tokens")
        return out

    def _recheck(
        self, work: _Work, out: _Outputs, usable: list[int], margins: list[float]
    ) -> dict[int, torch.Tensor]:
        """{voice: its tokens as vllm-omni's per-voice path gives them} for the voices whose batched
        tokens could differ: all of them on the per-voice route, those near a rounding boundary on
        the batched ones. Batched: their host log-mels (computed side by side, or the host route's),
        one transfer, the S3 tokenizer at each voice's own shapes, nothing read back. One by one
        (`exact_tokens`) only where no host log-mel callable was given."""
        if out.tokens is None:
            wanted = list(usable)
        elif work.route.s3 == OWN_SHAPES:
            wanted = []  # already at vllm-omni's own shapes
        else:
            wanted = [i for i in usable if margins[i] < self.margin or self._force_recheck]
        if not wanted:
            return {}
        if self.host_s3_mels is None or work.route.s3 == PER_VOICE:
            if self.exact_tokens is None:
                return {}  # no way to recheck: the batched tokens stand (margin < 0 turns it off)
            found = {}
            for i in wanted:
                mel = out.host_mels[i] if out.host_mels else None
                exact = self.exact_tokens(work.voices[i], mel)
                if tuple(exact.shape) != (1, work.plans[i].tokens):
                    raise RuntimeError(
                        f"exact tokens {tuple(exact.shape)} for a voice of {work.plans[i].tokens} tokens"
                    )
                found[i] = exact.to(device=self.device, dtype=torch.int32)
            return found
        voices = [work.voices[i] for i in wanted]
        plans = [work.plans[i] for i in wanted]
        mels = [out.host_mels[i] for i in wanted] if out.host_mels else None
        token_plan = self._tokens.plan([p.mel_frames for p in plans], own_shapes=True)
        result, _ = self._host_tokens(voices, plans, token_plan, _ints_on(token_plan.ints, self.device), mels)
        starts = offsets([p.tokens for p in plans])
        return {
            i: result.codes[at : at + plan.tokens].view(1, plan.tokens)
            for i, at, plan in zip(wanted, starts, plans, strict=True)
        }

    def _voice(
        self, work: _Work, out: _Outputs, lens32: torch.Tensor, i: int, at: int, margin: float,
        exact: torch.Tensor | None,
    ) -> PreparedVoice:  # fmt: skip
        """Voice `i` of the pass, with its rechecked tokens where it was rechecked."""
        plan, count = work.plans[i], work.count
        values = None
        if out.tokens is not None:
            codes = out.tokens.codes[at : at + plan.tokens].view(1, plan.tokens)
            values = out.tokens.values[at : at + plan.tokens]
        rechecked = exact is not None
        if exact is not None:
            codes = exact
        return PreparedVoice(
            speech_tokens=codes,
            speech_token_len=lens32[i : i + 1],
            speaker_embedding=out.embeddings[i : i + 1],
            mels=out.grid[i : i + 1, : self.up_rate * plan.tokens],
            mel_len=lens32[count + i : count + i + 1],
            margin=float(margin),
            rechecked=rechecked,
            quantizer_values=values,
        )

    def _host_tokens(
        self, voices: list[Voice], plans: list[VoicePlan], token_plan: TokenPlan, ints: torch.Tensor,
        mels: list[torch.Tensor] | None = None,
    ) -> tuple[TokenResult, list[torch.Tensor]]:  # fmt: skip
        """The host and own-shapes routes: vllm-omni's own CPU log-mel of each voice (on a few
        threads while the device works, unless given), sent in one transfer, each voice's
        convolutions (and on the own-shapes route everything) at vllm-omni's shapes."""
        assert self.host_s3_mels is not None
        if mels is None:
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


@dataclass
class _Work:
    """One pass's layout: its voices, their plans, and (after `send`) what is on the device."""

    voices: list[Voice]
    route: Route
    rates: list[int]
    lengths: list[int]
    plans: list[VoicePlan]
    token_plan: TokenPlan | None
    starts16: list[int] = field(default_factory=list)
    flat: Any = None  # every waveform, flat, on the device
    ints: dict[str, torch.Tensor] = field(default_factory=dict)
    raw: Any = None  # Ragged over `flat`
    groups: dict[int, list[torch.Tensor]] = field(default_factory=dict)  # per target rate, per source rate
    at16: Any = None  # [3, B]: 16 kHz starts, lengths, S3 mel frames
    at24: Any = None  # [3, B]: 24 kHz starts, lengths, flow mel frames

    @property
    def count(self) -> int:
        return len(self.voices)

    def send(self, device: torch.device, samples: list[torch.Tensor]) -> None:
        """The waveforms and every integer the pass needs, in one transfer."""
        lengths, rates, plans = self.lengths, self.rates, self.plans
        raw_total = sum(lengths)
        self.starts16, _ = resampled_layout(lengths, rates, S3_RATE, raw_total)
        starts24, _ = resampled_layout(lengths, rates, FLOW_RATE, raw_total)
        raw_starts = offsets(lengths)
        upload = Upload(device)
        upload.waves(samples)
        for target in (S3_RATE, FLOW_RATE):
            for group in rate_groups(lengths, rates, target):
                upload.ints(f"{target}/{group.rate}", [raw_starts[i] for i in group.members]
                            + [lengths[i] for i in group.members])  # fmt: skip
        upload.ints("16k", self.starts16 + [p.samples16 for p in plans] + [p.mel_frames for p in plans])
        upload.ints("24k", starts24 + [p.samples24 for p in plans] + [p.flow_frames for p in plans])
        upload.ints("lengths", [p.tokens for p in plans] + [p.flow_frames for p in plans])
        if self.token_plan is not None:
            upload.ints("s3", self.token_plan.ints)
        self.flat, self.ints = upload.send()
        self.raw = Ragged(self.flat, raw_starts, lengths)
        self.groups = {target: [self.ints[f"{target}/{g.rate}"].view(2, -1) for g in rate_groups(lengths, rates, target)]
                       for target in (S3_RATE, FLOW_RATE)}  # fmt: skip
        self.at16, self.at24 = self.ints["16k"].view(3, self.count), self.ints["24k"].view(3, self.count)


@dataclass
class _Outputs:
    """What a pass computed on the device."""

    grid: torch.Tensor  # [B, up_rate * max tokens, 80]: the flow mels on the token grid
    embeddings: Any = None  # [B, 192]
    tokens: TokenResult | None = None
    host_mels: list[torch.Tensor] = field(default_factory=list)  # the host route's S3 log-mels


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


def _synthetic(index: int, count: int, seconds: float | None = None) -> Voice:
    """A warm-up voice: deterministic noise, its rate and length cycling through the usual ones."""
    rate = WARM_RATES[index % len(WARM_RATES)]
    if seconds is None:
        seconds = WARM_SECONDS[(index + count) % len(WARM_SECONDS)]
    samples = np.random.default_rng(1000 * count + index).standard_normal(int(seconds * rate))
    return Voice((0.1 * samples).astype(np.float32), rate)


def _synthetic_pass(count: int, seconds: float | None = None) -> list[Voice]:
    """One warm-up pass of `count` voices (`_synthetic`'s rates and lengths unless `seconds`)."""
    return [_synthetic(index, count, seconds) for index in range(count)]


def _ints_on(values: np.ndarray, device: torch.device) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(values, dtype=np.int64)).to(
        device=device, non_blocking=False
    )


def _as_tensor(samples: Any) -> torch.Tensor:
    if isinstance(samples, np.ndarray):
        samples = torch.from_numpy(np.ascontiguousarray(samples, dtype=np.float32))
    tensor = torch.as_tensor(samples, dtype=torch.float32, device="cpu")
    if tensor.dim() != 1:
        raise ValueError(f"a voice must be mono 1-D samples, got shape {tuple(tensor.shape)}")
    return tensor.cpu()
