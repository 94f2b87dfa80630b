"""Where CAM++'s time goes on a GPU: per-kernel totals and a sweep of Triton tile sizes.

    PYTHONPATH=. python3 benchmarks/speaker_profile.py [--sweep]

Prints, for one 6 s reference and for 32 of them, the CUDA time per kernel name (profiler, one
eager forward) and the CUDA-graph replay time of each tile configuration.
"""

from __future__ import annotations

import copy
import itertools
import sys
import tempfile
from pathlib import Path

import torch

from omni_deploy.speaker import triton_kernels as tk
from omni_deploy.speaker.bench import graph_replay_ms
from omni_deploy.speaker.fused_model import FusedCampplus
from omni_deploy.speaker.onnx_weights import read_weights
from omni_deploy.speaker.standin import export_standin


def profile(model: FusedCampplus, feats: torch.Tensor, lengths: torch.Tensor, label: str) -> None:
    model(feats, lengths)
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        model(feats, lengths)
        torch.cuda.synchronize()
    events = [e for e in prof.key_averages() if e.device_time_total > 0]
    events.sort(key=lambda e: -e.device_time_total)
    total = sum(e.device_time_total for e in events)
    count = sum(e.count for e in events)
    print(f"\n== {label}: {count} kernels, {total / 1000:.3f} ms of kernel time")
    for e in events[:12]:
        print(f"{e.device_time_total / 1000:8.3f} ms {e.count:5d}x  {e.key[:90]}")


def main() -> int:
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    path = Path(tempfile.mkdtemp()) / "standin.onnx"
    export_standin(path)
    weights = read_weights(path)
    models = {k: FusedCampplus(weights, "cuda", k) for k in ("torch", "triton")}
    cases = {}
    for batch in (1, 32):
        feats = torch.randn(batch, 600, 80, device="cuda")
        lengths = torch.full((batch,), 598, device="cuda")
        cases[batch] = (feats, lengths)
    with torch.no_grad():
        for batch, (feats, lengths) in cases.items():
            for name, model in models.items():
                profile(model, feats, lengths, f"{name} B={batch}")
                print(f"graph replay {name} B={batch}: {graph_replay_ms(model, feats, lengths):.3f} ms")
        if "--sweep" not in sys.argv:
            return 0
        base = copy.deepcopy(tk.CONFIG)
        print("\n== tile sweep (graph replay ms)")
        sweeps = {
            "bottleneck": [(m, t, w) for m, t, w in itertools.product((16, 32, 64), (16, 32, 64), (1, 2, 4))],
            "local": [(t, w) for t, w in itertools.product((16, 32, 64), (1, 2, 4))],
        }
        for batch, (feats, lengths) in cases.items():
            size = "large" if batch >= tk.LARGE_BATCH else "small"
            for kind, options in sweeps.items():
                results = []
                for option in options:
                    tk.CONFIG.clear()
                    tk.CONFIG.update(copy.deepcopy(base))
                    cfg = tk.CONFIG[f"{kind}_{size}"]
                    if kind == "bottleneck":
                        cfg.update(BLOCK_M=option[0], BLOCK_T=option[1], num_warps=option[2])
                    else:
                        cfg.update(BLOCK_T=option[0], num_warps=option[1])
                    try:
                        results.append((graph_replay_ms(models["triton"], feats, lengths, 30), option))
                    except Exception as exc:  # a tile that does not compile is skipped
                        print(f"  {kind} {option}: {type(exc).__name__}")
                results.sort()
                print(f"B={batch} {kind}: best {results[:3]}")
        tk.CONFIG.clear()
        tk.CONFIG.update(base)
    return 0


if __name__ == "__main__":
    sys.exit(main())
