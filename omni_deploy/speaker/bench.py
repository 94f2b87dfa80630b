"""Side-by-side CAM++ latency: ONNX Runtime CPU (1 thread, as vllm-omni sets it; all cores),
the eager unfused torch module (the seed's approach), and ours (fused, batched, graphs).

All backends get the same features in the same process. Latencies are per call; per-reference
figures divide by the batch. CUDA work is synchronised before each clock read.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import torch

from omni_deploy.speaker.eager_baseline import reference_from_weights
from omni_deploy.speaker.encoder import get_encoder
from omni_deploy.speaker.fbank import SAMPLE_RATE, fbank
from omni_deploy.speaker.inputs import synthetic, synthetic_one
from omni_deploy.speaker.onnx_file import ort_session
from omni_deploy.speaker.onnx_weights import read_weights


@dataclass
class Row:
    case: str
    backend: str
    batch: int
    median_ms: float  # per call
    p95_ms: float
    per_ref_ms: float


def _timer(device: torch.device) -> Callable[[], float]:
    def now() -> float:
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        return time.perf_counter()

    return now


def measure(fn: Callable[[], Any], device: torch.device, repeats: int, warmup: int = 3) -> list[float]:
    now = _timer(device)
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(repeats):
        start = now()
        fn()
        samples.append((now() - start) * 1000.0)
    return samples


def _row(case: str, backend: str, batch: int, samples: list[float]) -> Row:
    ordered = sorted(samples)
    median = statistics.median(ordered)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return Row(case, backend, batch, median, p95, median / batch)


def run_bench(
    onnx_path: str,
    device: str = "cuda",
    seconds: tuple[float, ...] = (3.0, 6.0),
    batches: tuple[int, ...] = (1, 8, 32),
    mixed: int = 32,
    repeats: int = 30,
    allow_tf32: bool = True,
    progress: bool = True,
) -> list[Row]:
    dev = torch.device(device)
    if dev.type == "cuda" and dev.index is None:
        dev = torch.device("cuda", torch.cuda.current_device())
    encoder = get_encoder(onnx_path, device=dev, allow_tf32=allow_tf32)
    eager = reference_from_weights(read_weights(onnx_path), dev)
    ort_one, ort_all = ort_session(onnx_path, threads=1), ort_session(onnx_path)
    plans: list[tuple[str, list[Any]]] = []
    for s in seconds:
        for b in batches:
            plans.append((f"{s:g}s x{b}", [synthetic_one(s, seed=1000 * b + i) for i in range(b)]))
    if mixed:
        plans.append((f"1-6s x{mixed}", synthetic(mixed, seed=7)))
    rows: list[Row] = []
    for index, (case, refs) in enumerate(plans, start=1):
        if progress:
            print(f"[{index}/{len(plans)}] {case}", file=sys.stderr, flush=True)
        waves = [torch.from_numpy(r.waveform).to(dev) for r in refs]
        feats = fbank(waves)
        cpu_feats = [f.cpu()[None].numpy() for f in feats]
        rows.extend(
            _time_case(case, encoder, eager, (ort_one, ort_all), waves, feats, cpu_feats, dev, repeats)
        )
    return rows


def _time_case(
    case: str,
    encoder: Any,
    eager: torch.nn.Module,
    sessions: tuple[Any, Any],
    waves: list[torch.Tensor],
    feats: list[torch.Tensor],
    cpu_feats: list[Any],
    dev: torch.device,
    repeats: int,
) -> list[Row]:
    batch = len(feats)
    rows = [
        _row(case, "ours", batch, measure(lambda: encoder.embed_features(feats), dev, repeats)),
        _row(case, "fbank", batch, measure(lambda: fbank(waves), dev, repeats)),
        _row(
            case,
            "fbank+ours",
            batch,
            measure(lambda: encoder.embed_waveforms(waves, SAMPLE_RATE), dev, repeats),
        ),
    ]

    def eager_all() -> None:
        with torch.no_grad():
            for f in feats:
                eager(f[None])

    rows.append(_row(case, "eager-torch", batch, measure(eager_all, dev, max(3, repeats // 3))))
    # ONNX Runtime runs one reference per call, as vllm-omni does; its cost does not depend on
    # the batch, so it is measured on the first few references only.
    few = cpu_feats[: min(batch, 4)]
    for name, session in zip(("ort-cpu-1thread", "ort-cpu-all"), sessions, strict=True):
        feed = session.get_inputs()[0].name

        def run_all(s: Any = session, n: str = feed) -> None:
            for f in few:
                s.run(None, {n: f})

        rows.append(_row(case, name, len(few), measure(run_all, dev, 5, warmup=1)))
    return rows


def format_table(rows: list[Row]) -> str:
    lines = [
        f"{'case':<12} {'backend':<16} {'batch':>5} {'median ms':>10} {'p95 ms':>8} {'ms/ref':>8} {'ours x':>7}"
    ]
    ours = {r.case: r.per_ref_ms for r in rows if r.backend == "ours"}
    for r in rows:
        ratio = r.per_ref_ms / ours[r.case] if r.case in ours and ours[r.case] > 0 else float("nan")
        lines.append(
            f"{r.case:<12} {r.backend:<16} {r.batch:>5} {r.median_ms:>10.3f} {r.p95_ms:>8.3f} "
            f"{r.per_ref_ms:>8.3f} {ratio:>7.1f}"
        )
    return "\n".join(lines)


def as_json(rows: list[Row]) -> list[dict[str, Any]]:
    return [asdict(r) for r in rows]


def graph_replay_ms(model: Any, feats: torch.Tensor, lengths: torch.Tensor, reps: int = 40) -> float:
    """Median CUDA-graph replay time of one forward (warmed up on a side stream, timed with events)."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(2):
            model(feats, lengths)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        model(feats, lengths)
    return replay_ms(graph, reps)


def replay_ms(graph: Any, reps: int) -> float:
    """Median time of one replay of a captured CUDA graph, after three warm-up replays, with events."""
    for _ in range(3):
        graph.replay()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)
