"""Run in a subprocess with TRITON_INTERPRET=1: each Triton kernel against its torch definition."""

from __future__ import annotations

import sys

import torch
import torch.nn.functional as F

from omni_deploy.speaker import triton_kernels as tk


def check_front_and_pooling(g: torch.Generator) -> None:
    lengths = torch.tensor([400, 255, 5])
    feats = torch.randn(3, 400, 80, generator=g)
    feats[1, 300:] = float("nan")  # padded frames may hold anything
    x, mask1, mask2, half = tk.prepare(feats, lengths)
    steps = torch.arange(400)
    ref_mask1 = (steps[None] < lengths[:, None]).float()
    assert torch.equal(mask1, ref_mask1)
    assert torch.equal(half, (lengths + 1) // 2)
    assert torch.equal(mask2, (steps[None, :200] < half[:, None]).float())
    ref_x = torch.where(ref_mask1[:, :, None] > 0, feats, 0.0).transpose(1, 2)[:, None]
    assert torch.equal(x, ref_x)
    # The same items packed back to back (in another order, NaN after them) give the same inputs.
    packed = torch.cat([feats[2, :5], feats[0], feats[1, :255], torch.full((7, 80), float("nan"))])
    starts = torch.tensor([5, 405, 0])
    packed_out = tk.prepare(packed, lengths, starts, 400)
    for got, expected in zip(packed_out, (x, mask1, mask2, half), strict=True):
        assert torch.equal(got, expected)

    y = torch.randn(3, 4, 5, 400, generator=g)
    r = torch.randn(3, 4, 5, 400, generator=g)
    bias = torch.randn(4, generator=g)
    expect = (y + bias[:, None, None] + r).relu() * mask1[:, None, None, :]
    tk.bias_relu_mask(y, bias, mask1, r)
    assert torch.allclose(y, expect, atol=1e-6)
    z = torch.randn(3, 4, 5, 400, generator=g)
    expect = (z + bias[:, None, None]).relu() * mask1[:, None, None, :]
    assert torch.allclose(tk.bias_relu_mask(z, bias, mask1), expect, atol=1e-6)
    # Into a channel slice of a wider buffer, unmasked (the TDNN's output into the dense block).
    t = torch.randn(3, 4, 200, generator=g)
    wide = torch.full((3, 9, 200), 7.0)
    tk.bias_relu_mask(t, bias, out=wide[:, 2:6])
    assert torch.allclose(wide[:, 2:6], (t + bias[:, None]).relu(), atol=1e-6)
    assert (wide[:, :2] == 7.0).all() and (wide[:, 6:] == 7.0).all()

    pooled_in = torch.randn(3, 70, 200, generator=g)
    stats = tk.stats_pool(pooled_in, half)
    for i, n in enumerate(half.tolist()):
        valid = pooled_in[i, :, :n]
        assert torch.allclose(stats[i, :70], valid.mean(-1), atol=1e-5)
        if n > 1:
            assert torch.allclose(stats[i, 70:], valid.std(-1), atol=1e-5)


def main() -> int:
    g = torch.Generator().manual_seed(0)
    torch.backends.cuda.matmul.allow_tf32 = False
    batch, c_in, frames, segments = 2, 48, 200, 2
    buf = torch.randn(batch, c_in + 40, frames, generator=g)
    x = buf[:, :c_in]  # a channel slice of a wider buffer, as in the dense blocks
    scale, shift = torch.rand(c_in, generator=g) + 0.5, torch.randn(c_in, generator=g)
    weight, bias = torch.randn(128, c_in, generator=g) * 0.1, torch.randn(128, generator=g)
    lengths = torch.tensor([200, 137])
    mask = (torch.arange(frames)[None] < lengths[:, None]).float()
    h = torch.empty(batch, 128, frames)
    tiles, tile = tk.segment_tiles(batch, frames)
    parts = torch.full((batch, 128, tiles, 2), float("nan"))
    tk.bottleneck(x, scale, shift, weight, bias, h, mask, post_relu=True, seg_parts=parts)
    ref = (
        F.conv1d((x * scale[:, None] + shift[:, None]).relu(), weight[..., None], bias).relu() * mask[:, None]
    )
    assert torch.allclose(h, ref, atol=1e-4), (h - ref).abs().max()

    seg_sums = h.view(batch, 128, segments, 100).sum(-1)
    # Per tile: sums over the segment the tile starts in and over the next one.
    first = torch.arange(tiles) * tile // 100
    regrouped = torch.zeros(batch, 128, segments + 1)
    regrouped.index_add_(2, first, parts[..., 0])
    regrouped.index_add_(2, first + 1, parts[..., 1])
    assert torch.allclose(regrouped[..., :segments], seg_sums, atol=1e-3), (
        (regrouped[..., :segments] - seg_sums).abs().max()
    )
    assert torch.allclose(regrouped[..., segments], torch.zeros(()), atol=0)
    w1, b1 = torch.randn(64, 128, generator=g) * 0.1, torch.randn(64, generator=g)
    w2, b2 = torch.randn(32, 64, generator=g) * 0.1, torch.randn(32, generator=g)
    counts = (lengths[:, None] - torch.arange(segments)[None] * 100).clamp(1, 100).float()
    context = seg_sums.sum(-1, keepdim=True) / lengths[:, None, None] + seg_sums / counts[:, None, :]
    ref_gate = torch.sigmoid(F.conv1d(F.conv1d(context, w1[..., None], b1).relu(), w2[..., None], b2))

    gate = torch.empty(batch, 32, segments)
    tk.cam_gate(parts, lengths, w1, b1, w2, b2, gate)
    assert torch.allclose(gate, ref_gate, atol=1e-5), (gate - ref_gate).abs().max()

    local = torch.randn(32, 128, 3, generator=g) * 0.1
    out = buf[:, c_in : c_in + 32]
    tk.local_conv_gate(h, local.permute(2, 0, 1).contiguous(), 2, gate, out)
    y = F.conv1d(h, local, padding=2, dilation=2)
    ref_out = (y.view(batch, 32, segments, 100) * ref_gate[..., None]).view(batch, 32, frames)
    assert torch.allclose(buf[:, c_in : c_in + 32], ref_out, atol=1e-4), (out - ref_out).abs().max()

    check_front_and_pooling(g)
    print("triton kernels match torch")
    return 0


if __name__ == "__main__":
    sys.exit(main())
