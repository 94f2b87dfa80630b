"""CAM++ on a GPU: parity with ONNX Runtime (TF32 off and on) and speed against the baselines.

Runs on a machine with torch, onnx, onnxruntime and numpy only (no omni-deploy install needed):

    PYTHONPATH=. python3 benchmarks/speaker_gpu.py --record docs/benchmarks/speaker-gpu.json

Builds a stand-in campplus.onnx (real structure, random weights) unless --onnx is given, prints a
parity summary and a latency table, and writes everything as JSON to --record.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from omni_deploy.speaker.bench import as_json, format_table, measure, run_bench
from omni_deploy.speaker.encoder import get_encoder
from omni_deploy.speaker.fbank import SAMPLE_RATE, fbank
from omni_deploy.speaker.fused_model import padded_length
from omni_deploy.speaker.inputs import synthetic, synthetic_one
from omni_deploy.speaker.parity import features_of, run_parity, summary
from omni_deploy.speaker.precision import precision_scope
from omni_deploy.speaker.standin import STANDIN_NOTE, export_standin

TARGETS = {
    "ours 6s x1 median ms (<= 1.0)": ("6s x1", "ours", "median_ms", 1.0),
    "fbank+ours 6s x1 median ms (<= 1.5)": ("6s x1", "fbank+ours", "median_ms", 1.5),
    "ours 1-6s x32 median ms per call (<= 5.0)": ("1-6s x32", "ours", "median_ms", 5.0),
}


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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--onnx", help="campplus.onnx to use (default: build a stand-in)")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--parity-refs", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--seconds", default="3,6", help="reference lengths of the equal-length cases")
    parser.add_argument("--batches", default="1,8,32", help="batch sizes of the equal-length cases")
    parser.add_argument("--record", help="write the full results here as JSON")
    args = parser.parse_args()

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

    # Parity: synthetic references of 1-6 s plus the segment-boundary lengths.
    refs = synthetic(args.parity_refs, seed=3)
    for frames in (40, 199, 200, 201, 398, 400, 402, 598):
        samples = 400 + 160 * (frames - 1)
        refs.append(synthetic_one(samples / 16000, seed=frames, name=f"frames-{frames}"))
    kernels_used = get_encoder(onnx_path, device=args.device).model.backend
    record["kernels"] = kernels_used
    for kernels in dict.fromkeys([kernels_used, "torch"]):
        cases = run_parity(onnx_path, refs, args.device, [False, True], backend=kernels)
        record[f"parity_{kernels}"] = summary(cases)
        for mode in ("tf32_off", "tf32_on"):
            s = record[f"parity_{kernels}"][mode]
            print(
                f"parity [{kernels}] {mode}: min cosine {s['min_cosine']:.9f}, "
                f"max |diff| {s['max_abs_diff']:.3e}, {s['cases']} cases"
            )

    save()

    # The callable contract vllm-omni uses: [T, 80] CPU features in, [1, 192] on the device out.
    encoder = get_encoder(onnx_path, device=args.device, allow_tf32=True)
    feat = features_of([synthetic_one(6.0, seed=11)])[0]
    out = encoder(feat)
    assert tuple(out.shape) == (1, 192) and out.device.type == torch.device(args.device).type
    samples = measure(lambda: encoder(feat), torch.device(args.device), args.repeats)
    record["contract_6s_median_ms"] = statistics.median(samples)
    print(
        f"callable contract, 6 s reference from CPU features: {record['contract_6s_median_ms']:.3f} ms median"
    )

    if encoder.device.type == "cuda":
        record["kernels_per_forward"] = kernel_count(encoder, feat)
        print(f"kernels in one forward of a 6 s reference: {record['kernels_per_forward']}")
    record["waveform_graphs"] = waveform_graph_check(encoder)
    print(f"waveform graphs vs fbank then features: {record['waveform_graphs']}")

    save()

    seconds = tuple(float(x) for x in args.seconds.split(","))
    batches = tuple(int(x) for x in args.batches.split(","))
    rows = run_bench(onnx_path, device=args.device, seconds=seconds, batches=batches, repeats=args.repeats)
    record["bench"] = as_json(rows)
    print(format_table(rows))
    save()
    # The same encoder with the torch dense layers instead of the Triton kernels, for comparison.
    torch_encoder = get_encoder(onnx_path, device=args.device, backend="torch")
    dev = torch.device(args.device)
    record["torch_kernels"] = {}
    for label, refs_ in (("6s x1", [synthetic_one(6.0, seed=1000)]), ("1-6s x32", synthetic(32, seed=7))):
        feats_ = features_of(refs_)
        med = statistics.median(measure(lambda f=feats_: torch_encoder.embed_features(f), dev, args.repeats))
        record["torch_kernels"][label] = med
        print(f"ours with torch dense layers, {label}: {med:.3f} ms median per call")
    lookup = {(r.case, r.backend): r for r in rows}
    record["lookup_note"] = "targets use the 'ours' rows, which run the kernels named in 'kernels'"
    verdicts = {}
    for label, (case, backend, attr, limit) in TARGETS.items():
        if (case, backend) in lookup:  # cases left out by --seconds/--batches are not judged
            value = getattr(lookup[(case, backend)], attr)
            verdicts[label] = {"value": value, "limit": limit, "met": value <= limit}
    for backend, factor in (("ort-cpu-1thread", 50.0), ("eager-torch", 20.0)):
        if ("6s x1", "ours") in lookup and ("6s x1", backend) in lookup:
            ratio = lookup[("6s x1", backend)].per_ref_ms / lookup[("6s x1", "ours")].per_ref_ms
            verdicts[f"speed-up vs {backend} (>= {factor:g}x)"] = {
                "value": ratio,
                "limit": factor,
                "met": ratio >= factor,
            }
    record["targets"] = verdicts
    for label, v in verdicts.items():
        print(f"{'MET ' if v['met'] else 'MISS'} {label}: {v['value']:.3f}")
    save()
    return 0


if __name__ == "__main__":
    sys.exit(main())
