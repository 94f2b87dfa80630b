"""CAM++ in fused form with exact batching of references of different lengths.

Batch norms the export folded into a conv arrive as that conv's bias; the rest are per-channel
affines. References are right-padded to one length and every operation that is not pointwise in
time is masked by each item's valid length: padded frames are re-zeroed before every temporal
conv, and the CAM context means, the segment means and the statistics pooling count valid frames
only. A batched embedding therefore equals the one-by-one embedding to rounding.

Shapes are static for a given padded length and the masks come from a device tensor of lengths,
so one CUDA graph captured for a padded length serves every length up to it. The padded input
length is a multiple of 200 frames, so that after the stride-2 TDNN the time axis splits into
whole 100-frame CAM segments and segment pooling is a reshape and a sum.

The dense blocks write each layer's 32 new channels into one preallocated buffer instead of
concatenating (which copies the whole growing tensor at every layer), and the CAM gate is
computed per segment (its input is constant within a segment) rather than per frame.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from omni_deploy.speaker.architecture import inventory
from omni_deploy.speaker.onnx_weights import CampplusWeights, SpeakerModelError
from omni_deploy.speaker.reference_model import BLOCKS, BOTTLENECK, GROWTH, INIT_CHANNELS, SEG_LEN

FRAME_QUANTUM = 2 * SEG_LEN  # padded input lengths are multiples of this


def padded_length(frames: int) -> int:
    return max(FRAME_QUANTUM, -(-frames // FRAME_QUANTUM) * FRAME_QUANTUM)


def unpack(packed: torch.Tensor, starts: torch.Tensor, lengths: torch.Tensor, width: int) -> torch.Tensor:
    """[B, width, ...] right-padded items from rows starts[b] .. starts[b] + lengths[b] - 1 of
    `packed` [N, ...]; zero past each length (what is there may be another item, or anything)."""
    steps = torch.arange(width, device=packed.device)
    index = (starts[:, None] + steps[None, :]).clamp_(0, packed.shape[0] - 1)
    valid = steps[None, :] < lengths[:, None]
    rows = packed[index]
    return torch.where(valid.view(valid.shape + (1,) * (rows.dim() - 2)), rows, 0.0)


@dataclass
class Conv:
    weight: torch.Tensor
    bias: torch.Tensor | None


@dataclass
class Affine:
    scale: torch.Tensor  # shaped to broadcast over [B, C, T] (or [B, C, F, T] in the head)
    shift: torch.Tensor


@dataclass
class DenseLayer:
    pre: Affine
    linear1: Conv  # nonlinear2's norm folded in
    local: Conv
    ctx1: Conv
    ctx2: Conv
    dilation: int


class WeightSet:
    """Checked torch tensors for every layer, on one device, FP32."""

    def __init__(self, weights: CampplusWeights, device: torch.device) -> None:
        self.device = device
        inv = inventory()
        self._weights = weights
        self._used_convs: set[str] = set()
        self._used_affines: set[str] = set()
        extra_convs = set(weights.convs) - set(inv.conv_shapes)
        extra_affines = set(weights.affines) - set(inv.affine_sizes)
        if extra_convs or extra_affines:
            names = sorted(extra_convs | extra_affines)
            raise SpeakerModelError(
                f"{weights.source}: layers that CAM++ does not have: {', '.join(names[:5])}"
                + (" ..." if len(names) > 5 else "")
            )
        self.inv = inv

    def conv(self, scope: str) -> Conv:
        found = self._weights.convs.get(scope)
        if found is None:
            raise SpeakerModelError(f"{self._weights.source}: missing conv layer {scope!r}")
        expected = self.inv.conv_shapes[scope]
        if tuple(found.weight.shape) != expected:
            raise SpeakerModelError(
                f"{self._weights.source}: {scope} has weight shape {tuple(found.weight.shape)}, "
                f"CAM++ (80 mel bins, 192-d embedding) needs {expected}"
            )
        if found.bias is not None and found.bias.shape != (expected[0],):
            raise SpeakerModelError(f"{self._weights.source}: {scope} has a bias of shape {found.bias.shape}")
        self._used_convs.add(scope)
        bias = None if found.bias is None else torch.from_numpy(found.bias.copy()).to(self.device)
        return Conv(torch.from_numpy(found.weight.copy()).to(self.device), bias)

    def affine(self, scope: str, dims: int = 3) -> Affine | None:
        """The norm at `scope`, or None when the export folded it into its conv."""
        found = self._weights.affines.get(scope)
        if found is None:
            conv_scope = self.inv.folded_into.get(scope)
            conv = self._weights.convs.get(conv_scope) if conv_scope else None
            if conv is None or conv.bias is None:
                raise SpeakerModelError(f"{self._weights.source}: missing batch norm {scope!r}")
            return None
        size = self.inv.affine_sizes[scope]
        if found.scale.shape != (size,) or found.shift.shape != (size,):
            raise SpeakerModelError(
                f"{self._weights.source}: {scope} has {found.scale.shape[0]} channels, CAM++ needs {size}"
            )
        self._used_affines.add(scope)
        shape = (size,) + (1,) * (dims - 2)
        return Affine(
            torch.from_numpy(found.scale.copy()).to(self.device).reshape(shape),
            torch.from_numpy(found.shift.copy()).to(self.device).reshape(shape),
        )

    def folded_conv(self, conv_scope: str, norm_scope: str) -> Conv:
        """The conv with the norm that directly follows it folded in (if the export did not)."""
        conv = self.conv(conv_scope)
        found = self._weights.affines.get(norm_scope)
        if found is None:
            self.affine(norm_scope)  # checks that the export folded it
            return conv
        self.affine(norm_scope)  # shape checks, marks it used
        scale = torch.from_numpy(found.scale.astype("float64"))
        shift = torch.from_numpy(found.shift.astype("float64"))
        weight = conv.weight.double().cpu() * scale.reshape((-1,) + (1,) * (conv.weight.dim() - 1))
        bias = shift if conv.bias is None else conv.bias.double().cpu() * scale + shift
        return Conv(weight.float().to(self.device), bias.float().to(self.device))

    def required_affine(self, scope: str, dims: int = 3) -> Affine:
        affine = self.affine(scope, dims)
        if affine is None:
            raise SpeakerModelError(f"{self._weights.source}: missing batch norm {scope!r}")
        return affine

    def check_complete(self) -> None:
        unused = (set(self._weights.convs) - self._used_convs) | (
            set(self._weights.affines) - self._used_affines
        )
        if unused:
            raise SpeakerModelError(f"{self._weights.source}: layers left unused: {sorted(unused)[:5]}")


def triton_available() -> bool:
    try:
        import triton  # noqa: F401
    except ImportError:
        return False
    return True


def default_backend(device: torch.device) -> str:
    """Triton kernels on CUDA when triton is installed (OMNI_DEPLOY_SPK_KERNELS=torch opts out)."""
    choice = os.environ.get("OMNI_DEPLOY_SPK_KERNELS", "auto")
    if choice in ("torch", "triton"):
        return choice
    return "triton" if device.type == "cuda" and triton_available() else "torch"


def default_front_end() -> str:
    """Where the Triton backend runs the front end, masks and pooling: in fused Triton kernels
    (bias + residual + ReLU + mask after each bias-free cuDNN conv, one launch for the input masks,
    Triton statistics pooling), faster on an H200 in an A/B (docs/benchmarks.md), unless
    OMNI_DEPLOY_SPK_FRONT_END=torch picks the torch path (cuDNN convs with their biases and
    element-wise kernels), kept for triage."""
    return "torch" if os.environ.get("OMNI_DEPLOY_SPK_FRONT_END") == "torch" else "triton"


def _bias(conv: Conv) -> torch.Tensor:
    """The bias of a conv that a norm was folded into (which always gives it one)."""
    if conv.bias is None:
        raise SpeakerModelError("a conv with a folded norm has no bias")
    return conv.bias


@dataclass
class TritonDense:
    """A dense layer's tensors in the layouts the kernels read."""

    pre_scale: torch.Tensor
    pre_shift: torch.Tensor
    w1: torch.Tensor
    b1: torch.Tensor | None
    ctx_w1: torch.Tensor
    ctx_b1: torch.Tensor
    ctx_w2: torch.Tensor
    ctx_b2: torch.Tensor
    taps: torch.Tensor  # [3, 32, 128]
    dilation: int

    @classmethod
    def of(cls, layer: DenseLayer) -> TritonDense:
        assert layer.ctx1.bias is not None and layer.ctx2.bias is not None
        return cls(
            layer.pre.scale.reshape(-1).contiguous(),
            layer.pre.shift.reshape(-1).contiguous(),
            layer.linear1.weight.squeeze(-1).contiguous(),
            layer.linear1.bias,
            layer.ctx1.weight.squeeze(-1).contiguous(),
            layer.ctx1.bias,
            layer.ctx2.weight.squeeze(-1).contiguous(),
            layer.ctx2.bias,
            layer.local.weight.permute(2, 0, 1).contiguous(),
            layer.dilation,
        )


class FusedCampplus:
    """CAM++ forward over [B, T, 80] padded features and [B] valid lengths (T % 200 == 0)."""

    def __init__(
        self,
        weights: CampplusWeights,
        device: torch.device | str = "cpu",
        backend: str | None = None,
        front_end: str | None = None,
    ) -> None:
        w = WeightSet(weights, torch.device(device))
        self.device = w.device
        self.backend = backend or default_backend(self.device)
        self.front_end = front_end or default_front_end()
        self.head_conv1 = w.folded_conv("head.conv1", "head.bn1")
        self.res_blocks = []
        for layer in (1, 2):
            for index, stride in ((0, 2), (1, 1)):
                base = f"head.layer{layer}.{index}"
                shortcut = None
                if f"{base}.shortcut.0" in weights.convs:
                    shortcut = w.folded_conv(f"{base}.shortcut.0", f"{base}.shortcut.1")
                self.res_blocks.append(
                    (
                        stride,
                        w.folded_conv(f"{base}.conv1", f"{base}.bn1"),
                        w.folded_conv(f"{base}.conv2", f"{base}.bn2"),
                        shortcut,
                    )
                )
        self.head_conv2 = w.folded_conv("head.conv2", "head.bn2")
        self.tdnn = w.folded_conv("xvector.tdnn.linear", "xvector.tdnn.nonlinear.batchnorm")
        self.blocks: list[tuple[list[DenseLayer], Affine, Conv]] = []
        for block, (layers, dilation) in enumerate(BLOCKS, start=1):
            dense = []
            for i in range(1, layers + 1):
                scope = f"xvector.block{block}.tdnnd{i}"
                dense.append(
                    DenseLayer(
                        pre=w.required_affine(f"{scope}.nonlinear1.batchnorm"),
                        linear1=w.folded_conv(f"{scope}.linear1", f"{scope}.nonlinear2.batchnorm"),
                        local=w.conv(f"{scope}.cam_layer.linear_local"),
                        ctx1=w.conv(f"{scope}.cam_layer.linear1"),
                        ctx2=w.conv(f"{scope}.cam_layer.linear2"),
                        dilation=dilation,
                    )
                )
            transit_bn = w.required_affine(f"xvector.transit{block}.nonlinear.batchnorm")
            if block < len(BLOCKS):
                transit = w.conv(f"xvector.transit{block}.linear")
            else:  # transit3 feeds only out_nonlinear's norm: fold it in
                transit = w.folded_conv(f"xvector.transit{block}.linear", "xvector.out_nonlinear.batchnorm")
            self.blocks.append((dense, transit_bn, transit))
        dense_conv = w.folded_conv("xvector.dense.linear", "xvector.dense.nonlinear.batchnorm")
        self.dense_weight = dense_conv.weight.squeeze(-1)
        self.dense_bias = dense_conv.bias
        w.check_complete()
        # For the Triton front end: a residual block's second conv and its shortcut share one bias.
        self.block_biases = [
            _bias(conv2) if shortcut is None else _bias(conv2) + _bias(shortcut)
            for _, _, conv2, shortcut in self.res_blocks
        ]
        self.triton_blocks: list[tuple[list[TritonDense], torch.Tensor, torch.Tensor, torch.Tensor]] = []
        if self.backend == "triton":
            for dense, transit_bn, transit in self.blocks:
                self.triton_blocks.append(
                    (
                        [TritonDense.of(layer) for layer in dense],
                        transit_bn.scale.reshape(-1).contiguous(),
                        transit_bn.shift.reshape(-1).contiguous(),
                        transit.weight.squeeze(-1).contiguous(),
                    )
                )

    # -- pieces ------------------------------------------------------------------------------

    def _head(self, feats: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        m = mask[:, None, None, :]
        x = feats.transpose(1, 2).unsqueeze(1)
        x = F.conv2d(x, self.head_conv1.weight, self.head_conv1.bias, padding=1).relu_().mul_(m)
        for stride, conv1, conv2, shortcut in self.res_blocks:
            out = F.conv2d(x, conv1.weight, conv1.bias, stride=(stride, 1), padding=1).relu_().mul_(m)
            out = F.conv2d(out, conv2.weight, conv2.bias, padding=1)
            if shortcut is not None:
                out += F.conv2d(x, shortcut.weight, shortcut.bias, stride=(stride, 1))
            else:
                out += x
            x = out.relu_().mul_(m)
        x = (
            F.conv2d(x, self.head_conv2.weight, self.head_conv2.bias, stride=(2, 1), padding=1)
            .relu_()
            .mul_(m)
        )
        return x.reshape(x.shape[0], x.shape[1] * x.shape[2], x.shape[3])

    def _dense_layer(
        self,
        buf: torch.Tensor,
        c_in: int,
        layer: DenseLayer,
        mask: torch.Tensor,
        inv_len: torch.Tensor,
        inv_seg: torch.Tensor,
    ) -> None:
        batch, _, frames = buf.shape
        segments = frames // SEG_LEN
        h = torch.addcmul(layer.pre.shift, buf[:, :c_in], layer.pre.scale).relu_()
        h = F.conv1d(h, layer.linear1.weight, layer.linear1.bias).relu_().mul_(mask)
        y = F.conv1d(h, layer.local.weight, None, padding=layer.dilation, dilation=layer.dilation)
        seg_sum = h.view(batch, BOTTLENECK, segments, SEG_LEN).sum(-1)
        context = torch.addcmul(seg_sum.sum(-1, keepdim=True) * inv_len, seg_sum, inv_seg)
        z = F.conv1d(context, layer.ctx1.weight, layer.ctx1.bias).relu_()
        gate = torch.sigmoid(F.conv1d(z, layer.ctx2.weight, layer.ctx2.bias))
        out = buf[:, c_in : c_in + GROWTH].view(batch, GROWTH, segments, SEG_LEN)
        torch.mul(y.view(batch, GROWTH, segments, SEG_LEN), gate.unsqueeze(-1), out=out)

    # -- forward -----------------------------------------------------------------------------

    def __call__(self, feats: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        frames = feats.shape[1]
        if frames % FRAME_QUANTUM:
            raise ValueError(f"padded length {frames} is not a multiple of {FRAME_QUANTUM}")
        if self.backend == "triton" and self.front_end == "triton":
            return self._forward_triton(feats, lengths)
        half = frames // 2
        segments = half // SEG_LEN
        steps = torch.arange(frames, device=feats.device)
        valid = steps[None, :] < lengths[:, None]
        mask1 = valid.to(feats.dtype)
        half_lengths = (lengths + 1) // 2
        mask2 = (steps[None, :half] < half_lengths[:, None]).to(feats.dtype)[:, None, :]
        inv_len = (1.0 / half_lengths.to(feats.dtype))[:, None, None]
        seg_start = torch.arange(segments, device=feats.device) * SEG_LEN
        seg_count = (half_lengths[:, None] - seg_start[None, :]).clamp(1, SEG_LEN)
        inv_seg = (1.0 / seg_count.to(feats.dtype))[:, None, :]

        # Padded input frames may hold anything, NaN included: the head's first conv reads them.
        x = self._head(torch.where(valid[:, :, None], feats, 0.0), mask1)
        x = F.conv1d(x, self.tdnn.weight, self.tdnn.bias, stride=2, padding=2)
        if self.backend == "triton":
            x = self._xvector_triton(x, mask2[:, 0, :].contiguous(), half_lengths)
        else:
            x = self._xvector_torch(x, mask2, inv_len, inv_seg)
        # Statistics pooling over valid frames: mean and unbiased standard deviation.
        mean = (x * mask2).sum(-1) * inv_len[:, :, 0]
        centred = (x - mean[:, :, None]).mul_(mask2)
        var = centred.pow_(2).sum(-1) / (half_lengths[:, None] - 1).to(x.dtype)
        stats = torch.cat([mean, var.sqrt()], dim=-1)
        return F.linear(stats, self.dense_weight, self.dense_bias)

    def forward_packed(
        self, packed: torch.Tensor, starts: torch.Tensor, lengths: torch.Tensor, frames: int
    ) -> torch.Tensor:
        """The forward of items packed back to back in `packed` [N, 80] (item b: rows starts[b]
        .. starts[b] + lengths[b] - 1), padded to `frames` (a multiple of 200) on the device."""
        if frames % FRAME_QUANTUM:
            raise ValueError(f"padded length {frames} is not a multiple of {FRAME_QUANTUM}")
        if self.backend == "triton" and self.front_end == "triton":
            return self._forward_triton(packed, lengths, starts, frames)
        return self(unpack(packed, starts, lengths, frames), lengths)

    def _forward_triton(
        self,
        feats: torch.Tensor,
        lengths: torch.Tensor,
        starts: torch.Tensor | None = None,
        frames: int | None = None,
    ) -> torch.Tensor:
        """The same computation in fewer launches: what a CUDA graph replays per reference."""
        from omni_deploy.speaker import triton_kernels as tk

        x, mask1, mask2, half_lengths = tk.prepare(feats, lengths, starts, frames)
        # cuDNN convs without bias; bias, residual, ReLU and mask in one pass after each.
        x = tk.bias_relu_mask(F.conv2d(x, self.head_conv1.weight, padding=1), _bias(self.head_conv1), mask1)
        for (stride, conv1, conv2, shortcut), bias in zip(self.res_blocks, self.block_biases, strict=True):
            out = F.conv2d(x, conv1.weight, stride=(stride, 1), padding=1)
            tk.bias_relu_mask(out, _bias(conv1), mask1)
            out = F.conv2d(out, conv2.weight, padding=1)
            residual = x if shortcut is None else F.conv2d(x, shortcut.weight, stride=(stride, 1))
            x = tk.bias_relu_mask(out, bias, mask1, residual)
        x = F.conv2d(x, self.head_conv2.weight, stride=(2, 1), padding=1)
        tk.bias_relu_mask(x, _bias(self.head_conv2), mask1)
        x = x.reshape(x.shape[0], x.shape[1] * x.shape[2], x.shape[3])
        x = F.conv1d(x, self.tdnn.weight, stride=2, padding=2)
        x = self._xvector_triton(x, mask2, half_lengths, _bias(self.tdnn))
        return F.linear(tk.stats_pool(x, half_lengths), self.dense_weight, self.dense_bias)

    def _xvector_torch(
        self, x: torch.Tensor, mask2: torch.Tensor, inv_len: torch.Tensor, inv_seg: torch.Tensor
    ) -> torch.Tensor:
        batch, _, half = x.shape
        channels = INIT_CHANNELS
        buf = x.new_empty(batch, channels + BLOCKS[0][0] * GROWTH, half)
        torch.clamp(x, min=0, out=buf[:, :channels])
        for index, (dense, transit_bn, transit) in enumerate(self.blocks):
            for layer in dense:
                self._dense_layer(buf, channels, layer, mask2, inv_len, inv_seg)
                channels += GROWTH
            t = F.conv1d(
                torch.addcmul(transit_bn.shift, buf, transit_bn.scale).relu_(), transit.weight, transit.bias
            )
            channels //= 2
            if index + 1 < len(self.blocks):
                buf = x.new_empty(batch, channels + BLOCKS[index + 1][0] * GROWTH, half)
                buf[:, :channels].copy_(t)
            else:
                buf = t
        return buf.relu_()

    def _xvector_triton(
        self,
        x: torch.Tensor,
        mask: torch.Tensor,
        half_lengths: torch.Tensor,
        tdnn_bias: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """The dense blocks from the TDNN's output (without its bias, when `tdnn_bias` is given)."""
        from omni_deploy.speaker import triton_kernels as tk

        batch, _, half = x.shape
        h = x.new_empty(batch, BOTTLENECK, half)
        tiles, _ = tk.segment_tiles(batch, half)
        seg_parts = x.new_empty(batch, BOTTLENECK, tiles, 2)
        gate = x.new_empty(batch, GROWTH, half // SEG_LEN)
        channels = INIT_CHANNELS
        buf = x.new_empty(batch, channels + BLOCKS[0][0] * GROWTH, half)
        if tdnn_bias is None:
            torch.clamp(x, min=0, out=buf[:, :channels])
        else:  # the TDNN's bias and ReLU in one pass
            tk.bias_relu_mask(x, tdnn_bias, out=buf[:, :channels])
        out = buf
        for index, (dense, scale, shift, weight) in enumerate(self.triton_blocks):
            for layer in dense:
                tk.bottleneck(
                    buf[:, :channels],
                    layer.pre_scale,
                    layer.pre_shift,
                    layer.w1,
                    layer.b1,
                    h,
                    mask,
                    True,
                    seg_parts,
                )
                tk.cam_gate(
                    seg_parts, half_lengths, layer.ctx_w1, layer.ctx_b1, layer.ctx_w2, layer.ctx_b2, gate
                )
                tk.local_conv_gate(h, layer.taps, layer.dilation, gate, buf[:, channels : channels + GROWTH])
                channels += GROWTH
            channels //= 2
            bias = self.blocks[index][2].bias
            if index + 1 < len(self.blocks):
                out = x.new_empty(batch, channels + BLOCKS[index + 1][0] * GROWTH, half)
                tk.bottleneck(buf, scale, shift, weight, bias, out[:, :channels])
                buf = out
            else:  # transit3 with out_nonlinear's norm folded in, then its ReLU
                out = x.new_empty(batch, channels, half)
                tk.bottleneck(buf, scale, shift, weight, bias, out, post_relu=True)
        return out
