"""Tune the Triton tile sizes of the CAM++ dense layers on this GPU, by coordinate descent.

    PYTHONPATH=. python3 benchmarks/speaker_tune.py --out tiles.json
    OMNI_DEPLOY_SPK_TILES="$(cat tiles.json)" PYTHONPATH=. python3 benchmarks/speaker_gpu.py ...

Times CUDA-graph replays of the whole model (stand-in weights) for one 6 s reference and for 32,
varying one group of tile parameters at a time, and writes the best settings as JSON.
"""

from __future__ import annotations

import argparse
import copy
import itertools
import json
import sys
import tempfile
from pathlib import Path

import torch

from omni_deploy.speaker import triton_kernels as tk
from omni_deploy.speaker.bench import graph_replay_ms
from omni_deploy.speaker.fused_model import FusedCampplus
from omni_deploy.speaker.onnx_weights import read_weights
from omni_deploy.speaker.standin import export_standin


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", required=True)
    parser.add_argument("--only", default="", help="comma-separated CONFIG keys to tune (default: all)")
    args = parser.parse_args()
    only = set(filter(None, args.only.split(",")))
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    path = Path(tempfile.mkdtemp()) / "standin.onnx"
    export_standin(path)
    model = FusedCampplus(read_weights(path), "cuda", "triton")
    cases = {
        "small": (torch.randn(1, 600, 80, device="cuda"), torch.full((1,), 598, device="cuda")),
        "large": (torch.randn(32, 600, 80, device="cuda"), torch.randint(100, 599, (32,), device="cuda")),
    }
    best: dict[str, dict[str, int]] = {}
    with torch.no_grad():
        for size, (feats, lengths) in cases.items():
            base = graph_replay_ms(model, feats, lengths)
            print(f"[{size}] start: {base:.3f} ms", flush=True)
            groups = {
                f"bottleneck_{size}": [
                    {"BLOCK_K": k, "num_stages": s} for k, s in itertools.product((32, 64, 128), (2, 3, 4, 5))
                ]
                + [
                    {"BLOCK_M": m, "BLOCK_T": t, "num_warps": w}
                    for m, t, w in itertools.product(
                        (16, 32) if size == "small" else (32, 64, 128),
                        (16, 32) if size == "small" else (32, 64),
                        (1, 2, 4),
                    )
                ],
                f"local_{size}": [
                    {"BLOCK_T": t, "BLOCK_K": k, "num_stages": s}
                    for t, k, s in itertools.product((16, 32), (32, 64, 128), (2, 3))
                ]
                + [{"num_warps": w} for w in (1, 2, 4, 8)],
            }
            for key, options in groups.items():
                if only and key not in only:
                    continue
                for option in options:
                    saved = copy.deepcopy(tk.CONFIG[key])
                    tk.CONFIG[key].update(option)
                    try:
                        ms = graph_replay_ms(model, feats, lengths)
                    except Exception as exc:  # a tile that does not compile or fit is skipped
                        print(f"  {key} {option}: {type(exc).__name__}", flush=True)
                        tk.CONFIG[key] = saved
                        continue
                    if ms < base * 0.99:
                        base = ms
                        print(f"  {key} {option}: {ms:.3f} ms (kept)", flush=True)
                    else:
                        tk.CONFIG[key] = saved
                best[key] = dict(tk.CONFIG[key])
            print(f"[{size}] tuned: {base:.3f} ms", flush=True)
    out = best
    Path(args.out).write_text(json.dumps(out, indent=2))
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
