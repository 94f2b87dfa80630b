"""The speaker encoder callers use: features or waveforms in, raw 192-d CAM++ embeddings out.

One loaded copy of the weights per (campplus.onnx, device) is shared by every encoder in the
process. On CUDA, each (batch bucket, length bucket) is captured once as a CUDA graph whose
static inputs are the padded features and the device-resident lengths, so a graph captured for a
bucket serves every length up to it. Waveform input gets graphs of its own that hold the fbank
front end too (its per-frame work ignores padded samples and its mean is masked, so padding
changes nothing). Lengths past the largest bucket run eagerly.
"""

from __future__ import annotations

import itertools
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
from omni_deploy.speaker.fused_model import FusedCampplus, default_backend, padded_length, unpack
from omni_deploy.speaker.onnx_weights import read_weights
from omni_deploy.speaker.precision import precision_scope

FEAT_DIM = 80
EMBED_DIM = 192
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32)
# MiniCPM-o caps reference audio at 6 s (598 frames): three length buckets cover it.
MAX_GRAPH_FRAMES = 600


@dataclass
class _Graph:
    """One captured forward and the buffers it reads.

    The graph's input is one device buffer: a header of int64 lengths and start rows (one each per
    batch slot), then the items packed back to back (frames of 80 features, or samples). The graph
    unpacks them itself, so a call writes only the real data and moves it in one copy. Items on the
    host are first packed into `staging`, a pinned twin of that buffer, so the copy to the device
    is one asynchronous transfer that waits for nothing.
    """

    graph: Any
    batch: int  # batch slots
    width: int  # frames (features) or samples (waveforms) per item, padded
    row: int  # values per frame or sample: 80 for features, 1 for waveforms
    inputs: torch.Tensor  # on the device: header then packed items
    staging: torch.Tensor  # its twin on the host (pinned on CUDA)
    header: np.ndarray  # int64 view of the staging header: lengths, then starts
    output: torch.Tensor
    copied: Any  # CUDA event: the last copy out of `staging` has been done

    def __post_init__(self) -> None:
        # Views made once: slicing and viewing cost microseconds on every call otherwise.
        self.header_values = 4 * self.batch  # 2 * batch int64 values in float32 slots
        self.head_in = self.inputs[: self.header_values]
        self.head_staged = self.staging[: self.header_values]
        self.packed_in = self.views(self.inputs)[2]
        self.packed_staged = self.views(self.staging)[2]

    def views(self, buffer: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(lengths, starts, packed items) of `buffer` (the device input or its staging twin)."""
        head = buffer[: 4 * self.batch].view(torch.int64)
        packed = buffer[4 * self.batch :]
        return head[: self.batch], head[self.batch :], packed.view(-1, self.row) if self.row > 1 else packed


class _NoEvent:
    """A CPU device copies synchronously: nothing to wait for."""

    def record(self) -> None: ...

    def synchronize(self) -> None: ...


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

    def _record(self, fn: Callable[[], torch.Tensor]) -> tuple[Any, torch.Tensor]:
        """(graph, its output tensor) of `fn`, warmed up first on a side stream."""
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
        return graph, output

    def _buffers(self, batch: int, width: int, row: int) -> tuple[torch.Tensor, torch.Tensor, Any]:
        """The device input, its staging twin and the copy event, for a graph of this shape.

        Both start as a valid full batch (every item `width` long from row 0, zero data), which is
        what the warm-up and the capture run on."""
        size = 4 * batch + batch * width * row
        pinned = self.device.type == "cuda"
        # dtype and device named: the take-over runs under vLLM's loader, whose default dtype is the
        # stage's (bf16) and which may hold a `torch.device` context. A bf16 buffer here would halve
        # the int64 header and the graph would read item starts out of the packed data.
        staging = torch.zeros(size, dtype=torch.float32, device="cpu", pin_memory=pinned)
        head = staging[: 4 * batch].view(torch.int64)
        head[:batch] = width
        head[batch:] = 0
        inputs = staging.to(self.device, copy=True)
        return inputs, staging, torch.cuda.Event() if pinned else _NoEvent()

    def _capture(self, kind: str, batch: int, frames: int) -> _Graph:
        if kind == "features":
            width, row = frames, FEAT_DIM
        else:
            width, row = FRAME_LENGTH + FRAME_SHIFT * (frames - 1), 1  # exactly `frames` fbank frames
        inputs, staging, copied = self._buffers(batch, width, row)
        header = staging[: 4 * batch].view(torch.int64).numpy()
        shell = _Graph(None, batch, width, row, inputs, staging, header, inputs, copied)
        lengths, starts, packed = shell.views(inputs)

        def features() -> torch.Tensor:
            return self.model.forward_packed(packed, starts, lengths, frames)

        def waveforms() -> torch.Tensor:
            waves = unpack(packed, starts, lengths, width)
            with precision_scope(False, None):  # the front end in strict FP32, as when run eagerly
                feats, counts = fbank_padded(waves, lengths)
            return self.model(feats, counts)

        shell.graph, shell.output = self._record(features if kind == "features" else waveforms)
        return shell

    def _graph_for(self, kind: str, batch: int, frames: int) -> _Graph | None:
        if not self._use_graphs() or frames > MAX_GRAPH_FRAMES or batch > BATCH_BUCKETS[-1]:
            return None
        key = (kind, next(b for b in BATCH_BUCKETS if b >= batch), frames)
        graph = self._graphs.get(key)
        if graph is None:
            with torch.no_grad(), precision_scope(self.allow_tf32, self.cudnn_tf32):
                graph = self._graphs[key] = self._capture(kind, key[1], frames)
        return graph

    def _from_host(self, items: list[torch.Tensor]) -> bool:
        """Whether to pack on the host and copy once (items on the CPU, model elsewhere)."""
        return self.device.type != "cpu" and all(i.device.type == "cpu" for i in items)

    def _replay(self, graph: _Graph, items: list[torch.Tensor], lengths: list[int]) -> torch.Tensor:
        # Nothing is zeroed and nothing allocated but the result: the graph reads each item's own
        # rows only. Batch slots past the batch run item 0's rows at full width and are discarded.
        batch, slots = len(items), graph.batch
        starts = list(itertools.accumulate(lengths, initial=0))
        total = starts.pop()
        graph.copied.synchronize()  # the previous call's copy out of the staging buffer is done
        head = graph.header
        head[:batch] = lengths
        head[batch:slots] = graph.width
        head[slots : slots + batch] = starts
        head[slots + batch :] = 0
        if self._from_host(items):
            staged = graph.packed_staged[:total]
            if batch == 1:  # host memcpy into pinned memory
                staged.copy_(items[0])
            else:
                torch.cat(items, out=staged)
            used = graph.header_values + total * graph.row
            graph.inputs[:used].copy_(graph.staging[:used], non_blocking=True)  # the one transfer
        else:
            if any(i.device != self.device for i in items):  # a mix of host and device items
                items = [i.to(self.device) for i in items]
            graph.head_in.copy_(graph.head_staged, non_blocking=True)
            packed = graph.packed_in[:total]
            if batch == 1:
                packed.copy_(items[0])
            else:
                torch.cat(items, out=packed)
        graph.copied.record()
        graph.graph.replay()
        return graph.output.clone() if batch == slots else graph.output[:batch].clone()

    def _run_padded(self, feats: list[torch.Tensor]) -> torch.Tensor:
        lengths = [int(f.shape[0]) for f in feats]
        frames = padded_length(max(lengths))
        graph = self._graph_for("features", len(feats), frames)
        if graph is not None:
            return self._replay(graph, feats, lengths)
        padded = torch.zeros(len(feats), frames, FEAT_DIM, dtype=torch.float32, device=self.device)
        for i, f in enumerate(feats):
            padded[i, : f.shape[0]] = f.to(self.device)
        with torch.no_grad(), precision_scope(self.allow_tf32, self.cudnn_tf32):
            return self.model(padded, torch.tensor(lengths, dtype=torch.int64, device=self.device))

    def _run_waves(self, waves: list[torch.Tensor]) -> torch.Tensor:
        # Only the samples inside the last whole frame count (up to 159 after it do not): cut
        # there, so that every item fits the graph's width for its frames.
        samples = [FRAME_LENGTH + FRAME_SHIFT * (num_frames(int(w.shape[0])) - 1) for w in waves]
        waves = [w[:n] for w, n in zip(waves, samples, strict=True)]
        graph = self._graph_for("waveforms", len(waves), padded_length(max(num_frames(n) for n in samples)))
        assert graph is not None  # embed_waveforms checked that these lengths have graphs
        return self._replay(graph, waves, samples)

    def embed_features(self, feats: list[torch.Tensor]) -> torch.Tensor:
        """[B, 192] raw embeddings of mean-subtracted [T, 80] features (T may differ per item)."""
        if not feats:
            return torch.empty(0, EMBED_DIM, dtype=torch.float32, device=self.device)
        checked = []
        for f in feats:
            if f.dim() != 2 or f.shape[1] != FEAT_DIM:
                raise ValueError(f"features must be [T, {FEAT_DIM}], got {tuple(f.shape)}")
            if f.shape[0] < 2:
                raise ValueError("a reference needs at least 2 feature frames (about 35 ms of audio)")
            # Left on the host if it is there: a graph replay packs host items into pinned memory
            # and copies them in one transfer; the eager path moves them itself.
            checked.append(f if f.dtype == torch.float32 else f.float())
        # No precision scope around a replay (the graph fixed it when captured): captures and
        # eager runs set it themselves.
        with self._lock, torch.no_grad():
            return _in_chunks(checked, self._run_padded)

    def embed_waveforms(self, waveforms: list[Any], sample_rate: int) -> torch.Tensor:
        """[B, 192] raw embeddings of mono waveforms in [-1, 1] (resampled to 16 kHz if needed)."""
        tensors = []
        for w in waveforms:
            t = torch.as_tensor(w, dtype=torch.float32).reshape(-1).to(self.device)
            tensors.append(resample(t, sample_rate, SAMPLE_RATE))
        if not tensors:
            return torch.empty(0, EMBED_DIM, dtype=torch.float32, device=self.device)
        if min(num_frames(int(t.shape[0])) for t in tensors) < 2:
            raise ValueError("a reference needs at least 2 feature frames (about 35 ms of audio)")
        longest = padded_length(max(num_frames(int(t.shape[0])) for t in tensors))
        if self._use_graphs() and longest <= MAX_GRAPH_FRAMES:
            with self._lock, torch.no_grad():
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
