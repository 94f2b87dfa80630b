"""vllm-omni's callable contract on a GPU: `encoder(feat[T, 80] on the CPU) -> [1, 192]` on the
stage's device, one reference per call, exactly as StepAudio2Token2WavCore._forward_spk_embedding
calls its speaker model. Compared with ONNX Runtime on the CPU (configured as vllm-omni does) and
timed per reference.

    PYTHONPATH=. python3 benchmarks/speaker_contract.py --record docs/benchmarks/speaker-contract.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from omni_deploy.speaker import load_encoder
from omni_deploy.speaker.bench import measure
from omni_deploy.speaker.inputs import synthetic
from omni_deploy.speaker.parity import features_of, ort_session
from omni_deploy.speaker.standin import STANDIN_NOTE, export_standin


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--onnx")
    parser.add_argument("--refs", type=int, default=32)
    parser.add_argument("--record")
    args = parser.parse_args()
    onnx_path = args.onnx or str(Path(tempfile.mkdtemp()) / "campplus-standin.onnx")
    if args.onnx is None:
        export_standin(Path(onnx_path))
    session = ort_session(onnx_path, threads=1)
    feats = features_of(synthetic(args.refs, seed=21))
    out: dict = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "device": torch.cuda.get_device_name(0),
        "weights": STANDIN_NOTE if args.onnx is None else args.onnx,
        "refs": args.refs,
    }
    for tf32 in (False, True):
        encoder = load_encoder(onnx_path, device="cuda", allow_tf32=tf32, cudnn_tf32=tf32)
        cosines = []
        for feat in feats:
            got = encoder(feat)  # CPU features in, as vllm-omni passes them
            assert tuple(got.shape) == (1, 192) and got.device.type == "cuda"
            ref = session.run(None, {"input": feat[None].numpy()})[0][0]
            a = got[0].cpu().numpy()
            cosines.append(float(a @ ref / (np.linalg.norm(a) * np.linalg.norm(ref))))
        times = measure(lambda e=encoder: [e(f) for f in feats], torch.device("cuda"), 20)
        key = "tf32_on" if tf32 else "tf32_off"
        out[key] = {
            "min_cosine": min(cosines),
            "median_ms_per_reference": statistics.median(times) / len(feats),
        }
        print(
            f"{key}: min cosine {min(cosines):.9f}, {out[key]['median_ms_per_reference']:.3f} ms per reference "
            f"(1-6 s, one call each, CPU features in)"
        )
    if args.record:
        Path(args.record).write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
