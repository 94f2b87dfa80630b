"""CAM++ on a GPU: parity with ONNX Runtime (TF32 off and on) and speed against the baselines.

Runs on a machine with torch, onnx, onnxruntime and numpy only (no omni-deploy install needed):

    PYTHONPATH=. python3 benchmarks/speaker_gpu.py --record docs/benchmarks/speaker-gpu.json

Builds a stand-in campplus.onnx (real structure, random weights) unless --onnx is given, prints a
parity summary, the public-call figures (each against the replay of the graph it runs), a latency
table, the torch.compile peer (benchmarks/speaker_compile_peer.py, run as a child process under a
time limit) and the targets, and writes everything as JSON to --record.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from omni_deploy.speaker.bench import as_json, format_table, measure, replay_ms, run_bench
from omni_deploy.speaker.encoder import get_encoder
from omni_deploy.speaker.fbank import SAMPLE_RATE, fbank
from omni_deploy.speaker.fused_model import padded_length
from omni_deploy.speaker.inputs import synthetic, synthetic_one
from omni_deploy.speaker.parity import features_of, run_parity, summary
from omni_deploy.speaker.precision import precision_scope
from omni_deploy.speaker.standin import STANDIN_NOTE, export_standin

# (public-call case, limit in ms): the calls vllm-omni and users make, medians.
TARGETS = {
    "encoder(feat), 6 s, CPU features (<= 1.0 ms)": ("6s x1 encoder(feat) cpu", 1.0),
    "embed_waveforms, 6 s, GPU waveform (<= 1.2 ms)": ("6s x1 embed_waveforms gpu", 1.2),
    "embed_features, 1-6 s x32, GPU features (<= 5.0 ms)": ("1-6s x32 embed_features gpu", 5.0),
}
PEER_TARGETS = {1: 2.0, 32: 1.5}  # ours at least this many times faster than the compile peer


def triton_version() -> str | None:
    try:
        import triton
    except ImportError:
        return None
    return str(triton.__version__)


def kernel_count(encoder: Any, feat: torch.Tensor) -> int:
    """CUDA kernels in one eager forward (what a graph replays) of one reference."""
    padded = torch.zeros(1, padded_length(feat.shape[0]), 80, device=encoder.device)
    padded[0, : feat.shape[0]] = feat.to(encoder.device)
    lengths = torch.tensor([feat.shape[0]], device=encoder.device)
    with torch.no_grad(), precision_scope(True):
        encoder.model(padded, lengths)
        torch.cuda.synchronize()
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            encoder.model(padded, lengths)
            torch.cuda.synchronize()
    return sum(e.count for e in prof.key_averages() if e.device_time_total > 0)


def public_calls(encoder: Any, repeats: int) -> dict[str, dict[str, float]]:
    """Median time of each public call, against the median replay of the graph it runs."""
    dev = encoder.device
    one = [synthetic_one(6.0, seed=11)]
    mixed = synthetic(32, seed=7)
    cases: dict[str, tuple[Any, str, list[Any]]] = {}
    for label, refs in (("6s x1", one), ("1-6s x32", mixed)):
        waves = [torch.from_numpy(r.waveform).to(dev) for r in refs]
        feats = fbank(waves)
        cpu = [f.cpu() for f in feats]
        if len(refs) == 1:
            cases[f"{label} encoder(feat) cpu"] = (lambda f=cpu[0]: encoder(f), "features", feats)
        cases[f"{label} embed_features cpu"] = (lambda f=cpu: encoder.embed_features(f), "features", feats)
        cases[f"{label} embed_features gpu"] = (lambda f=feats: encoder.embed_features(f), "features", feats)
        cases[f"{label} embed_waveforms gpu"] = (
            lambda w=waves: encoder.embed_waveforms(w, SAMPLE_RATE),
            "waveforms",
            feats,
        )
    out = {}
    for name, (call, kind, feats) in cases.items():
        public = statistics.median(measure(call, dev, repeats))
        bucket = next(b for b in (1, 2, 4, 8, 16, 32) if b >= len(feats))
        graph = encoder._graphs[(kind, bucket, padded_length(max(int(f.shape[0]) for f in feats)))]
        replay = replay_ms(graph.graph, repeats)
        out[name] = {"public_ms": public, "replay_ms": replay, "overhead_ms": public - replay}
        print(
            f"{name:<32} public {public:.3f} ms, graph replay {replay:.3f} ms, beyond replay {public - replay:.3f} ms"
        )
    return out


def compile_peer(onnx_path: str, mode: str, timeout: float, batches: str, record: Path) -> dict[str, Any]:
    """benchmarks/speaker_compile_peer.py in a child process; what it measured before any timeout.

    The child writes `record` after each batch size, so it also survives this process being
    stopped (a device call's own time limit, say)."""
    command = [
        sys.executable,
        str(Path(__file__).with_name("speaker_compile_peer.py")),
        "--onnx",
        onnx_path,
        "--mode",
        mode,
        "--batches",
        batches,
        "--record",
        str(record),
    ]
    try:
        done = subprocess.run(command, timeout=timeout, capture_output=True, text=True)
        status = "ok" if done.returncode == 0 else f"failed ({done.returncode}): {done.stderr[-2000:]}"
    except subprocess.TimeoutExpired:
        status = f"stopped after {timeout:g} s"
    rows = json.loads(record.read_text()) if record.exists() else []
    return {"mode": mode, "status": status, "rows": rows}


def waveform_graph_check(encoder: Any) -> dict[str, float]:
    """The waveform graphs (fbank inside) against fbank run eagerly, then the feature graphs."""
    waves = [torch.from_numpy(r.waveform).to(encoder.device) for r in synthetic(32, seed=21)]
    direct = encoder.embed_waveforms(waves, SAMPLE_RATE)
    staged = encoder.embed_features(fbank(waves))
    cosine = torch.nn.functional.cosine_similarity(direct, staged, dim=-1)
    scale = staged.norm(dim=-1, keepdim=True)
    return {
        "min_cosine": float(cosine.min()),
        "max_abs_diff_normalised": float(((direct - staged) / scale).abs().max()),
    }


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--onnx", help="campplus.onnx to use (default: build a stand-in)")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--parity-refs", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--seconds", default="6", help="reference lengths of the equal-length cases")
    parser.add_argument("--batches", default="1,32", help="batch sizes of the equal-length cases")
    parser.add_argument(
        "--compile-mode", default="max-autotune-no-cudagraphs", help="torch.compile mode of the peer"
    )
    parser.add_argument(
        "--compile-timeout", type=float, default=300.0, help="seconds for the peer, all shapes"
    )
    parser.add_argument("--compile-batches", default="1,32", help="batch sizes of the peer ('' to skip it)")
    parser.add_argument(
        "--public-only", action="store_true", help="only the public-call figures (quick check)"
    )
    parser.add_argument("--record", help="write the full results here as JSON")
    return parser


def _parity(record: dict, onnx_path: str, args: argparse.Namespace) -> None:
    """Synthetic references of 1-6 s plus the segment-boundary lengths, ours against ONNX Runtime."""
    refs = synthetic(args.parity_refs, seed=3)
    for frames in (40, 199, 200, 201, 398, 400, 402, 598):
        samples = 400 + 160 * (frames - 1)
        refs.append(synthetic_one(samples / 16000, seed=frames, name=f"frames-{frames}"))
    kernels_used = get_encoder(onnx_path, device=args.device).model.backend
    record["kernels"] = kernels_used
    for kernels in dict.fromkeys([kernels_used, "torch"]):
        cases = run_parity(onnx_path, refs, args.device, [False, True], backend=kernels, one_by_one=True)
        record[f"parity_{kernels}"] = summary(cases)
        for mode in ("tf32_off", "tf32_on"):
            s = record[f"parity_{kernels}"][mode]
            print(
                f"parity [{kernels}] {mode}: min cosine {s['min_cosine']:.9f}, "
                f"(one by one {s['min_cosine_single']:.9f}, batched {s['min_cosine_batched']:.9f}), "
                f"max |diff| {s['max_abs_diff']:.3e}, {s['cases']} cases"
            )


def _contract(record: dict, onnx_path: str, args: argparse.Namespace) -> None:
    """The callable contract vllm-omni uses: [T, 80] CPU features in, [1, 192] on the device out."""
    encoder = get_encoder(onnx_path, device=args.device, allow_tf32=True)
    feat = features_of([synthetic_one(6.0, seed=11)])[0]
    out = encoder(feat)
    assert tuple(out.shape) == (1, 192) and out.device.type == torch.device(args.device).type
    if encoder.device.type == "cuda":
        record["public_calls"] = public_calls(encoder, args.repeats)
        record["kernels_per_forward"] = kernel_count(encoder, feat)
        print(f"kernels in one forward of a 6 s reference: {record['kernels_per_forward']}")
    record["waveform_graphs"] = waveform_graph_check(encoder)
    print(f"waveform graphs vs fbank then features: {record['waveform_graphs']}")


def _torch_kernels(record: dict, onnx_path: str, args: argparse.Namespace) -> None:
    """The same encoder with the torch dense layers instead of the Triton kernels, for comparison."""
    torch_encoder = get_encoder(onnx_path, device=args.device, backend="torch")
    dev = torch.device(args.device)
    record["torch_kernels"] = {}
    for label, refs_ in (("6s x1", [synthetic_one(6.0, seed=1000)]), ("1-6s x32", synthetic(32, seed=7))):
        feats_ = features_of(refs_)
        med = statistics.median(measure(lambda f=feats_: torch_encoder.embed_features(f), dev, args.repeats))
        record["torch_kernels"][label] = med
        print(f"ours with torch dense layers, {label}: {med:.3f} ms median per call")


def _compile_peer(record: dict, onnx_path: str, args: argparse.Namespace) -> None:
    peer_record = (
        Path(args.record).with_suffix(".compile-peer.json")
        if args.record
        else Path(tempfile.mkdtemp()) / "compile-peer.json"
    )
    record["compile_peer"] = compile_peer(
        onnx_path, args.compile_mode, args.compile_timeout, args.compile_batches, peer_record
    )
    print(f"compile peer: {record['compile_peer']['status']}")
    for row in record["compile_peer"]["rows"]:
        print(
            f"  B={row['batch']}: peer {row['peer_replay_ms']:.3f} ms replayed (compiled in "
            f"{row['compile_s']:.0f} s, {row['mode']}); ours {row['ours_replay_ms']:.3f} ms replayed, "
            f"{row['ours_public_ms']:.3f} ms public; {row['ratio_public']:.2f}x"
        )


def _verdicts(record: dict, lookup: dict) -> dict:
    """Each target of docs/benchmarks.md, met or missed, from the public calls and the peer."""
    verdicts = {}
    for label, (case, limit) in TARGETS.items():
        if case in record.get("public_calls", {}):
            value = record["public_calls"][case]["public_ms"]
            verdicts[label] = {"value": value, "limit": limit, "met": value <= limit}
    for row in record.get("compile_peer", {}).get("rows", []):
        factor = PEER_TARGETS.get(row["batch"])
        if factor is not None:  # peer replayed against our public call on the same features
            verdicts[f"speed-up vs torch.compile peer, B={row['batch']} (>= {factor:g}x)"] = {
                "value": row["ratio_public"],
                "limit": factor,
                "met": row["ratio_public"] >= factor,
            }
    public = record.get("public_calls", {}).get("6s x1 encoder(feat) cpu")
    if public and ("6s x1", "ort-cpu-1thread") in lookup:
        ratio = lookup[("6s x1", "ort-cpu-1thread")].per_ref_ms / public["public_ms"]
        verdicts["speed-up of encoder(feat) vs ort-cpu-1thread (>= 50x)"] = {
            "value": ratio,
            "limit": 50.0,
            "met": ratio >= 50.0,
        }
    return verdicts


def main() -> int:
    args = _parser().parse_args()
    record: dict = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu",
        "torch": torch.__version__,
        "triton": triton_version(),
        "python": platform.python_version(),
        "command": " ".join(sys.argv),
    }

    def save() -> None:
        """Written after each phase, so that a run cut short still leaves what it measured."""
        if args.record:
            Path(args.record).parent.mkdir(parents=True, exist_ok=True)
            Path(args.record).write_text(json.dumps(record, indent=2))

    onnx_path = args.onnx
    if onnx_path is None:
        onnx_path = str(Path(tempfile.mkdtemp()) / "campplus-standin.onnx")
        record["graph"] = export_standin(Path(onnx_path)).__dict__
        record["weights"] = STANDIN_NOTE
    print(f"model: {onnx_path} ({record.get('weights', 'given file')})", flush=True)
    if args.public_only:
        record["public_calls"] = public_calls(get_encoder(onnx_path, device=args.device), args.repeats)
        save()
        return 0
    _parity(record, onnx_path, args)
    save()
    _contract(record, onnx_path, args)
    save()
    seconds = tuple(float(x) for x in args.seconds.split(","))
    batches = tuple(int(x) for x in args.batches.split(","))
    rows = run_bench(onnx_path, device=args.device, seconds=seconds, batches=batches, repeats=args.repeats)
    record["bench"] = as_json(rows)
    print(format_table(rows))
    save()
    _torch_kernels(record, onnx_path, args)
    save()
    if args.compile_batches:
        _compile_peer(record, onnx_path, args)
    record["lookup_note"] = (
        "targets judge the public calls of the encoder, with the kernels named in 'kernels'"
    )
    record["targets"] = verdicts = _verdicts(record, {(r.case, r.backend): r for r in rows})
    for label, v in verdicts.items():
        print(f"{'MET ' if v['met'] else 'MISS'} {label}: {v['value']:.3f}")
    save()
    return 0


if __name__ == "__main__":
    sys.exit(main())
