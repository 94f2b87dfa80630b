"""Triton kernels for CAM++: three launches per dense layer instead of about sixteen.

Eager CAM++ is launch-bound: about a thousand small kernels for 1.6 GMAC. Each dense layer here is
1. `bottleneck`: norm + ReLU of the layer input (prologue), the 1x1 conv to 128 channels with
   its folded norm (a GEMM), ReLU and the valid-frame mask (epilogue); and, per time tile, its
   sums over the 100-frame CAM segments the tile touches;
2. `cam_gate`: per (item, segment), the utterance mean plus the segment mean from those sums,
   then the CAM MLP (128 -> 64 -> 32) and the sigmoid: the gate of the segment;
3. `local_conv_gate`: the dilated k3 conv to 32 channels as three shifted GEMMs, multiplied by
   the gate of each frame's segment, stored straight into the block's channel buffer.
(A version that computed the gate inside `local_conv_gate`, one launch fewer per layer, timed
slower on an H200, most likely because every time tile then repeats the MLP: docs/benchmarks.md.)
The transit layers reuse `bottleneck`. Around the dense blocks, `prepare` makes the masked input and the masks in one
launch, `bias_relu_mask` is the epilogue of the bias-free cuDNN convs of the front end (bias,
residual add, ReLU, mask) and `stats_pool` the masked statistics pooling. Tile sizes differ below
and from LARGE_BATCH references. Matmul precision follows torch's matmul TF32 flag.

Only imported where triton is installed (CUDA machines); the torch path in fused_model.py is the
reference these kernels are tested against (on CPU through TRITON_INTERPRET=1).
"""

from __future__ import annotations

import json
import os

import torch
import triton
import triton.language as tl

try:  # grid dependency control (Hopper and newer); absent from older Triton releases
    from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait
except ImportError:  # pragma: no cover - the kernels then never take the PDL branch
    gdc_launch_dependents = gdc_wait = None

SEG = 100

# Tile sizes. Small tiles for small batches: one reference gives a 300-frame, 128-channel GEMM,
# and big tiles would leave most of the GPU's multiprocessors idle.
CONFIG: dict[str, dict[str, int]] = {
    # Tuned on an H200 by benchmarks/speaker_tune.py (docs/benchmarks/speaker-tiles-h200.json).
    "bottleneck_small": {"BLOCK_M": 16, "BLOCK_T": 16, "BLOCK_K": 64, "num_warps": 2, "num_stages": 3},
    "bottleneck_large": {"BLOCK_M": 64, "BLOCK_T": 32, "BLOCK_K": 32, "num_warps": 1, "num_stages": 3},
    "local_small": {"BLOCK_T": 16, "BLOCK_K": 128, "num_warps": 2, "num_stages": 2},
    "local_large": {"BLOCK_T": 16, "BLOCK_K": 32, "num_warps": 2, "num_stages": 2},
    "gate": {"num_warps": 2},
}
LARGE_BATCH = 4  # from this batch size on, the large tiles


def _load_overrides() -> None:
    """OMNI_DEPLOY_SPK_TILES='{"bottleneck_small": {"BLOCK_K": 64}, ...}' retunes for another GPU."""
    raw = os.environ.get("OMNI_DEPLOY_SPK_TILES")
    if not raw:
        return
    for key, value in json.loads(raw).items():
        if isinstance(value, dict):
            CONFIG.setdefault(key, {}).update({k: int(v) for k, v in value.items()})


_load_overrides()


def pdl_supported() -> bool:
    """Whether this Triton and GPU can launch kernels with programmatic dependent launch."""
    if gdc_wait is None or os.environ.get("TRITON_INTERPRET") == "1" or not torch.cuda.is_available():
        return False
    try:
        from triton.backends.nvidia.compiler import CUDAOptions
    except ImportError:
        return False
    return "launch_pdl" in CUDAOptions.__dataclass_fields__ and torch.cuda.get_device_capability()[0] >= 9


# Programmatic dependent launch (PDL): each kernel may be launched while the one before it still
# runs (its programs wait at the top for that kernel's results, then let the next kernel launch),
# which hides the launch gap between the small dependent kernels that bound the latency of a few
# references. On an H200 it took one reference from 1.10 to 1.00 ms of graph replay but 32 from
# 5.28 to 5.54 ms (early programs hold multiprocessor slots the running kernel's later waves
# need), with identical outputs (docs/benchmarks.md). So by default it is used below LARGE_BATCH
# only; OMNI_DEPLOY_SPK_PDL=0 turns it off, =1 on at every batch size.
PDL_MODE = os.environ.get("OMNI_DEPLOY_SPK_PDL", "auto")
PDL_SUPPORTED = pdl_supported()


def _pdl(batch: int) -> dict[str, bool]:
    on = PDL_SUPPORTED and (PDL_MODE == "1" or (PDL_MODE == "auto" and batch < LARGE_BATCH))
    return {"PDL": True, "launch_pdl": True} if on else {"PDL": False}


def _config(kind: str, batch: int) -> dict[str, int]:
    return CONFIG[f"{kind}_{'large' if batch >= LARGE_BATCH else 'small'}"]


class KernelInputError(ValueError):
    """A launch refused before it could read or write out of bounds (the guard answers it)."""


def check(
    kernel: str,
    name: str,
    t: torch.Tensor,
    device: torch.device,
    dtype: torch.dtype = torch.float32,
    shape: tuple[int | None, ...] | None = None,
    contiguous: bool = False,
    unit_last: bool = False,
) -> None:
    """Refuse a launch whose tensor `name` is not what the kernel's pointer arithmetic assumes:
    its dtype (a bf16 buffer read as float32 reads twice as far), its device, its shape (None: any
    size on that axis), contiguity or a unit stride along the last axis. Raises KernelInputError."""
    problem = None
    if not isinstance(t, torch.Tensor):
        problem = f"is {type(t).__name__}, not a tensor"
    elif t.dtype != dtype:
        problem = f"has dtype {str(t.dtype).replace('torch.', '')}, needs {str(dtype).replace('torch.', '')}"
    elif t.device != device:
        problem = f"is on {t.device}, the launch on {device}"
    elif shape is not None and (
        t.dim() != len(shape)
        or any(want is not None and got != want for got, want in zip(t.shape, shape, strict=True))
    ):
        problem = f"has shape {list(t.shape)}, needs {['*' if w is None else w for w in shape]}"
    elif contiguous and not t.is_contiguous():
        problem = "is not contiguous"
    elif unit_last and t.dim() and t.shape[-1] > 1 and t.stride(-1) != 1:
        problem = "has no unit stride along its last axis"
    if problem is not None:
        raise KernelInputError(f"{kernel}: {name} {problem}")


@triton.jit
def _bottleneck_kernel(
    x_ptr,
    stride_xb,
    stride_xc,
    scale_ptr,
    shift_ptr,
    w_ptr,
    bias_ptr,
    mask_ptr,
    stride_mb,
    out_ptr,
    stride_ob,
    stride_oc,
    seg_ptr,
    stride_sb,
    stride_sc,
    C_IN,
    M,
    T,
    HAS_BIAS: tl.constexpr,
    POST_RELU: tl.constexpr,
    USE_MASK: tl.constexpr,
    WRITE_SEGS: tl.constexpr,
    SEG_LEN: tl.constexpr,
    PRECISION: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_T: tl.constexpr,
    BLOCK_K: tl.constexpr,
    PDL: tl.constexpr,
):
    if PDL:  # launched early: the previous kernel's results first, then the next kernel may launch
        gdc_wait()
        gdc_launch_dependents()
    pid_t = tl.program_id(0)
    pid_m = tl.program_id(1)
    b = tl.program_id(2)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_t = pid_t * BLOCK_T + tl.arange(0, BLOCK_T)
    m_ok = offs_m < M
    t_ok = offs_t < T
    acc = tl.zeros((BLOCK_M, BLOCK_T), dtype=tl.float32)
    for k0 in range(0, C_IN, BLOCK_K):
        offs_k = k0 + tl.arange(0, BLOCK_K)
        k_ok = offs_k < C_IN
        w = tl.load(
            w_ptr + offs_m[:, None] * C_IN + offs_k[None, :], mask=m_ok[:, None] & k_ok[None, :], other=0.0
        )
        x = tl.load(
            x_ptr + b * stride_xb + offs_k[:, None] * stride_xc + offs_t[None, :],
            mask=k_ok[:, None] & t_ok[None, :],
            other=0.0,
        )
        scale = tl.load(scale_ptr + offs_k, mask=k_ok, other=0.0)
        shift = tl.load(shift_ptr + offs_k, mask=k_ok, other=0.0)
        x = tl.maximum(x * scale[:, None] + shift[:, None], 0.0)
        acc += tl.dot(w, x, input_precision=PRECISION)
    if HAS_BIAS:
        acc += tl.load(bias_ptr + offs_m, mask=m_ok, other=0.0)[:, None]
    if POST_RELU:
        acc = tl.maximum(acc, 0.0)
    if USE_MASK:
        acc *= tl.load(mask_ptr + b * stride_mb + offs_t, mask=t_ok, other=0.0)[None, :]
    tl.store(
        out_ptr + b * stride_ob + offs_m[:, None] * stride_oc + offs_t[None, :],
        acc,
        mask=m_ok[:, None] & t_ok[None, :],
    )
    if WRITE_SEGS:
        # This tile's sums over the (at most two, BLOCK_T <= SEG_LEN) CAM segments it touches,
        # stored per tile so the gate needs no extra reduction launch and stays deterministic.
        first = (pid_t * BLOCK_T) // SEG_LEN
        segment = offs_t // SEG_LEN
        in_first = ((segment == first) & t_ok)[None, :]
        in_second = ((segment == first + 1) & t_ok)[None, :]
        base = seg_ptr + b * stride_sb + offs_m * stride_sc + pid_t * 2
        tl.store(base, tl.sum(tl.where(in_first, acc, 0.0), axis=1), mask=m_ok)
        tl.store(base + 1, tl.sum(tl.where(in_second, acc, 0.0), axis=1), mask=m_ok)


@triton.jit
def _cam_gate_kernel(
    seg_ptr,
    stride_sb,
    stride_sc,
    len_ptr,
    w1_ptr,
    b1_ptr,
    w2_ptr,
    b2_ptr,
    g_ptr,
    stride_gb,
    stride_gc,
    TILES,
    C: tl.constexpr,
    HIDDEN: tl.constexpr,
    OUT: tl.constexpr,
    SEG_LEN: tl.constexpr,
    TILE: tl.constexpr,
    TILES_P2: tl.constexpr,
    PDL: tl.constexpr,
):
    if PDL:  # launched early: the previous kernel's results first, then the next kernel may launch
        gdc_wait()
        gdc_launch_dependents()
    s = tl.program_id(0)
    b = tl.program_id(1)
    valid = tl.load(len_ptr + b).to(tl.float32)
    offs_c = tl.arange(0, C)
    offs_k = tl.arange(0, TILES_P2)
    ptrs = seg_ptr + b * stride_sb + offs_c[:, None] * stride_sc + offs_k[None, :] * 2
    ok = (offs_k < TILES)[None, :]
    part0 = tl.load(ptrs, mask=ok, other=0.0)  # each tile's sum over its first segment
    part1 = tl.load(ptrs + 1, mask=ok, other=0.0)  # and over the next one
    first = ((offs_k * TILE) // SEG_LEN)[None, :]
    total = tl.sum(part0 + part1, axis=1)
    seg = tl.sum(tl.where(first == s, part0, 0.0) + tl.where(first + 1 == s, part1, 0.0), axis=1)
    count = tl.minimum(tl.maximum(valid - s * SEG_LEN, 1.0), SEG_LEN * 1.0)
    context = total / valid + seg / count
    offs_h = tl.arange(0, HIDDEN)
    w1 = tl.load(w1_ptr + offs_h[:, None] * C + offs_c[None, :])
    z = tl.maximum(tl.sum(w1 * context[None, :], axis=1) + tl.load(b1_ptr + offs_h), 0.0)
    offs_o = tl.arange(0, OUT)
    w2 = tl.load(w2_ptr + offs_o[:, None] * HIDDEN + offs_h[None, :])
    gate = tl.sigmoid(tl.sum(w2 * z[None, :], axis=1) + tl.load(b2_ptr + offs_o))
    tl.store(g_ptr + b * stride_gb + offs_o * stride_gc + s, gate)


@triton.jit
def _local_conv_gate_kernel(
    h_ptr,
    stride_hb,
    stride_hc,
    w_ptr,
    g_ptr,
    stride_gb,
    stride_gc,
    out_ptr,
    stride_ob,
    stride_oc,
    T,
    DIL,
    C: tl.constexpr,
    OUT: tl.constexpr,
    SEG_LEN: tl.constexpr,
    PRECISION: tl.constexpr,
    BLOCK_T: tl.constexpr,
    BLOCK_K: tl.constexpr,
    PDL: tl.constexpr,
):
    if PDL:  # launched early: the previous kernel's results first, then the next kernel may launch
        gdc_wait()
        gdc_launch_dependents()
    pid_t = tl.program_id(0)
    b = tl.program_id(1)
    offs_t = pid_t * BLOCK_T + tl.arange(0, BLOCK_T)
    offs_o = tl.arange(0, OUT)
    acc = tl.zeros((OUT, BLOCK_T), dtype=tl.float32)
    for tap in tl.static_range(3):
        src = offs_t + (tap - 1) * DIL
        ok = (src >= 0) & (src < T)
        for k0 in range(0, C, BLOCK_K):
            offs_k = k0 + tl.arange(0, BLOCK_K)
            w = tl.load(w_ptr + tap * OUT * C + offs_o[:, None] * C + offs_k[None, :])
            h = tl.load(
                h_ptr + b * stride_hb + offs_k[:, None] * stride_hc + src[None, :],
                mask=ok[None, :],
                other=0.0,
            )
            acc += tl.dot(w, h, input_precision=PRECISION)
    t_ok = offs_t < T
    gate = tl.load(
        g_ptr + b * stride_gb + offs_o[:, None] * stride_gc + (offs_t // SEG_LEN)[None, :],
        mask=t_ok[None, :],
        other=0.0,
    )
    tl.store(
        out_ptr + b * stride_ob + offs_o[:, None] * stride_oc + offs_t[None, :],
        acc * gate,
        mask=t_ok[None, :],
    )


@triton.jit
def _prepare_kernel(
    f_ptr,
    start_ptr,
    len_ptr,
    x_ptr,
    m1_ptr,
    m2_ptr,
    half_ptr,
    T,
    HALF,
    ROWS,
    FEAT: tl.constexpr,
    FEAT_P2: tl.constexpr,
    BLOCK_T: tl.constexpr,
    PACKED: tl.constexpr,
    PDL: tl.constexpr,
):
    if PDL:  # launched early: the previous kernel's results first, then the next kernel may launch
        gdc_wait()
        gdc_launch_dependents()
    pid_t = tl.program_id(0)
    b = tl.program_id(1)
    # Lengths past the padded width, or rows outside the input, are never read: a header written
    # wrong (or by a caller that broke the layout) gives a wrong embedding, which the guard
    # rejects, never an access out of bounds.
    n = tl.minimum(tl.maximum(tl.load(len_ptr + b), 0), T)
    # Padded input: item b's frames start at row b * T; packed input: at the row given for it.
    if PACKED:  # noqa: SIM108 (a statement: Triton compiles only the branch the constant picks)
        first = tl.load(start_ptr + b)
    else:
        first = b * T
    offs_t = pid_t * BLOCK_T + tl.arange(0, BLOCK_T)
    t_ok = offs_t < T
    valid = (offs_t < n) & t_ok
    rows = first + offs_t
    offs_f = tl.arange(0, FEAT_P2)
    f_ok = offs_f < FEAT
    # Frames past the length are read as zero (they may hold anything, NaN included).
    v = tl.load(
        f_ptr + rows[None, :].to(tl.int64) * FEAT + offs_f[:, None],
        mask=f_ok[:, None] & (valid & (rows >= 0) & (rows < ROWS))[None, :],
        other=0.0,
    )
    tl.store(
        x_ptr + b * FEAT * T + offs_f[:, None] * T + offs_t[None, :], v, mask=f_ok[:, None] & t_ok[None, :]
    )
    tl.store(m1_ptr + b * T + offs_t, valid.to(tl.float32), mask=t_ok)
    half = (n + 1) // 2
    tl.store(m2_ptr + b * HALF + offs_t, (offs_t < half).to(tl.float32), mask=offs_t < HALF)
    if pid_t == 0:
        tl.store(half_ptr + b, half)


@triton.jit
def _bias_relu_mask_kernel(
    x_ptr,
    r_ptr,
    bias_ptr,
    m_ptr,
    out_ptr,
    stride_ob,
    stride_oc,
    C,
    S,
    T,
    HAS_RES: tl.constexpr,
    HAS_MASK: tl.constexpr,
    BLOCK: tl.constexpr,
    PDL: tl.constexpr,
):
    if PDL:  # launched early: the previous kernel's results first, then the next kernel may launch
        gdc_wait()
        gdc_launch_dependents()
    pid_s = tl.program_id(0)
    c = tl.program_id(1)
    b = tl.program_id(2)
    offs = pid_s * BLOCK + tl.arange(0, BLOCK)
    ok = offs < S
    src = (b * C + c).to(tl.int64) * S + offs
    v = tl.load(x_ptr + src, mask=ok, other=0.0) + tl.load(bias_ptr + c)
    if HAS_RES:
        v += tl.load(r_ptr + src, mask=ok, other=0.0)
    v = tl.maximum(v, 0.0)
    if HAS_MASK:
        v *= tl.load(m_ptr + b * T + offs % T, mask=ok, other=0.0)
    tl.store(out_ptr + b.to(tl.int64) * stride_ob + c * stride_oc + offs, v, mask=ok)


@triton.jit
def _stats_pool_kernel(
    x_ptr,
    stride_xb,
    stride_xc,
    len_ptr,
    out_ptr,
    C,
    T,
    BLOCK_C: tl.constexpr,
    BLOCK_T: tl.constexpr,
    PDL: tl.constexpr,
):
    if PDL:  # launched early: the previous kernel's results first, then the next kernel may launch
        gdc_wait()
        gdc_launch_dependents()
    pid_c = tl.program_id(0)
    b = tl.program_id(1)
    n = tl.minimum(tl.load(len_ptr + b), T)  # never past the frames there are
    count = n.to(tl.float32)
    offs_c = pid_c * BLOCK_C + tl.arange(0, BLOCK_C)
    c_ok = offs_c < C
    base = x_ptr + b * stride_xb + offs_c[:, None] * stride_xc
    total = tl.zeros((BLOCK_C,), dtype=tl.float32)
    for t0 in range(0, T, BLOCK_T):
        offs_t = t0 + tl.arange(0, BLOCK_T)
        ok = c_ok[:, None] & (offs_t < n)[None, :]
        total += tl.sum(tl.load(base + offs_t[None, :], mask=ok, other=0.0), axis=1)
    mean = total / count
    # Two passes (the frames are in cache by now): the variance of centred values, as in torch.
    squares = tl.zeros((BLOCK_C,), dtype=tl.float32)
    for t0 in range(0, T, BLOCK_T):
        offs_t = t0 + tl.arange(0, BLOCK_T)
        ok = c_ok[:, None] & (offs_t < n)[None, :]
        d = tl.where(ok, tl.load(base + offs_t[None, :], mask=ok, other=0.0) - mean[:, None], 0.0)
        squares += tl.sum(d * d, axis=1)
    std = tl.sqrt(squares / (count - 1.0))
    tl.store(out_ptr + b * 2 * C + offs_c, mean, mask=c_ok)
    tl.store(out_ptr + b * 2 * C + C + offs_c, std, mask=c_ok)


def _precision() -> str:
    return "tf32" if torch.backends.cuda.matmul.allow_tf32 else "ieee"


def bottleneck(
    x: torch.Tensor,
    scale: torch.Tensor,
    shift: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    out: torch.Tensor,
    mask: torch.Tensor | None = None,
    post_relu: bool = False,
    seg_parts: torch.Tensor | None = None,
) -> None:
    """out[b] = [mask *] [relu](weight @ relu(x[b] * scale + shift) [+ bias]); time stride 1.

    With `seg_parts` ([B, M, tiles, 2], see `segment_tiles`), also each time tile's sums over the
    CAM segments it touches, for `cam_gate`.
    """
    batch, c_in, frames = x.shape
    m = weight.shape[0]
    dev = x.device
    check("bottleneck", "x", x, dev, shape=(batch, c_in, frames), unit_last=True)
    check("bottleneck", "scale", scale, dev, shape=(c_in,), contiguous=True)
    check("bottleneck", "shift", shift, dev, shape=(c_in,), contiguous=True)
    check("bottleneck", "weight", weight, dev, shape=(m, c_in), contiguous=True)
    if bias is not None:
        check("bottleneck", "bias", bias, dev, shape=(m,), contiguous=True)
    check("bottleneck", "out", out, dev, shape=(batch, m, frames), unit_last=True)
    if mask is not None:
        check("bottleneck", "mask", mask, dev, shape=(batch, frames), unit_last=True)
    if seg_parts is not None:
        tiles, _ = segment_tiles(batch, frames)
        check("bottleneck", "seg_parts", seg_parts, dev, shape=(batch, m, tiles, 2))
        if seg_parts.stride(3) != 1 or seg_parts.stride(2) != 2:
            raise KernelInputError("bottleneck: seg_parts is not packed along its last two axes")
    cfg = _config("bottleneck", batch)
    grid = (triton.cdiv(frames, cfg["BLOCK_T"]), triton.cdiv(m, cfg["BLOCK_M"]), batch)
    _bottleneck_kernel[grid](
        x,
        x.stride(0),
        x.stride(1),
        scale,
        shift,
        weight,
        bias if bias is not None else scale,
        mask if mask is not None else x,
        mask.stride(0) if mask is not None else 0,
        out,
        out.stride(0),
        out.stride(1),
        seg_parts if seg_parts is not None else out,
        seg_parts.stride(0) if seg_parts is not None else 0,
        seg_parts.stride(1) if seg_parts is not None else 0,
        c_in,
        m,
        frames,
        HAS_BIAS=bias is not None,
        POST_RELU=post_relu,
        USE_MASK=mask is not None,
        WRITE_SEGS=seg_parts is not None,
        SEG_LEN=SEG,
        PRECISION=_precision(),
        **cfg,
        **_pdl(batch),
    )


def segment_tiles(batch: int, frames: int) -> tuple[int, int]:
    """(tiles, tile width) of the bottleneck's time axis, which `seg_parts` is laid out by."""
    tile = _config("bottleneck", batch)["BLOCK_T"]
    return triton.cdiv(frames, tile), tile


def cam_gate(
    seg_parts: torch.Tensor,
    lengths: torch.Tensor,
    w1: torch.Tensor,
    b1: torch.Tensor,
    w2: torch.Tensor,
    b2: torch.Tensor,
    gate: torch.Tensor,
) -> None:
    """gate[b, :, s] = sigmoid(w2 @ relu(w1 @ (utterance mean + segment s mean) + b1) + b2).

    `seg_parts` [B, C, tiles, 2] holds the bottleneck's per-tile segment sums of its masked output.
    """
    batch, channels, tiles, _ = seg_parts.shape
    _, tile = segment_tiles(batch, 1)
    segments = gate.shape[2]
    dev, hidden, outs = seg_parts.device, w1.shape[0], w2.shape[0]
    check("cam_gate", "seg_parts", seg_parts, dev, shape=(batch, channels, tiles, 2))
    if seg_parts.stride(3) != 1 or seg_parts.stride(2) != 2:
        raise KernelInputError("cam_gate: seg_parts is not packed along its last two axes")
    if tiles * tile < segments * SEG:
        raise KernelInputError(f"cam_gate: {tiles} tiles of {tile} frames do not cover {segments} segments")
    check("cam_gate", "lengths", lengths, dev, torch.int64, shape=(batch,), contiguous=True)
    check("cam_gate", "w1", w1, dev, shape=(hidden, channels), contiguous=True)
    check("cam_gate", "b1", b1, dev, shape=(hidden,), contiguous=True)
    check("cam_gate", "w2", w2, dev, shape=(outs, hidden), contiguous=True)
    check("cam_gate", "b2", b2, dev, shape=(outs,), contiguous=True)
    check("cam_gate", "gate", gate, dev, shape=(batch, outs, segments), unit_last=True)
    _cam_gate_kernel[(segments, batch)](
        seg_parts,
        seg_parts.stride(0),
        seg_parts.stride(1),
        lengths,
        w1,
        b1,
        w2,
        b2,
        gate,
        gate.stride(0),
        gate.stride(1),
        tiles,
        C=channels,
        HIDDEN=w1.shape[0],
        OUT=w2.shape[0],
        SEG_LEN=SEG,
        TILE=tile,
        TILES_P2=triton.next_power_of_2(tiles),
        num_warps=CONFIG["gate"]["num_warps"],
        **_pdl(batch),
    )


def local_conv_gate(
    h: torch.Tensor, weight_taps: torch.Tensor, dilation: int, gate: torch.Tensor, out: torch.Tensor
) -> None:
    """out = conv1d(h, k=3, dilation) * gate[segment of each frame]; weight_taps is [3, 32, C]."""
    batch, channels, frames = h.shape
    dev, outs = h.device, weight_taps.shape[1]
    check("local_conv_gate", "h", h, dev, shape=(batch, channels, frames), unit_last=True)
    check("local_conv_gate", "weight_taps", weight_taps, dev, shape=(3, outs, channels), contiguous=True)
    check("local_conv_gate", "gate", gate, dev, shape=(batch, outs, -(-frames // SEG)), unit_last=True)
    check("local_conv_gate", "out", out, dev, shape=(batch, outs, frames), unit_last=True)
    cfg = _config("local", batch)
    grid = (triton.cdiv(frames, cfg["BLOCK_T"]), batch)
    _local_conv_gate_kernel[grid](
        h,
        h.stride(0),
        h.stride(1),
        weight_taps,
        gate,
        gate.stride(0),
        gate.stride(1),
        out,
        out.stride(0),
        out.stride(1),
        frames,
        dilation,
        C=channels,
        OUT=weight_taps.shape[1],
        SEG_LEN=SEG,
        PRECISION=_precision(),
        **cfg,
        **_pdl(batch),
    )


def prepare(
    feats: torch.Tensor,
    lengths: torch.Tensor,
    starts: torch.Tensor | None = None,
    frames: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """One launch for the model's inputs: ([B, 1, 80, T] features with frames past each length
    zeroed, [B, T] frame mask, [B, T/2] mask after the stride-2 TDNN, [B] lengths after it).

    `feats` is [B, T, 80] padded, or with `starts` and `frames`, [N, 80] packed: item b's frames
    are rows starts[b] .. starts[b] + lengths[b] - 1 (gathered here, so no scatter launch).
    """
    feats = feats.contiguous()
    dev = feats.device
    if starts is None:
        check("prepare", "feats", feats, dev, shape=(None, None, None))
        batch, frames, feat = feats.shape
    else:
        if frames is None:
            raise KernelInputError("prepare: packed features need the padded frame count")
        check("prepare", "feats", feats, dev, shape=(None, None))
        batch, feat = lengths.shape[0], feats.shape[1]
        check("prepare", "starts", starts, dev, torch.int64, shape=(batch,), contiguous=True)
    check("prepare", "lengths", lengths, dev, torch.int64, shape=(batch,), contiguous=True)
    half = frames // 2
    x = feats.new_empty(batch, 1, feat, frames)
    mask1 = feats.new_empty(batch, frames)
    mask2 = feats.new_empty(batch, half)
    half_lengths = torch.empty_like(lengths)
    block = 32
    _prepare_kernel[(triton.cdiv(frames, block), batch)](
        feats,
        starts if starts is not None else lengths,
        lengths,
        x,
        mask1,
        mask2,
        half_lengths,
        frames,
        half,
        feats.shape[0] * (1 if starts is not None else frames),
        FEAT=feat,
        FEAT_P2=triton.next_power_of_2(feat),
        BLOCK_T=block,
        PACKED=starts is not None,
        num_warps=4,
        **_pdl(batch),
    )
    return x, mask1, mask2, half_lengths


def bias_relu_mask(
    x: torch.Tensor,
    bias: torch.Tensor,
    mask: torch.Tensor | None = None,
    residual: torch.Tensor | None = None,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """out = relu(x + bias[c] [+ residual]) [* mask[b, t]] for contiguous [B, C, ..., T] x.

    The epilogue of a bias-free cuDNN conv in one pass (torch adds a conv's bias in a kernel of
    its own). `out` defaults to x (in place); it may be a channel slice of a wider buffer.
    """
    out = x if out is None else out
    if not x.is_contiguous() or (residual is not None and not residual.is_contiguous()):
        raise KernelInputError("bias_relu_mask needs contiguous inputs")
    if out.shape != x.shape or not out[0, 0].is_contiguous():
        raise KernelInputError("bias_relu_mask: out must match x, contiguous within each channel")
    dev = x.device
    check("bias_relu_mask", "x", x, dev, contiguous=True)
    check("bias_relu_mask", "out", out, dev)
    batch, channels = x.shape[:2]
    check("bias_relu_mask", "bias", bias, dev, shape=(channels,), contiguous=True)
    if residual is not None:
        check("bias_relu_mask", "residual", residual, dev, shape=tuple(x.shape), contiguous=True)
    if mask is not None:
        check("bias_relu_mask", "mask", mask, dev, shape=(batch, x.shape[-1]), contiguous=True)
    per_channel = x[0, 0].numel()
    block = min(1024, triton.next_power_of_2(per_channel))
    _bias_relu_mask_kernel[(triton.cdiv(per_channel, block), channels, batch)](
        x,
        residual if residual is not None else x,
        bias,
        mask if mask is not None else x,
        out,
        out.stride(0),
        out.stride(1),
        channels,
        per_channel,
        x.shape[-1],
        HAS_RES=residual is not None,
        HAS_MASK=mask is not None,
        BLOCK=block,
        num_warps=4,
        **_pdl(batch),
    )
    return out


def stats_pool(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """[B, 2C]: per channel, mean and unbiased standard deviation over each item's valid frames."""
    batch, channels, frames = x.shape
    if x.stride(2) != 1:
        raise KernelInputError("stats_pool needs unit stride in time")
    check("stats_pool", "x", x, x.device, shape=(batch, channels, frames))
    check("stats_pool", "lengths", lengths, x.device, torch.int64, shape=(batch,), contiguous=True)
    out = x.new_empty(batch, 2 * channels)
    block_c = 32
    _stats_pool_kernel[(triton.cdiv(channels, block_c), batch)](
        x,
        x.stride(0),
        x.stride(1),
        lengths,
        out,
        channels,
        frames,
        BLOCK_C=block_c,
        BLOCK_T=64,
        num_warps=4,
        **_pdl(batch),
    )
    return out
