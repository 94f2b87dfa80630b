"""Waveforms of different lengths on the device, and their resampling in groups of one rate.

Items lie back to back in one flat tensor (`Ragged`); a padded view is one gather. Resampling is
torchaudio's own band-limited sinc kernel (the `torchaudio.transforms.Resample` that vLLM's
`AudioResampler` builds for the same pair of rates), applied to all items of one rate at once:
each output sample sees the same input samples and the same zeros past the end as when the item
is resampled alone, so the result equals the one-by-one result to rounding.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import torch

from omni_deploy.speaker.refprep.plan import offsets, resampled_length


@dataclass
class Ragged:
    """Items back to back in `flat` (1-D, on the device); offsets and lengths known on the host."""

    flat: torch.Tensor
    starts: list[int]
    lengths: list[int]


def gather_padded(
    flat: torch.Tensor, starts: torch.Tensor, lengths: torch.Tensor, width: int
) -> torch.Tensor:
    steps = torch.arange(width, device=flat.device)
    index = (starts[:, None] + steps[None, :]).clamp_(0, max(flat.shape[0] - 1, 0))
    return torch.where(steps[None, :] < lengths[:, None], flat[index], 0.0)


def reflect_gather(
    flat: torch.Tensor, starts: torch.Tensor, lengths: torch.Tensor, pad: int, width: int
) -> torch.Tensor:
    """[B, width]: each item reflect-padded by `pad` on both sides (as torch's 'reflect' mode pads
    one signal: the edge sample is not repeated), from position 0; past the right padding, the
    item's last sample (never read by a valid frame)."""
    steps = torch.arange(width, device=flat.device)[None, :] - pad
    last = (lengths - 1)[:, None]
    index = torch.where(steps < 0, -steps, steps)
    index = torch.where(index > last, 2 * last - index, index)
    index = torch.minimum(index.clamp_(min=0), last) + starts[:, None]
    return flat[index]


_KERNELS: dict[tuple[int, int, str], tuple[torch.Tensor, int, int, int]] = {}
_KERNEL_LOCK = threading.Lock()


def _kernel(orig: int, new: int, device: torch.device) -> tuple[torch.Tensor, int, int, int]:
    """(kernel on `device`, width, reduced orig, reduced new) of torchaudio's Resample(orig, new)."""
    key = (orig, new, str(device))
    with _KERNEL_LOCK:
        found = _KERNELS.get(key)
        if found is None:
            import math

            import torchaudio

            module = torchaudio.transforms.Resample(orig, new)
            g = math.gcd(orig, new)
            found = _KERNELS[key] = (module.kernel.to(device), int(module.width), orig // g, new // g)
        return found


def resample_group(padded: torch.Tensor, orig: int, new: int) -> torch.Tensor:
    """[G, N] right-padded waveforms at `orig` Hz to [G, M] at `new` Hz, M for the padded length N.

    The same padding, convolution and stride as torchaudio.functional's sinc resampler."""
    if orig == new:
        return padded
    kernel, width, orig_r, _ = _kernel(orig, new, padded.device)
    length = padded.shape[-1]
    x = torch.nn.functional.pad(padded, (width, width + orig_r))
    out = torch.nn.functional.conv1d(x[:, None], kernel, stride=orig_r)
    out = out.transpose(1, 2).reshape(padded.shape[0], -1)
    return out[:, : resampled_length(length, orig, new)]


@dataclass(frozen=True)
class RateGroup:
    """The items of one source rate, gathered into one padded block and resampled together."""

    rate: int
    members: tuple[int, ...]
    width: int  # the longest member, in source samples
    row: int  # samples per resampled row


def rate_groups(lengths: list[int], rates: list[int], target: int) -> list[RateGroup]:
    groups = []
    for rate in sorted(set(rates)):
        if rate == target:
            continue
        members = tuple(i for i, r in enumerate(rates) if r == rate)
        width = max(lengths[i] for i in members)
        groups.append(RateGroup(rate, members, width, resampled_length(width, rate, target)))
    return groups


def resampled_layout(
    lengths: list[int], rates: list[int], target: int, base: int
) -> tuple[list[int], list[int]]:
    """(starts, lengths) of every item at `target` Hz in the flat tensor `resample_all` builds:
    the source items first (those already at `target` stay where they are), then each group's
    resampled block."""
    starts = offsets(lengths)
    out = list(lengths)
    for group in rate_groups(lengths, rates, target):
        for slot, i in enumerate(group.members):
            starts[i] = base + slot * group.row
            out[i] = resampled_length(lengths[i], group.rate, target)
        base += len(group.members) * group.row
    return starts, out


def resample_all(raw: Ragged, rates: list[int], target: int, group_index: list[torch.Tensor]) -> torch.Tensor:
    """The flat tensor of every item of `raw` at `target` Hz (layout: `resampled_layout`).

    Items already at `target` are kept as they are (vLLM's AudioResampler returns them
    unchanged); the others are resampled once per distinct source rate. `group_index` holds, per
    group, the device tensor [2, G] of its members' source starts and lengths."""
    pieces: list[torch.Tensor] = [raw.flat]
    for group, index in zip(rate_groups(raw.lengths, rates, target), group_index, strict=True):
        block = resample_group(gather_padded(raw.flat, index[0], index[1], group.width), group.rate, target)
        pieces.append(block.reshape(-1))
    return pieces[0] if len(pieces) == 1 else torch.cat(pieces)
