"""TF32 policy applied in a scope that restores the caller's flags afterwards.

FP32 tensors do not imply FP32 arithmetic: on Ampere and newer GPUs, PyTorch's matmul flag and
cuDNN's convolution flag each allow TF32 independently (cuDNN's is on by default).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch


@contextmanager
def precision_scope(allow_tf32: bool, cudnn_tf32: bool | None = None) -> Iterator[None]:
    """Matmul TF32 as asked; cuDNN TF32 left alone unless `cudnn_tf32` is given; no autotuning."""
    saved = (
        torch.backends.cuda.matmul.allow_tf32,
        torch.backends.cudnn.allow_tf32,
        torch.backends.cudnn.benchmark,
    )
    try:
        torch.backends.cuda.matmul.allow_tf32 = allow_tf32
        if cudnn_tf32 is not None:
            torch.backends.cudnn.allow_tf32 = cudnn_tf32
        # Autotuning per new input length would stall the first request of every length.
        torch.backends.cudnn.benchmark = False
        yield
    finally:
        (
            torch.backends.cuda.matmul.allow_tf32,
            torch.backends.cudnn.allow_tf32,
            torch.backends.cudnn.benchmark,
        ) = saved
