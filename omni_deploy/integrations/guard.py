"""The guard between omni-deploy's CAM++ encoder and the model that consumes its embedding.

Every embedding the encoder returns is checked before vllm-omni sees it: a `[1, 192]` float32
tensor, finite, with a norm above `MIN_NORM`. A NaN/Inf embedding would give non-finite audio for
every request with that voice, zeros a voice that is not the reference's, a wrong shape or dtype a
failed batch; and vllm-omni caches the embedding per voice before it uses it, so one bad answer
would be served again and again. Anything that is not a good embedding counts as a failure of
that call, like an exception: the call is answered by the ONNX Runtime session vllm-omni loaded
(kept behind the encoder), so the cache only ever keeps a checked embedding or ONNX Runtime's.
After `limit` failures in a row the encoder is retired for good.

Thread-safe: processors call it from several threads; the encoder serialises its own replays.
torch is imported by the functions that need it, never at module import.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from typing import Any

EMBED_SHAPE = (1, 192)
# Raw CAM++ embeddings have norms of order 10; below this, L2 normalisation would turn rounding
# into a direction, so the voice would be arbitrary.
MIN_NORM = 1e-6
WARN_INTERVAL_S = 60.0  # request-time warnings: at most one per interval per guard

Embedder = Callable[[Any], Any]  # [T, 80] float32 features -> [1, 192] float32


def embedding_problem(out: Any) -> str | None:
    """Why `out` is not a usable CAM++ embedding, or None. One device sync (the norm)."""
    import torch

    if not isinstance(out, torch.Tensor):
        return f"returned {type(out).__name__}, not a tensor"
    if tuple(out.shape) != EMBED_SHAPE:
        return f"shape {list(out.shape)}, not {list(EMBED_SHAPE)}"
    if out.dtype != torch.float32:
        return f"dtype {str(out.dtype).replace('torch.', '')}, not float32"
    # NaN or Inf anywhere makes the norm NaN or Inf: one scalar answers all three checks. In float32,
    # as the consumer normalises it: values whose norm overflows would normalise to zeros there.
    norm = float(torch.linalg.vector_norm(out.detach()))
    if not math.isfinite(norm):
        return "non-finite values (NaN or Inf)"
    if norm < MIN_NORM:
        return f"norm {norm:.3g} (an all-zero or vanishing embedding)"
    return None


class EmbeddingRejected(ValueError):
    """The encoder answered, but not with a usable embedding."""


class GuardedSpeakerModel:
    """`primary` in front, `fallback` behind; counts, warns (rate-limited) and retires."""

    def __init__(
        self,
        primary: Embedder,
        fallback: Embedder,
        label: str,
        limit: int,
        warn: Callable[[str], None],
        on_retire: Callable[[str], None] | None = None,
    ) -> None:
        self.encoder = primary
        self.fallback = fallback
        self.label = label
        self.limit = limit
        self.warn = warn
        self.on_retire = on_retire
        self.calls = 0
        self.failures = 0  # all encoder failures in this process
        self.fallback_calls = 0  # calls answered by the fallback
        self.consecutive = 0
        self.retired = False
        self.last_problem: str | None = None
        self._last_warning = float("-inf")
        self._suppressed = 0
        self._lock = threading.Lock()

    def __call__(self, feat: Any) -> Any:
        if self.retired:
            return self.fallback(feat)
        try:
            out = self.encoder(feat)
            problem = embedding_problem(out)
            if problem is not None:
                raise EmbeddingRejected(problem)
        except Exception as exc:  # CUDA error, out of memory, a bad embedding: the fallback answers
            self._failed(exc)
            return self.fallback(feat)
        with self._lock:
            self.calls += 1
            self.consecutive = 0
        return out

    def _failed(self, exc: Exception) -> None:
        what = f"{type(exc).__name__}: {exc}"
        with self._lock:
            self.calls += 1
            self.failures += 1
            self.fallback_calls += 1
            self.consecutive += 1
            self.last_problem = what
            if self.retired:
                return
            if self.consecutive >= self.limit:
                self.retired = True
                message = (
                    f"{self.label}: the encoder failed {self.consecutive} times in a row (last: {what}); "
                    f"speaker embedding switched to ONNX Runtime on the CPU for good ({self.failures} failures in all)"
                )
            elif time.monotonic() - self._last_warning >= WARN_INTERVAL_S:
                message = (
                    f"{self.label}: the encoder failed ({what}); this call falls back to ONNX Runtime on the CPU "
                    f"({self.failures} failures in all, {self.consecutive} in a row, {self._suppressed} warnings "
                    f"suppressed; ONNX Runtime for good after {self.limit} in a row)"
                )
                self._last_warning = time.monotonic()
                self._suppressed = 0
            else:
                self._suppressed += 1
                return
        self.warn(message)
        if self.retired and self.on_retire is not None:
            self.on_retire(what)

    def counters(self) -> dict[str, int | bool | str | None]:
        with self._lock:
            return {
                "calls": self.calls,
                "failures": self.failures,
                "fallback_calls": self.fallback_calls,
                "retired": self.retired,
                "last_problem": self.last_problem,
            }


def session_embedder(session: Any) -> Embedder:
    """An ONNX Runtime CAM++ session as an embedder, fed as vllm-omni feeds it: [1, T, 80] float32
    on the CPU; the answer comes back as a CPU tensor."""

    def embed(feat: Any) -> Any:
        import torch

        name = session.get_inputs()[0].name
        array = feat.unsqueeze(dim=0).detach().cpu().float().numpy()
        return torch.from_numpy(session.run(None, {name: array})[0])

    return embed


def lazy_session_embedder(onnx_path: str) -> Embedder:
    """`session_embedder` over the session vllm-omni 0.32 builds on first use (`spk_model`: CPU
    provider, all graph optimisations, one intra-op thread), built here on the first call: a
    stage whose encoder never fails never loads it, as vllm-omni's own never does once a device
    model is in the slot."""
    made: list[Embedder] = []
    lock = threading.Lock()

    def embed(feat: Any) -> Any:
        with lock:
            if not made:
                import onnxruntime

                options = onnxruntime.SessionOptions()
                options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
                options.intra_op_num_threads = 1
                session = onnxruntime.InferenceSession(
                    onnx_path, sess_options=options, providers=["CPUExecutionProvider"]
                )
                made.append(session_embedder(session))
        return made[0](feat)

    return embed


class SessionFacade:
    """An ONNX Runtime session's face (`get_inputs`, `run`) over a guard, for callers that take a
    session (CosyVoice3's and GLM-TTS's processors, Ming's extractor): they keep their own front
    end and output handling, and only the CAM++ forward changes."""

    def __init__(self, guard: GuardedSpeakerModel, session: Any) -> None:
        self.guard = guard
        self.session = session

    def run(self, output_names: Any, feeds: dict[str, Any], *args: Any, **kwargs: Any) -> list[Any]:
        import numpy as np
        import torch

        (array,) = feeds.values()
        batch = np.asarray(array, dtype=np.float32)
        rows = [self.guard(torch.from_numpy(np.ascontiguousarray(item))) for item in batch]
        out = (
            torch.cat([r.detach().float().cpu() for r in rows])
            if rows
            else torch.empty(0, EMBED_SHAPE[1], dtype=torch.float32, device="cpu")
        )
        return [out.numpy()]

    def __getattr__(self, attribute: str) -> Any:
        return getattr(self.session, attribute)
