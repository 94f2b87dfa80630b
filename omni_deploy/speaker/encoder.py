"""The speaker encoder callers use: features or waveforms in, raw 192-d CAM++ embeddings out.

One loaded copy of the weights per (campplus.onnx, device) is shared by every encoder in the
process. On CUDA, each (batch bucket, length bucket) is captured once as a CUDA graph whose
static inputs are the padded features and the device-resident lengths, so a graph captured for a
bucket serves every length up to it. Waveform input gets graphs of its own that hold the fbank
front end too (its per-frame work ignores padded samples and its mean is masked, so padding
changes nothing). Lengths past the largest bucket run eagerly.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from omni_deploy.speaker.fbank import (
    FRAME_LENGTH,
    FRAME_SHIFT,
    SAMPLE_RATE,
    fbank,
    fbank_padded,
    num_frames,
    resample,
)
from omni_deploy.speaker.fused_model import FusedCampplus, default_backend, padded_length
from omni_deploy.speaker.onnx_weights import read_weights
from omni_deploy.speaker.precision import precision_scope

FEAT_DIM = 80
EMBED_DIM = 192
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32)
# MiniCPM-o caps reference audio at 6 s (598 frames): three length buckets cover it.
MAX_GRAPH_FRAMES = 600


@dataclass
class _Graph:
    graph: Any
    inputs: torch.Tensor  # [batch, frames, 80] features or [batch, samples] waveforms
    lengths: torch.Tensor  # frames or samples per item
    output: torch.Tensor
    host_lengths: torch.Tensor  # pinned, so the copy to the device does not block
    copied: Any  # CUDA event: the last copy out of host_lengths


@dataclass
class SpeakerEncoder:
    model: FusedCampplus
    source: str
    allow_tf32: bool = True
    cudnn_tf32: bool | None = None
    cuda_graphs: bool = True
    _graphs: dict[tuple[str, int, int], _Graph] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _pool: Any = None

    @property
    def device(self) -> torch.device:
        return self.model.device

    def _use_graphs(self) -> bool:
        return self.cuda_graphs and self.device.type == "cuda"

    def _record(self, inputs: torch.Tensor, lengths: torch.Tensor, fn: Callable[[], torch.Tensor]) -> _Graph:
        if self._pool is None:
            self._pool = torch.cuda.graph_pool_handle()
        stream = torch.cuda.Stream(self.device)
        stream.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(stream):
            for _ in range(2):  # warm-up: lazy init, FFT plans and workspaces stay out of the graph
                fn()
        torch.cuda.current_stream(self.device).wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=self._pool):
            output = fn()
        pinned = torch.empty(inputs.shape[0], dtype=torch.long, pin_memory=True)
        copied = torch.cuda.Event()
        copied.record()
        return _Graph(graph, inputs, lengths, output, pinned, copied)

    def _capture(self, batch: int, frames: int) -> _Graph:
        feats = torch.zeros(batch, frames, FEAT_DIM, device=self.device)
        lengths = torch.full((batch,), frames, dtype=torch.long, device=self.device)
        return self._record(feats, lengths, lambda: self.model(feats, lengths))

    def _capture_waves(self, batch: int, frames: int) -> _Graph:
        samples = FRAME_LENGTH + FRAME_SHIFT * (frames - 1)  # exactly `frames` fbank frames
        waves = torch.zeros(batch, samples, device=self.device)
        lengths = torch.full((batch,), samples, dtype=torch.long, device=self.device)

        def forward() -> torch.Tensor:
            with precision_scope(False, None):  # the front end in strict FP32, as when run eagerly
                feats, counts = fbank_padded(waves, lengths)
            return self.model(feats, counts)

        return self._record(waves, lengths, forward)

    def _graph_for(self, kind: str, batch: int, frames: int) -> _Graph | None:
        if not self._use_graphs() or frames > MAX_GRAPH_FRAMES or batch > BATCH_BUCKETS[-1]:
            return None
        key = (kind, next(b for b in BATCH_BUCKETS if b >= batch), frames)
        graph = self._graphs.get(key)
        if graph is None:
            capture = self._capture if kind == "features" else self._capture_waves
            graph = self._graphs[key] = capture(key[1], frames)
        return graph

    def _replay(self, graph: _Graph, items: list[torch.Tensor], lengths: list[int]) -> torch.Tensor:
        # No zeroing: the model masks every frame (and fbank every sample) past each item's
        # length itself. Rows past the batch keep earlier (finite) contents, run at full length,
        # and are discarded.
        batch = len(items)
        width = graph.inputs.shape[1]
        if graph.inputs.dim() == 3 and batch > 2 and all(i.device == graph.inputs.device for i in items):
            # Features already on the device: one scatter instead of a copy per item.
            sizes = np.asarray(lengths)
            starts = np.cumsum(sizes) - sizes
            rows = np.arange(sizes.sum()) - np.repeat(starts - np.arange(batch) * width, sizes)
            index = torch.from_numpy(rows).to(graph.inputs.device)
            graph.inputs.view(-1, graph.inputs.shape[2]).index_copy_(0, index, torch.cat(items))
        else:
            for i, item in enumerate(items):
                graph.inputs[i, : item.shape[0]].copy_(item, non_blocking=True)
        host = graph.host_lengths
        graph.copied.synchronize()  # the previous call's copy out of `host` has finished
        host[:batch] = torch.tensor(lengths, dtype=torch.long)
        host[batch:] = width
        graph.lengths.copy_(host, non_blocking=True)
        graph.copied.record()
        graph.graph.replay()
        return graph.output[:batch].clone()

    def _run_padded(self, feats: list[torch.Tensor]) -> torch.Tensor:
        lengths = [int(f.shape[0]) for f in feats]
        frames = padded_length(max(lengths))
        graph = self._graph_for("features", len(feats), frames)
        if graph is not None:
            return self._replay(graph, feats, lengths)
        padded = torch.zeros(len(feats), frames, FEAT_DIM, device=self.device)
        for i, f in enumerate(feats):
            padded[i, : f.shape[0]] = f
        return self.model(padded, torch.tensor(lengths, device=self.device))

    def _run_waves(self, waves: list[torch.Tensor]) -> torch.Tensor:
        samples = [int(w.shape[0]) for w in waves]
        graph = self._graph_for("waveforms", len(waves), padded_length(max(num_frames(n) for n in samples)))
        assert graph is not None  # embed_waveforms checked that these lengths have graphs
        return self._replay(graph, waves, samples)

    def embed_features(self, feats: list[torch.Tensor]) -> torch.Tensor:
        """[B, 192] raw embeddings of mean-subtracted [T, 80] features (T may differ per item)."""
        if not feats:
            return torch.empty(0, EMBED_DIM, device=self.device)
        checked = []
        for f in feats:
            if f.dim() != 2 or f.shape[1] != FEAT_DIM:
                raise ValueError(f"features must be [T, {FEAT_DIM}], got {tuple(f.shape)}")
            if f.shape[0] < 2:
                raise ValueError("a reference needs at least 2 feature frames (about 35 ms of audio)")
            checked.append(f.to(self.device, torch.float32))
        with self._lock, torch.no_grad(), precision_scope(self.allow_tf32, self.cudnn_tf32):
            return _in_chunks(checked, self._run_padded)

    def embed_waveforms(self, waveforms: list[Any], sample_rate: int) -> torch.Tensor:
        """[B, 192] raw embeddings of mono waveforms in [-1, 1] (resampled to 16 kHz if needed)."""
        tensors = []
        for w in waveforms:
            t = torch.as_tensor(w, dtype=torch.float32).reshape(-1).to(self.device)
            tensors.append(resample(t, sample_rate, SAMPLE_RATE))
        if not tensors:
            return torch.empty(0, EMBED_DIM, device=self.device)
        if min(num_frames(int(t.shape[0])) for t in tensors) < 2:
            raise ValueError("a reference needs at least 2 feature frames (about 35 ms of audio)")
        longest = padded_length(max(num_frames(int(t.shape[0])) for t in tensors))
        if self._use_graphs() and longest <= MAX_GRAPH_FRAMES:
            with self._lock, torch.no_grad(), precision_scope(self.allow_tf32, self.cudnn_tf32):
                return _in_chunks(tensors, self._run_waves)
        return self.embed_features(fbank(tensors))

    def __call__(self, feat: torch.Tensor) -> torch.Tensor:
        """vllm-omni's speaker-model contract: [T, 80] features in, [1, 192] on this device out."""
        return self.embed_features([feat])


def _in_chunks(items: list[torch.Tensor], run: Callable[[list[torch.Tensor]], torch.Tensor]) -> torch.Tensor:
    """`run` over slices of at most the largest batch bucket, the results joined in order."""
    out = [run(items[start : start + BATCH_BUCKETS[-1]]) for start in range(0, len(items), BATCH_BUCKETS[-1])]
    return out[0] if len(out) == 1 else torch.cat(out)


_MODELS: dict[tuple[str, float, str, str], FusedCampplus] = {}
_ENCODERS: dict[tuple[Any, ...], SpeakerEncoder] = {}
_CACHE_LOCK = threading.Lock()


def get_encoder(
    onnx_path: str | os.PathLike[str],
    device: Any = "cuda",
    allow_tf32: bool = True,
    cuda_graphs: bool = True,
    cudnn_tf32: bool | None = None,
    backend: str | None = None,
) -> SpeakerEncoder:
    """The shared encoder; `backend` picks the dense-layer kernels ("triton", "torch", default auto)."""
    dev = torch.device(device)
    if dev.type == "cuda" and dev.index is None:
        dev = torch.device("cuda", torch.cuda.current_device())
    real = os.path.realpath(onnx_path)
    kernels = backend or default_backend(dev)
    model_key = (real, os.path.getmtime(real) if os.path.exists(real) else 0.0, str(dev), kernels)
    with _CACHE_LOCK:
        model = _MODELS.get(model_key)
        if model is None:
            model = _MODELS[model_key] = FusedCampplus(read_weights(real), dev, kernels)
        key = (*model_key, allow_tf32, cudnn_tf32, cuda_graphs)
        encoder = _ENCODERS.get(key)
        if encoder is None:
            encoder = _ENCODERS[key] = SpeakerEncoder(model, real, allow_tf32, cudnn_tf32, cuda_graphs)
        return encoder
