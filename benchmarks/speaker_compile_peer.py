"""The peer a user would pick instead of our kernels: torch.compile of the unmodified 3D-Speaker
CAM++ module, replayed as one CUDA graph, against ours on the same features in the same process.

    PYTHONPATH=. python3 benchmarks/speaker_compile_peer.py --onnx campplus.onnx \
        [--mode max-autotune-no-cudagraphs] [--batches 1,32] [--record FILE]

For each batch size: B references of 6 s (598 frames, equal lengths, since the unmodified module
cannot mask padding), as fbank features on the GPU. The peer is compiled with inductor's freezing
on and `dynamic=False` (one compilation per shape, whose wall time is reported), then captured
by us as one CUDA graph (modes without "-no-cudagraphs" would add inductor's own graphs on top).
Ours is timed two ways on the same features: the public call `embed_features` and the replay of
its graph alone. speaker_gpu.py runs this as a child process with a time limit.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch

from omni_deploy.speaker.bench import measure, replay_ms
from omni_deploy.speaker.eager_baseline import reference_from_weights
from omni_deploy.speaker.encoder import get_encoder
from omni_deploy.speaker.fbank import fbank
from omni_deploy.speaker.fused_model import padded_length
from omni_deploy.speaker.inputs import synthetic_one
from omni_deploy.speaker.onnx_weights import read_weights


def captured(fn: Any) -> tuple[Any, torch.Tensor]:
    """`fn` warmed up on a side stream, then captured as a CUDA graph: (graph, its output)."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = fn()
    return graph, out


def peer_row(onnx: str, mode: str, batch: int, reps: int) -> dict[str, Any]:
    import torch._inductor.config as inductor_config

    inductor_config.freezing = True
    feats = fbank(
        [torch.from_numpy(synthetic_one(6.0, seed=1000 * batch + i).waveform).cuda() for i in range(batch)]
    )
    stacked = torch.stack(feats)  # [B, 598, 80]
    row: dict[str, Any] = {"batch": batch, "frames": int(stacked.shape[1]), "mode": mode}

    encoder = get_encoder(onnx, device="cuda", allow_tf32=True)
    ours = encoder.embed_features(feats)
    row["ours_public_ms"] = statistics.median(
        measure(lambda: encoder.embed_features(feats), torch.device("cuda"), reps)
    )
    graph = encoder._graphs[("features", batch, padded_length(int(stacked.shape[1])))]
    row["ours_replay_ms"] = replay_ms(graph.graph, reps)

    module = reference_from_weights(read_weights(onnx), "cuda")
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    with torch.no_grad():
        compiled = torch.compile(module, mode=mode, dynamic=False)
        start = time.perf_counter()
        compiled(stacked)
        torch.cuda.synchronize()
        row["compile_s"] = time.perf_counter() - start
        peer_graph, peer_out = captured(lambda: compiled(stacked))
        row["peer_replay_ms"] = replay_ms(peer_graph, reps)
    cosine = torch.nn.functional.cosine_similarity(peer_out.float(), ours.float(), dim=-1)
    row["min_cosine_peer_vs_ours"] = float(cosine.min())
    row["ratio_replay"] = row["peer_replay_ms"] / row["ours_replay_ms"]
    row["ratio_public"] = row["peer_replay_ms"] / row["ours_public_ms"]
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--onnx", required=True)
    parser.add_argument("--mode", default="max-autotune-no-cudagraphs")
    parser.add_argument("--batches", default="1,32")
    parser.add_argument("--repeats", type=int, default=100)
    parser.add_argument("--record")
    args = parser.parse_args()
    rows = []
    for batch in (int(b) for b in args.batches.split(",")):
        row = peer_row(args.onnx, args.mode, batch, args.repeats)
        rows.append(row)
        print(
            f"B={batch}: compile peer ({args.mode}) {row['peer_replay_ms']:.3f} ms replayed "
            f"(compiled in {row['compile_s']:.0f} s); ours {row['ours_replay_ms']:.3f} ms replayed, "
            f"{row['ours_public_ms']:.3f} ms public call; ratio {row['ratio_public']:.2f}x (public), "
            f"{row['ratio_replay']:.2f}x (replay); cosine {row['min_cosine_peer_vs_ours']:.6f}",
            file=sys.stderr,
            flush=True,
        )
        if args.record:
            Path(args.record).write_text(json.dumps(rows, indent=2) + "\n")
    print(json.dumps(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
