"""torch's process-wide defaults, made what vllm-omni's own preparation runs under, for a moment.

vLLM builds and loads each stage under `set_default_torch_dtype(bfloat16)` (and a `torch.device`
context), and the plugin's warm-up runs there. Everything refprep creates names its dtype and
device; some library code it calls does not: torchaudio's `melscale_fbanks` (a `linspace` in the
default dtype), s3tokenizer's `log_mel_spectrogram` (a Hann window in the default dtype), and
vllm-omni's own per-voice operations, which `BatchedToken2Wav.prepare_prompt` runs with the
default dtype float32. Those calls run inside `float32_defaults()`.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import torch

_LOCK = threading.RLock()  # the default dtype is process-wide: one changer at a time


@contextmanager
def float32_defaults() -> Iterator[None]:
    """The default dtype float32 inside, the caller's again after (also on an error)."""
    with _LOCK:
        previous = torch.get_default_dtype()
        torch.set_default_dtype(torch.float32)
        try:
            yield
        finally:
            torch.set_default_dtype(previous)
