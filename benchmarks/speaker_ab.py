"""A/B of CAM++ kernel versions on one GPU: CUDA-graph replay time of this tree's model against
another tree's (or this tree's under other settings), each in its own process on the same
stand-in weights.

    git archive REV omni_deploy | tar -x -C /tmp/other     # here, before the GPU run
    PYTHONPATH=. python3 benchmarks/speaker_ab.py --other /tmp/other [--record FILE]
    PYTHONPATH=. python3 benchmarks/speaker_ab.py --other-env OMNI_DEPLOY_SPK_FRONT_END=torch

Prints one row per (version, batch) as measured, in the order run (this tree, the other, this tree
again, so that drift of the machine shows), and writes them as JSON to --record.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

CHILD = """
import json, sys, torch
from omni_deploy.speaker.bench import graph_replay_ms
from omni_deploy.speaker.fused_model import FusedCampplus
from omni_deploy.speaker.onnx_weights import read_weights
torch.backends.cuda.matmul.allow_tf32 = True
model = FusedCampplus(read_weights(sys.argv[1]), "cuda", "triton")
rows = []
torch.manual_seed(0)
with torch.no_grad():
    for batch in (1, 32):
        feats = torch.randn(batch, 600, 80, device="cuda")
        lengths = torch.full((batch,), 598, device="cuda")
        ms = graph_replay_ms(model, feats, lengths, int(sys.argv[2]))
        rows.append({"batch": batch, "replay_ms": ms, "out": model(feats, lengths).cpu().tolist()})
print(json.dumps(rows))
"""


def run(tree: Path, onnx: Path, repeats: int, extra_env: dict[str, str]) -> list[dict[str, Any]]:
    env = {**os.environ, **extra_env, "PYTHONPATH": str(tree)}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(onnx), str(repeats)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    rows: list[dict[str, Any]] = json.loads(done.stdout.strip().splitlines()[-1])
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--other", help="a tree holding the other omni_deploy package (default: this one)")
    parser.add_argument("--other-env", action="append", default=[], help="KEY=VALUE for the other side")
    parser.add_argument("--repeats", type=int, default=100)
    parser.add_argument("--record")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from omni_deploy.speaker.standin import export_standin

    onnx = Path(tempfile.mkdtemp()) / "standin.onnx"
    export_standin(onnx)
    other_env = dict(item.split("=", 1) for item in args.other_env)
    other = Path(args.other) if args.other else ROOT
    results = []
    sides = (("this", ROOT, {}), ("other", other, other_env), ("this again", ROOT, {}))
    first: dict[int, Any] = {}
    for label, tree, extra in sides:
        for row in run(tree, onnx, args.repeats, extra):
            # The same inputs on every side: the largest difference of the outputs from this
            # tree's first run (TF32 rounding apart, the versions compute the same function).
            out = np.asarray(row.pop("out"))
            reference = first.setdefault(row["batch"], out)
            row["max_abs_diff_vs_first"] = float(np.abs(out - reference).max())
            row["output_scale"] = float(np.abs(reference).max())
            results.append({"version": label, **row})
            print(
                f"{label:12} B={row['batch']:<3} {row['replay_ms']:.3f} ms "
                f"(outputs differ by {row['max_abs_diff_vs_first']:.2e} of {row['output_scale']:.2e})",
                flush=True,
            )
    if args.record:
        Path(args.record).write_text(
            json.dumps({"command": " ".join(sys.argv), "rows": results}, indent=2) + "\n"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
