"""The S3 tokenizer's `quantize` for many voices at once, capture-safe, with CUDA graphs per bucket.

`S3TokenizerV2.quantize` (s3tokenizer 0.3.0) cannot be captured as a CUDA graph: it asks the host
whether any voice is longer than 30 s (`long_audio_mask.any()`) and copies its rotary table from the
host on every call. This module runs the same model, through its own submodules and methods (the
two convolutions, layer norms, projections, `qkv_attention` with its rotary embedding and FSMN
memory, the MLP, the quantizer's projection), with those two steps moved out: the 30 s check is
the caller's (from lengths it knows), the rotary table is copied to the device once.

Layout: the convolutions, attention and FSMN memory need each voice's frames in order and run on a
padded [slots, width] layout with masks from device-resident lengths, as s3tokenizer's own batching
does. Everything else works per token and runs on the voices' tokens packed back to back, so
voices of different lengths cost their own tokens there, not the longest voice's. Both layouts
are static for a (slots, frames, capacity) bucket: one CUDA graph serves every batch that fits it.

Tokens are discrete: the quantizer rounds tanh(projection) * 0.999 to {-1, 0, 1} in each of 8
dimensions, so a value within rounding of +-0.5 can round either way when the arithmetic is
reordered (batching, padding, another device's kernels). Each voice's smallest distance to +-0.5
(its margin) comes back with its tokens, so that the caller can tell which voices could differ
from the one-by-one result at all.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from omni_deploy.speaker.refprep.plan import s3_tokens

SLOT_BUCKETS = (1, 2, 4, 8, 16, 32)
FRAME_QUANTUM = 200  # padded mel frames: multiples of 2 s
MAX_GRAPH_FRAMES = 600  # MiniCPM-o caps reference audio at 6 s (600 frames); longer runs eagerly
TOKEN_QUANTUM = 128  # packed tokens: the smallest capacity
# Packed capacities: a ladder of about 1.5x steps, so that the graphs a warm-up captures are few
# (about a dozen per bucket) and the packed layout still wastes at most a third of its rows.
CAPACITY_LADDER = tuple(TOKEN_QUANTUM * m for m in (1, 1.5, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64))
N_MELS = 128
FSQ_SCALE = 0.9990000128746033  # s3tokenizer's FSQCodebook.encode


def padded_frames(frames: int) -> int:
    return max(FRAME_QUANTUM, -(-frames // FRAME_QUANTUM) * FRAME_QUANTUM)


def padded_capacity(tokens: int) -> int:
    """The capacity of the packed layout for `tokens` tokens: the ladder's first step that holds
    them (past the ladder, multiples of its last step)."""
    for step in CAPACITY_LADDER:
        if step >= tokens:
            return int(step)
    last = int(CAPACITY_LADDER[-1])
    return -(-tokens // last) * last


def capacities(slots: int, frames: int) -> list[int]:
    """Every capacity a plan of this (slots, padded frames) bucket can ask for."""
    most = padded_capacity(slots * s3_tokens(frames))
    return [int(step) for step in CAPACITY_LADDER if step <= most]


def layout(tokens: list[int], slots: int, width: int, capacity: int) -> tuple[np.ndarray, np.ndarray]:
    """(rows, owners) of the packed tokens: packed token j is row rows[j] of the padded
    [slots * width (+ 1 zero row)] layout and belongs to voice owners[j]; rows past the real
    tokens point at the zero row and belong to no voice (owner `slots`)."""
    counts = np.asarray(tokens, dtype=np.int64)
    total = int(counts.sum())
    owners = np.full(capacity, slots, dtype=np.int64)
    owners[:total] = np.repeat(np.arange(len(tokens), dtype=np.int64), counts)
    starts = np.cumsum(counts) - counts
    rows = np.full(capacity, slots * width, dtype=np.int64)
    rows[:total] = np.arange(total, dtype=np.int64) - np.repeat(starts, counts) + owners[:total] * width
    return rows, owners


def check_tokenizer(tokenizer: Any) -> str | None:
    """Why this tokenizer cannot take the batched path, or None (checked, not assumed)."""
    encoder: Any = getattr(tokenizer, "encoder", None)
    quantizer: Any = getattr(getattr(tokenizer, "quantizer", None), "_codebook", None)
    needed = {
        "encoder.conv1": getattr(encoder, "conv1", None),
        "encoder.conv2": getattr(encoder, "conv2", None),
        "encoder.blocks": getattr(encoder, "blocks", None),
        "encoder.freqs_cis": getattr(encoder, "freqs_cis", None),
        "quantizer._codebook.project_down": getattr(quantizer, "project_down", None),
    }
    missing = [name for name, value in needed.items() if value is None]
    if missing:
        return "S3 tokenizer without " + ", ".join(missing)
    if getattr(encoder, "stride", None) != 2 or getattr(quantizer, "level", None) != 3:
        return "S3 tokenizer with another stride or FSQ level than s3tokenizer 0.3.0's"
    for block in encoder.blocks:
        attn = getattr(block, "attn", None)
        if not all(hasattr(attn, name) for name in ("query", "key", "value", "out", "qkv_attention")):
            return "S3 tokenizer block without query/key/value/out/qkv_attention"
        if getattr(attn, "use_sdpa", False):
            return "S3 tokenizer built with use_sdpa"
    if encoder.conv1.in_channels != N_MELS:
        return f"S3 tokenizer for {encoder.conv1.in_channels} mel bins, not {N_MELS}"
    dtypes = {str(p.dtype).removeprefix("torch.") for p in tokenizer.parameters()}
    if dtypes != {"float32"}:
        # vllm-omni's own quantize takes float32 mels: with other weights it cannot run either.
        return f"S3 tokenizer weights in {', '.join(sorted(dtypes))}, not float32"
    return None


def same_device(got: torch.device, want: torch.device) -> bool:
    """`cuda` and `cuda:0` are one device where the current device is 0."""
    if got.type != want.type:
        return False
    if got.type != "cuda" or got.index == want.index:
        return True
    current = torch.cuda.current_device()
    return (got.index if got.index is not None else current) == (
        want.index if want.index is not None else current
    )


def check_input(
    name: str, tensor: Any, dtype: torch.dtype, device: torch.device, shape: tuple[int, ...]
) -> None:
    """Raise ValueError unless `tensor` is a tensor of this dtype, device and shape (-1: any size)
    whose memory is contiguous: what a graph replay or a copy into its static buffers assumes."""
    if not isinstance(tensor, torch.Tensor):
        raise ValueError(f"{name}: a tensor was expected, got {type(tensor).__name__}")
    wrong = []
    if tensor.dtype != dtype:
        wrong.append(f"dtype {tensor.dtype} (expected {dtype})")
    if not same_device(tensor.device, device):
        wrong.append(f"device {tensor.device} (expected {device})")
    sizes = tuple(tensor.shape)
    if len(sizes) != len(shape) or any(want not in (-1, got) for want, got in zip(shape, sizes, strict=True)):
        wrong.append(f"shape {tuple(tensor.shape)} (expected {shape})")
    if not tensor.is_contiguous():
        wrong.append("not contiguous")
    if wrong:
        raise ValueError(f"{name}: " + ", ".join(wrong))


def _mask(lengths: torch.Tensor, width: int) -> torch.Tensor:
    """s3tokenizer.make_non_pad_mask with a given width (no host read): [B, width] bool."""
    return torch.arange(width, device=lengths.device)[None, :] < lengths[:, None]


def split_for(rows: int, cols: int, depth: int, processors: int) -> int:
    """How many slices of the reduction a [rows, depth] x [depth, cols] FP32 product is cut into so
    that its tiles (about 128 x 128 output values each) fill the device's multiprocessors: with
    few rows (one or a few voices) a plain GEMM occupies a fraction of them, each working through
    the whole depth. 1: not cut."""
    tiles = -(-rows // 128) * -(-cols // 128)
    if tiles >= processors:
        return 1
    want = -(-processors // tiles)
    return next((s for s in range(want, 1, -1) if depth % s == 0 and depth // s >= 128), 1)


def linear(x: torch.Tensor, layer: Any, split: int) -> torch.Tensor:
    """`layer(x)` for an s3tokenizer Linear ([M, K] x [N, K]^T + bias), the reduction cut into
    `split` slices run as one batched GEMM and summed (rounding differs; the sum does not)."""
    if split <= 1:
        return layer(x)
    rows, depth = x.shape
    weight = layer.weight.to(x.dtype)
    parts = x.view(rows, split, depth // split).transpose(0, 1)  # [s, M, K/s]
    slices = weight.view(weight.shape[0], split, depth // split).permute(1, 2, 0)  # [s, K/s, N]
    out = torch.bmm(parts, slices).sum(dim=0)
    return out if layer.bias is None else out + layer.bias.to(x.dtype)


class PackedS3:
    """The forward of one S3TokenizerV2 over a (slots, frames, capacity) layout."""

    def __init__(self, tokenizer: Any, device: torch.device, split_k: bool = False) -> None:
        self.tokenizer = tokenizer
        self.encoder = tokenizer.encoder
        self.codebook = tokenizer.quantizer._codebook
        self.device = device
        self.freqs = self.encoder.freqs_cis.to(device=device)
        self.powers = torch.pow(
            self.codebook.level, torch.arange(2**self.codebook.level, device=device, dtype=torch.float32)
        )
        self.processors = (
            torch.cuda.get_device_properties(device).multi_processor_count
            if split_k and device.type == "cuda"
            else 0
        )

    def _linear(self, x: torch.Tensor, layer: Any) -> torch.Tensor:
        if not self.processors:
            return layer(x)
        out_features, in_features = layer.weight.shape
        return linear(x, layer, split_for(x.shape[0], out_features, in_features, self.processors))

    def _mlp(self, x: torch.Tensor, mlp: Any) -> torch.Tensor:
        if not self.processors:
            return mlp(x)
        first, act, second = mlp
        return self._linear(act(self._linear(x, first)), second)

    def convs(self, mel: torch.Tensor, mel_len: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """([S, T, D] after the two convolutions, [S] token counts) of mel [S, 128, F]: as
        AudioEncoderV2.forward, with the widths known here."""
        enc = self.encoder
        frames = mel.shape[2]
        x_len = mel_len
        x = torch.nn.functional.gelu(enc.conv1(mel * _mask(x_len, frames).unsqueeze(1)))
        x_len = (x_len + 2 - 1 * (3 - 1) - 1) // enc.stride + 1
        width = (frames + 2 - 1 * (3 - 1) - 1) // enc.stride + 1
        x = torch.nn.functional.gelu(enc.conv2(x * _mask(x_len, width).unsqueeze(1)))
        x_len = (x_len + 2 - 1 * (3 - 1) - 1) // 2 + 1
        return x.permute(0, 2, 1), x_len

    def convs_one_by_one(self, mels: list[torch.Tensor]) -> torch.Tensor:
        """[sum of T_i, D]: each [1, 128, F_i] mel through the convolutions on its own, at the
        shape vllm-omni's per-voice call gives them (so cuDNN picks the same algorithm). A voice
        alone has no padding: AudioEncoderV2's masks are all ones there, and x * 1 is x."""
        enc = self.encoder
        outs = []
        for mel in mels:
            x = torch.nn.functional.gelu(enc.conv1(mel.contiguous()))
            x = torch.nn.functional.gelu(enc.conv2(x))
            outs.append(x[0].transpose(0, 1))
        return torch.cat(outs)

    def own_shapes(self, mel: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(codes [T] int32, values [T, 8], margin [1]) of one voice's mel [1, 128, F], by the same
        calls on the same shapes and memory layouts as `S3TokenizerV2.quantize` of that voice alone
        (`AudioEncoderV2.forward`, each `ResidualAttentionBlock`, `FSQCodebook.encode`), less its
        host reads. The residual stream keeps the convolutions' transposed layout there, and the
        quantizer's product runs on it: a contiguous copy rounds differently."""
        enc = self.encoder
        frames = mel.shape[2]
        ones = torch.ones(1, 1, frames, dtype=torch.bool, device=mel.device)  # make_non_pad_mask, alone
        x = torch.nn.functional.gelu(enc.conv1(mel * ones))
        width = (frames + 2 - 1 * (3 - 1) - 1) // enc.stride + 1
        x = torch.nn.functional.gelu(enc.conv2(x * ones[:, :, :width]))
        tokens = (width + 2 - 1 * (3 - 1) - 1) // enc.stride + 1
        mask = ones[:, :, :tokens]
        x = x.permute(0, 2, 1)
        mask_pad = mask.transpose(1, 2)
        bias = (1.0 - mask.to(x.dtype)) * -1.0e10  # s3tokenizer.mask_to_bias
        freqs = self.freqs[:tokens]
        for block in enc.blocks:
            x = block(x, bias.unsqueeze(1), mask_pad, freqs)
        value = self.codebook.project_down(x.reshape(-1, x.shape[-1])).float().tanh() * FSQ_SCALE
        codes = torch.sum((value.round() + 1) * self.powers.unsqueeze(0), dim=-1).int()
        margin = (value.abs() - 0.5).abs().amin().reshape(1)
        return codes, value, margin

    def __call__(
        self, mel: torch.Tensor, mel_len: torch.Tensor, rows: torch.Tensor, owners: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(codes [C] int32, values [C, 8], margins [slots + 1]) for mel [S, 128, F], mel_len [S],
        rows and owners [C]; the values are what the quantizer rounds."""
        x, x_len = self.convs(mel, mel_len)
        _, width, dim = x.shape
        packed = torch.cat((x.reshape(-1, dim), x.new_zeros(1, dim))).index_select(0, rows)
        return self.blocks(packed, x_len, width, rows, owners)

    def blocks(
        self, h: torch.Tensor, x_len: torch.Tensor, width: int, rows: torch.Tensor, owners: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The transformer and the quantizer on packed tokens h [C, D] of voices with x_len [S]
        tokens, laid out `width` per voice for the per-voice layers."""
        slots, dim = x_len.shape[0], h.shape[1]
        mask = _mask(x_len, width).unsqueeze(1)  # [S, 1, T]
        mask_pad = mask.transpose(1, 2)
        bias = ((1.0 - mask.to(h.dtype)) * -1.0e10).unsqueeze(1)  # s3tokenizer.mask_to_bias
        freqs = self.freqs[:width]
        zero_row = h.new_zeros(1, dim)

        def pack(padded: torch.Tensor) -> torch.Tensor:
            return torch.cat((padded.reshape(-1, dim), zero_row)).index_select(0, rows)

        def unpack(packed: torch.Tensor) -> torch.Tensor:
            out = h.new_zeros(slots * width + 1, dim)
            out.index_copy_(0, rows, packed)  # spare rows all land on the zero row
            return out[: slots * width].view(slots, width, dim)

        for block in self.encoder.blocks:
            attn = block.attn
            normed = block.attn_ln(h)
            q, k, v = (unpack(self._linear(normed, layer)) for layer in (attn.query, attn.key, attn.value))
            wv, _, fsm = attn.qkv_attention(q, k, v, bias, mask_pad, freqs)
            h = h + (self._linear(pack(wv), attn.out) + pack(fsm))
            h = h + self._mlp(block.mlp_ln(h), block.mlp)
        # As FSQCodebook.encode, keeping the value it rounds.
        value = self.codebook.project_down(h).float().tanh() * FSQ_SCALE
        codes = torch.sum((value.round() + 1) * self.powers.unsqueeze(0), dim=-1).int()
        margin = (value.abs() - 0.5).abs().amin(dim=-1)
        margins = torch.full((slots + 1,), float("inf"), dtype=torch.float32, device=h.device)
        margins = margins.scatter_reduce(0, owners, margin, reduce="amin")
        return codes, value, margins


@dataclass
class _Graph:
    graph: Any
    inputs: torch.Tensor  # static input: mels [S, 128, F], or packed tokens [C, D] after the convolutions
    ints: torch.Tensor  # [S + 2C] static input: mel frames (or tokens), rows, owners
    codes: torch.Tensor
    values: torch.Tensor
    margins: torch.Tensor


@dataclass(frozen=True)
class TokenPlan:
    """How one batch of voices runs: its graph bucket (None: eagerly) and the integers the run
    needs on the device (mel frames, or with `convs_apart` token counts, then packed rows and
    owners; with `own_shapes`, per voice: its token count, its rows, its owners)."""

    frames: tuple[int, ...]
    tokens: tuple[int, ...]
    bucket: tuple[int, int, int] | None  # (slots, frames, capacity)
    convs_apart: bool  # the convolutions one voice at a time, at vllm-omni's own shapes
    ints: np.ndarray
    own_shapes: bool = False  # everything one voice at a time, at vllm-omni's own shapes


@dataclass
class TokenResult:
    codes: torch.Tensor  # [sum of tokens] int32, the voices' codes back to back
    values: torch.Tensor  # [sum of tokens, 8]: what the quantizer rounded
    margins: torch.Tensor  # [voices] float32, on the device


def own_shape_ints(tokens: list[int]) -> np.ndarray:
    """The integers of an own-shapes run: per voice [T, 0..T-1, T zeros] (one voice, no padding)."""
    parts = [np.concatenate(([t], np.arange(t), np.zeros(t))) for t in tokens]
    return np.concatenate(parts).astype(np.int64) if parts else np.zeros(0, np.int64)


@dataclass
class S3Batcher:
    """Tokens of many voices per call; graphs per (slots, frames, capacity) on CUDA.

    A plan with `convs_apart` runs the two convolutions for each voice on its own at the shape
    vllm-omni's per-voice call gives them (cuDNN then picks the same algorithm, and with TF32
    convolutions, the default, another algorithm rounds differently); only the transformer is
    batched then. A plan with `own_shapes` runs every operation of each voice at the shape
    vllm-omni's per-voice `quantize` gives it (with TF32 matmuls a product rounds by its shape:
    no batch reproduces it), all of them queued back to back with no wait for the device."""

    tokenizer: Any
    device: torch.device
    cuda_graphs: bool = True
    split_k: bool = False
    # CUDA, own shapes: one graph per mel length (vllm-omni's own calls, captured); a graph per
    # length of 1-6 s is 501 captures for a warm-up (ReferencePreparer turns this on). The graphs
    # share one pool and replay one after another on the caller's stream (replayed side by side
    # on streams of their own, one pool each, they changed a token on an H200: docs/benchmarks.md).
    own_shape_graphs: bool = False
    _graphs: dict[tuple[bool, int, int, int], _Graph] = field(default_factory=dict)
    _own: dict[int, tuple[Any, torch.Tensor, tuple[torch.Tensor, torch.Tensor, torch.Tensor]]] = field(
        default_factory=dict
    )
    _pool: Any = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self._packed = PackedS3(self.tokenizer, self.device, self.split_k)
        self._exact = PackedS3(self.tokenizer, self.device, split_k=False)  # own shapes: no split-K
        self._dim = int(self._packed.encoder.conv2.out_channels)

    @property
    def graphs(self) -> int:
        """CUDA graphs captured so far."""
        return len(self._graphs) + len(self._own)

    def own_graph_frames(self, frames: int) -> bool:
        return self.own_shape_graphs and self.device.type == "cuda" and frames <= MAX_GRAPH_FRAMES

    def capture_own(self, frames: int) -> bool:
        """Capture the own-shapes graph of this mel length unless it exists; True if captured now."""
        with self._lock, torch.inference_mode():
            if frames in self._own or not self.own_graph_frames(frames):
                return False
            self._own[frames] = self._capture_own(frames)
            return True

    def _capture_own(
        self, frames: int
    ) -> tuple[Any, torch.Tensor, tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
        mel = torch.zeros(1, N_MELS, frames, dtype=torch.float32, device=self.device)
        if self._pool is None:
            self._pool = torch.cuda.graph_pool_handle()
        stream = torch.cuda.Stream(self.device)
        stream.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(stream):
            for _ in range(2):
                self._exact.own_shapes(mel)
        torch.cuda.current_stream(self.device).wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=self._pool):
            out = self._exact.own_shapes(mel)
        return graph, mel, out

    def plan(self, frames: list[int], convs_apart: bool = False, own_shapes: bool = False) -> TokenPlan:
        tokens = [s3_tokens(f) for f in frames]
        if own_shapes:
            return TokenPlan(
                tuple(frames), tuple(tokens), None, True, own_shape_ints(tokens), own_shapes=True
            )
        count = len(frames)
        firsts = tokens if convs_apart else frames
        bucket = self.bucket(frames)
        if bucket is not None:
            slots, width, capacity = bucket
            rows, owners = layout(tokens, slots, s3_tokens(width), capacity)
            lengths = np.zeros(slots, dtype=np.int64)
            lengths[:count] = firsts
            ints = np.concatenate((lengths, rows, owners))
            return TokenPlan(tuple(frames), tuple(tokens), bucket, convs_apart, ints)
        rows, owners = layout(tokens, count, s3_tokens(max(frames)), sum(tokens))
        ints = np.concatenate((np.asarray(firsts, dtype=np.int64), rows, owners))
        return TokenPlan(tuple(frames), tuple(tokens), None, convs_apart, ints)

    def bucket(self, frames: list[int]) -> tuple[int, int, int] | None:
        """The graph bucket (slots, padded frames, capacity) of these voices, or None (eagerly)."""
        graphs = self.cuda_graphs and self.device.type == "cuda"
        if not (graphs and len(frames) <= SLOT_BUCKETS[-1] and max(frames) <= MAX_GRAPH_FRAMES):
            return None
        slots = next(s for s in SLOT_BUCKETS if s >= len(frames))
        return slots, padded_frames(max(frames)), padded_capacity(sum(s3_tokens(f) for f in frames))

    def buckets(self, max_voices: int, convs_apart: bool) -> list[tuple[bool, int, int, int]]:
        """Every graph key a plan of up to `max_voices` voices can ask for (what a warm-up captures)."""
        if not (self.cuda_graphs and self.device.type == "cuda"):
            return []
        most = next((s for s in SLOT_BUCKETS if s >= max_voices), SLOT_BUCKETS[-1])
        return [(convs_apart, slots, frames, capacity)
                for slots in SLOT_BUCKETS if slots <= most
                for frames in range(FRAME_QUANTUM, MAX_GRAPH_FRAMES + 1, FRAME_QUANTUM)
                for capacity in capacities(slots, frames)]  # fmt: skip

    def capture(self, key: tuple[bool, int, int, int]) -> bool:
        """Capture this graph unless it exists; True if it was captured now."""
        with self._lock, torch.inference_mode():
            if key in self._graphs:
                return False
            self._graphs[key] = self._capture(*key)
            return True

    def _capture(self, convs_apart: bool, slots: int, frames: int, capacity: int) -> _Graph:
        tokens = s3_tokens(frames)
        rows, owners = layout([tokens] * min(slots, capacity // tokens), slots, tokens, capacity)
        lengths = np.full(slots, tokens if convs_apart else frames, dtype=np.int64)
        ints = torch.from_numpy(np.concatenate((lengths, rows, owners))).to(
            device=self.device, dtype=torch.int64
        )
        firsts, rows_t, owners_t = ints[:slots], ints[slots : slots + capacity], ints[slots + capacity :]
        if convs_apart:
            inputs = torch.zeros(capacity, self._dim, dtype=torch.float32, device=self.device)

            def run() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
                return self._packed.blocks(inputs, firsts, tokens, rows_t, owners_t)
        else:
            inputs = torch.zeros(slots, N_MELS, frames, dtype=torch.float32, device=self.device)

            def run() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
                return self._packed(inputs, firsts, rows_t, owners_t)

        if self._pool is None:
            self._pool = torch.cuda.graph_pool_handle()
        stream = torch.cuda.Stream(self.device)
        stream.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(stream):
            for _ in range(2):  # lazy initialisation and workspaces stay out of the graph
                run()
        torch.cuda.current_stream(self.device).wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=self._pool):
            codes, values, margins = run()
        return _Graph(graph, inputs, ints, codes, values, margins)

    def _check(self, plan: TokenPlan, mels: torch.Tensor | list[torch.Tensor], ints: torch.Tensor) -> None:
        """The inputs as the plan describes them, or ValueError: a graph replays its captured
        shapes, and a copy into its static buffers must not run past them."""
        count = len(plan.frames)
        check_input("S3 plan integers", ints, torch.int64, self.device, (int(plan.ints.size),))
        if plan.convs_apart or plan.own_shapes:
            if not isinstance(mels, list | tuple) or len(mels) != count:
                raise ValueError(
                    f"S3 mels: one [1, {N_MELS}, frames] tensor per voice expected for {count} voices"
                )
            for i, (mel, frames) in enumerate(zip(mels, plan.frames, strict=True)):
                check_input(f"S3 mel of voice {i}", mel, torch.float32, self.device, (1, N_MELS, frames))
            return
        if not isinstance(mels, torch.Tensor):
            raise ValueError("S3 mels: one [voices, 128, frames] tensor expected")
        most = max(plan.frames) if plan.bucket is None else plan.bucket[1]
        check_input("S3 mels", mels, torch.float32, self.device, (count, N_MELS, -1))
        if not max(plan.frames) <= mels.shape[2] <= most:
            raise ValueError(f"S3 mels: {mels.shape[2]} frames for voices of up to {max(plan.frames)} "
                             f"(bucket of {most})")  # fmt: skip

    def run(
        self, plan: TokenPlan, mels: torch.Tensor | list[torch.Tensor], ints: torch.Tensor
    ) -> TokenResult:
        """Codes and margins of the voices' mels: [B, 128, W] (voice b's first frames[b] frames),
        or with `convs_apart` or `own_shapes` one [1, 128, frames[b]] tensor per voice, on the
        device; `ints` is `plan.ints` on the device."""
        self._check(plan, mels, ints)
        if plan.own_shapes:
            assert isinstance(mels, list | tuple)
            return self._run_own_shapes(plan, list(mels), ints)
        count, total = len(plan.frames), sum(plan.tokens)
        with self._lock, torch.inference_mode():
            packed = self._packed.convs_one_by_one(list(mels)) if plan.convs_apart else None
            if plan.bucket is not None:
                key = (plan.convs_apart, *plan.bucket)
                graph = self._graphs.get(key)
                if graph is None:
                    graph = self._graphs[key] = self._capture(*key)
                graph.ints.copy_(ints)
                if packed is not None:
                    graph.inputs[:total].copy_(packed)
                else:
                    assert isinstance(mels, torch.Tensor)
                    graph.inputs[:count, :, : mels.shape[2]].copy_(mels)
                graph.graph.replay()
                # The graph's buffers are overwritten by its next replay (and by the other graphs
                # of the shared pool): what is returned is a copy.
                return TokenResult(
                    graph.codes[:total].clone(), graph.values[:total].clone(), graph.margins[:count].clone()
                )
            firsts, rows, owners = ints[:count], ints[count : count + total], ints[count + total :]
            if packed is not None:
                codes, values, margins = self._packed.blocks(
                    packed, firsts, s3_tokens(max(plan.frames)), rows, owners
                )
            else:
                assert isinstance(mels, torch.Tensor)
                codes, values, margins = self._packed(mels, firsts, rows, owners)
            return TokenResult(codes, values, margins[:count])

    def _run_own_shapes(self, plan: TokenPlan, mels: list[torch.Tensor], ints: torch.Tensor) -> TokenResult:
        """Each voice through the model alone, by vllm-omni's own calls at its shapes and layouts
        (PackedS3.own_shapes), no split-K; queued back to back, nothing read back. `ints` (each
        voice's count, rows and owner) are checked, not needed: one voice alone has no padding."""
        codes, values, margins = [], [], []
        with self._lock, torch.inference_mode():
            for mel in mels:
                frames = int(mel.shape[2])
                if self.own_graph_frames(frames):
                    if frames not in self._own:
                        self._own[frames] = self._capture_own(frames)
                    graph, static, out = self._own[frames]
                    static.copy_(mel)
                    graph.replay()
                    c, v, m = (t.clone() for t in out)  # the next replay overwrites the pool
                else:
                    c, v, m = self._exact.own_shapes(mel)
                codes.append(c)
                values.append(v)
                margins.append(m)
        return TokenResult(torch.cat(codes), torch.cat(values), torch.cat(margins))
