"""The CUDA CAM++ path for CosyVoice3, GLM-TTS and Ming-TTS on a GPU: what it costs a process that
has no CUDA context (CosyVoice3's and GLM-TTS's processors in the API server), and its parity with
and speed against ONNX Runtime as each model calls it.

Runs on a machine with torch, torchaudio, onnx, onnxruntime and numpy only (no vLLM, no vllm-omni):

    PYTHONPATH=. python3 benchmarks/speaker_processors_gpu.py --record docs/benchmarks/speaker-processors.json

Stand-ins: campplus.onnx (real structure, random weights; `spk make-standin`), synthetic
speech-like references. The models' own code cannot run here (it needs vLLM), so each model's call is
reproduced as vllm-omni 0.30.0 writes it: Kaldi fbank (torchaudio, 80 bins, dither 0) of the 16 kHz
waveform minus its mean, `session.run(None, {input: feat[None]})`, ONNX Runtime on the CPU with the
model's thread count (CosyVoice3 1, Ming-TTS 2, GLM-TTS ONNX Runtime's default); the CUDA path is the
same call on omni-deploy's guarded session facade (`integrations.guard`), as the plugin installs it.

1. A CUDA context in a fresh process (a child): wall time and host RSS of the first CUDA call, and
   the GPU memory the process then holds (nvidia-smi, device-wide used memory before and after).
2. Then, in that process: loading the encoder and its first embedding (CUDA graph capture), the
   GPU memory and RSS that adds, and the steady-state time of one 6 s reference.
3. Per model: min cosine against ONNX Runtime over 24 references of 1-12 s, and median times of one
   reference of 2, 6 and 12 s (front end included, the same for both).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

CHILD = r"""
import json, os, resource, subprocess, sys, time
def rss_mib():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
def say(what, **kw):
    print(json.dumps({"step": what, **kw}), flush=True)
    sys.stdin.readline()  # the parent reads nvidia-smi, then lets us go on
import torch
say("imported", rss_mib=rss_mib())
t = time.perf_counter()
torch.zeros(1, device="cuda"); torch.cuda.synchronize()
say("context", seconds=time.perf_counter() - t, rss_mib=rss_mib())
from omni_deploy.speaker import load_encoder
from omni_deploy.speaker.inputs import synthetic_one
from omni_deploy.speaker.fbank import fbank
t = time.perf_counter()
encoder = load_encoder(sys.argv[1], device="cuda")
loaded = time.perf_counter() - t
ref = synthetic_one(6.0, seed=1)
feat = fbank([torch.from_numpy(ref.waveform)])[0]
t = time.perf_counter()
encoder(feat); torch.cuda.synchronize()
first = time.perf_counter() - t
times = []
for _ in range(30):
    t = time.perf_counter(); encoder(feat); torch.cuda.synchronize(); times.append(time.perf_counter() - t)
times.sort()
say("encoder", load_seconds=loaded, first_call_seconds=first, steady_ms=1000 * times[len(times) // 2],
    rss_mib=rss_mib(), torch_reserved_mib=torch.cuda.memory_reserved() / 2**20)
"""


def gpu_used_mib() -> float | None:
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=30, check=True,
        ).stdout  # fmt: skip
        return float(out.split()[0])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return None


def context_cost(onnx: str) -> dict[str, Any]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    before = gpu_used_mib()
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, onnx], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
    )
    steps: dict[str, Any] = {"gpu_used_mib_before": before}
    assert child.stdout is not None and child.stdin is not None
    for line in child.stdout:
        step = json.loads(line)
        step["gpu_used_mib"] = gpu_used_mib()
        steps[step.pop("step")] = step
        child.stdin.write("\n")
        child.stdin.flush()
    child.wait(timeout=120)
    ctx, enc = steps.get("context", {}), steps.get("encoder", {})
    if before is not None and ctx.get("gpu_used_mib") is not None:
        ctx["gpu_mib_added"] = ctx["gpu_used_mib"] - before
    if ctx.get("gpu_used_mib") is not None and enc.get("gpu_used_mib") is not None:
        enc["gpu_mib_added"] = enc["gpu_used_mib"] - ctx["gpu_used_mib"]
    if "imported" in steps and ctx:
        ctx["rss_mib_added"] = ctx["rss_mib"] - steps["imported"]["rss_mib"]
    if ctx and enc:
        enc["rss_mib_added"] = enc["rss_mib"] - ctx["rss_mib"]
    return steps


MODELS = {  # model -> ONNX Runtime intra-op threads as vllm-omni 0.30.0 sets them (0: ORT's default)
    "cosyvoice3": 1,
    "glm_tts": 0,
    "ming_tts": 2,
}


def model_calls(onnx: str, repeats: int, device: str = "cuda", count: int = 24) -> dict[str, Any]:
    import numpy as np
    import onnxruntime
    import torch
    import torchaudio.compliance.kaldi as kaldi

    from omni_deploy.integrations.guard import GuardedSpeakerModel, SessionFacade, session_embedder
    from omni_deploy.speaker import load_encoder
    from omni_deploy.speaker.inputs import synthetic_one

    encoder = load_encoder(onnx, device=device)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)

    def feat_of(wave: np.ndarray) -> torch.Tensor:  # vllm-omni's front end, as all three write it
        speech = torch.from_numpy(wave).unsqueeze(0)
        feat = kaldi.fbank(speech, num_mel_bins=80, dither=0, sample_frequency=16000)
        return feat - feat.mean(dim=0, keepdim=True)

    def call(session: Any, wave: np.ndarray) -> np.ndarray:  # vllm-omni's call
        feat = feat_of(wave)
        return np.asarray(
            session.run(None, {session.get_inputs()[0].name: feat.unsqueeze(0).numpy()})[0]
        ).flatten()

    out: dict[str, Any] = {}
    lengths = (2.0, 6.0, 12.0) if count > 2 else (2.0,)
    refs = [synthetic_one(1.0 + 11.0 * i / max(count - 1, 1), seed=100 + i) for i in range(count)]
    for model, threads in MODELS.items():
        options = onnxruntime.SessionOptions()
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
        if threads:
            options.intra_op_num_threads = threads
        session = onnxruntime.InferenceSession(onnx, sess_options=options, providers=["CPUExecutionProvider"])
        guard = GuardedSpeakerModel(encoder, session_embedder(session), model, 3, warn=print)
        facade = SessionFacade(guard, session)
        cosines = []
        for ref in refs:
            a, b = (
                call(facade, ref.waveform).astype(np.float64),
                call(session, ref.waveform).astype(np.float64),
            )
            cosines.append(float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b))))
        timing = {}
        for seconds in lengths:
            wave = synthetic_one(seconds, seed=7).waveform
            row = {}
            for name, target in (("onnxruntime_cpu", session), ("cuda_torch", facade)):
                call(target, wave)
                samples = []
                for _ in range(repeats):
                    t = time.perf_counter()
                    call(target, wave)
                    sync()
                    samples.append(1000 * (time.perf_counter() - t))
                row[name] = statistics.median(samples)
            frontend = []
            for _ in range(repeats):
                t = time.perf_counter()
                feat_of(wave)
                frontend.append(1000 * (time.perf_counter() - t))
            row["front_end_cpu"] = statistics.median(frontend)
            row["speedup"] = row["onnxruntime_cpu"] / row["cuda_torch"]
            timing[f"{seconds:g}s"] = row
        out[model] = {
            "ort_threads": threads or "default",
            "min_cosine": min(cosines),
            "references": len(refs),
            "guard": guard.counters(),
            "ms": timing,
        }
    return out


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--onnx", help="campplus.onnx (default: a stand-in built here)")
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--record", help="write the results here as JSON")
    parser.add_argument("--device", default="cuda", help="cpu: a smoke run of step 3 only, without a GPU")
    parser.add_argument("--references", type=int, default=24, help="parity references per model")
    args = parser.parse_args()
    import torch

    onnx = args.onnx
    if onnx is None:
        from omni_deploy.speaker.standin import export_standin

        onnx = str(Path(tempfile.mkdtemp()) / "campplus.onnx")
        export_standin(Path(onnx))
    record: dict[str, Any] = {
        "benchmark": "speaker_processors_gpu",
        "command": "PYTHONPATH=. python3 benchmarks/speaker_processors_gpu.py",
        "gpu": torch.cuda.get_device_name() if args.device == "cuda" else "none (smoke run)",
        "torch": torch.__version__,
        "host": platform.node(),
        "cpus": os.cpu_count(),
        "onnx": "stand-in (random weights)" if args.onnx is None else args.onnx,
    }
    if args.device == "cuda":
        record["context"] = context_cost(onnx)
        print(json.dumps(record["context"], indent=1))
    record["models"] = model_calls(onnx, args.repeats, args.device, args.references)
    for model, data in record["models"].items():
        print(f"{model}: min cosine {data['min_cosine']:.7f} over {data['references']} references (ORT threads "
              f"{data['ort_threads']})")  # fmt: skip
        for length, row in data["ms"].items():
            print(f"  {length:>4}: onnxruntime {row['onnxruntime_cpu']:7.2f} ms, cuda-torch {row['cuda_torch']:6.2f} ms "
                  f"(x{row['speedup']:.1f}; front end {row['front_end_cpu']:.2f} ms of each)")  # fmt: skip
    if args.record:
        Path(args.record).write_text(json.dumps(record, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
