"""Everything one pass sends to the device, in two transfers: the samples and the integers.

A copy from ordinary (pageable) host memory can make the host wait for the device, and a small
tensor built on the device from a Python list is such a copy. The pass therefore gathers every
host value first, into pinned buffers, and sends each in one asynchronous copy before the device
work that needs it is queued.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch


class Upload:
    def __init__(self, device: torch.device) -> None:
        self.device = device
        self._ints: dict[str, np.ndarray] = {}
        self._waves: list[torch.Tensor] = []

    def ints(self, name: str, values: Sequence[int] | np.ndarray) -> None:
        if name in self._ints:
            raise ValueError(f"{name} is already staged")
        self._ints[name] = np.asarray(values, dtype=np.int64).reshape(-1)

    def waves(self, waveforms: list[torch.Tensor]) -> None:
        self._waves = [w.reshape(-1) for w in waveforms]

    def send(self) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """(the waveforms back to back, {name: int64 values}) on the device."""
        pinned = self.device.type == "cuda"
        total = sum(int(w.numel()) for w in self._waves)
        host_waves = torch.empty(total, dtype=torch.float32, device="cpu", pin_memory=pinned)
        if self._waves:
            torch.cat([w.to(dtype=torch.float32) for w in self._waves], out=host_waves)
        flat_ints = np.concatenate(list(self._ints.values())) if self._ints else np.zeros(0, np.int64)
        host_ints = torch.empty(flat_ints.size, dtype=torch.int64, device="cpu", pin_memory=pinned)
        host_ints.numpy()[:] = flat_ints
        waves = host_waves.to(self.device, non_blocking=pinned)
        ints = host_ints.to(self.device, non_blocking=pinned)
        views, start = {}, 0
        for name, values in self._ints.items():
            views[name] = ints[start : start + len(values)]
            start += len(values)
        return waves, views
