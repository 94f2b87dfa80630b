"""Our embedding against ONNX Runtime on the CPU, on the same fbank features."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch

from omni_deploy.speaker.encoder import SpeakerEncoder, get_encoder
from omni_deploy.speaker.fbank import SAMPLE_RATE, fbank, resample
from omni_deploy.speaker.inputs import Reference
from omni_deploy.speaker.onnx_file import SpeakerModelError, ort_session


@dataclass
class ParityCase:
    name: str
    frames: int
    tf32: bool
    cosine: float
    max_abs_diff: float  # of the L2-normalised embeddings
    batched: bool = True  # all references in one call, or one call each


def features_of(refs: list[Reference]) -> list[torch.Tensor]:
    waves = [resample(torch.from_numpy(r.waveform), r.sample_rate, SAMPLE_RATE) for r in refs]
    return fbank(waves)


def _normalised(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v, axis=-1, keepdims=True)


def compare(
    encoder: SpeakerEncoder,
    session: Any,
    names: list[str],
    feats: list[torch.Tensor],
    batched: bool = True,
) -> list[ParityCase]:
    if batched:
        ours = encoder.embed_features(feats).float().cpu().numpy()
    else:  # through vllm-omni's callable, one reference at a time
        ours = torch.cat([encoder(f) for f in feats]).float().cpu().numpy()
    cases = []
    for name, feat, mine in zip(names, feats, ours, strict=True):
        ref = session.run(None, {session.get_inputs()[0].name: feat[None].numpy()})[0][0]
        if not (np.isfinite(mine).all() and np.isfinite(ref).all()):
            # No verdict from NaN: a cosine of NaN compares false with every threshold.
            which = "ours" if not np.isfinite(mine).all() else "ONNX Runtime's"
            raise SpeakerModelError(f"the embedding of {name} is not finite ({which}); no parity verdict")
        a, b = _normalised(mine), _normalised(ref)
        cases.append(
            ParityCase(
                name,
                int(feat.shape[0]),
                encoder.allow_tf32,
                float(a @ b),
                float(np.abs(a - b).max()),
                batched,
            )
        )
    return cases


def run_parity(
    onnx_path: str,
    refs: list[Reference],
    device: str,
    tf32_modes: list[bool],
    backend: str | None = None,
    one_by_one: bool = False,
) -> list[ParityCase]:
    """Cases of all references in one call; with `one_by_one`, also of one call per reference."""
    session = ort_session(onnx_path)
    feats = features_of(refs)
    names = [r.name for r in refs]
    cases: list[ParityCase] = []
    for tf32 in tf32_modes:
        encoder = get_encoder(onnx_path, device=device, allow_tf32=tf32, cudnn_tf32=tf32, backend=backend)
        cases.extend(compare(encoder, session, names, feats))
        if one_by_one:
            cases.extend(compare(encoder, session, names, feats, batched=False))
    return cases


def summary(cases: list[ParityCase]) -> dict[str, Any]:
    out: dict[str, Any] = {"cases": [asdict(c) for c in cases]}
    for tf32 in sorted({c.tf32 for c in cases}):
        subset = [c for c in cases if c.tf32 == tf32]
        out[f"tf32_{'on' if tf32 else 'off'}"] = {
            "min_cosine": min(c.cosine for c in subset),
            "max_abs_diff": max(c.max_abs_diff for c in subset),
            "cases": len(subset),
            "min_cosine_single": min((c.cosine for c in subset if not c.batched), default=None),
            "min_cosine_batched": min((c.cosine for c in subset if c.batched), default=None),
        }
    return out
