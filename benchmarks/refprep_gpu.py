"""Reference preparation on a GPU: vllm-omni 0.30.0's per-voice path against the batched pass.

Issue 30 (the default sections, `--only policies,variance`): the stage's precision policy
(token2wav_allow_tf32 true: TF32 matmuls; false: strict FP32; cuDNN TF32 the process's, torch's
default on) side by side: per policy, the per-voice path (plugin) run under that policy, the
batched pass (the route the policy chooses) and its variants on decoded voices, the first call
after `warm_up` (and what it captured), and parity against the per-voice path under the same
policy (tokens bit for bit, embeddings against ONNX Runtime); then upstream's own token variance
across settings (the same run again, cudnn.benchmark on, one torch thread, s3tokenizer's own batch
of two, cuDNN TF32 off, TF32 matmuls, the whole branch on the CPU) as the reference row.

    PYTHONPATH=. python3 benchmarks/refprep_gpu.py --record docs/benchmarks/refprep-policies-h200.json

Issue 26's sections (`--only timings,phases,serving,parity,probes,tf32,cpu_left`) follow.

Runs where only torch, torchaudio, onnx, onnxruntime, numpy and the s3tokenizer package are
installed (no vLLM, no vllm-omni, no omni-deploy install):

    PYTHONPATH=. python3 benchmarks/refprep_gpu.py --record docs/benchmarks/refprep-gpu.json

For N = 1, 4, 8, 32 new reference voices of 1-6 s (16, 22.05, 24, 44.1 and 48 kHz, mono and
stereo, written as 16-bit WAV files as vllm-omni writes request references), one run times:
- per-voice, plugin: vllm-omni 0.30.0's `_prepare_prompt` operations in its order, one voice after
  another (a reproduction, omni_deploy/speaker/refprep/upstream_ops.py: vLLM and vllm-omni cannot be
  installed here; the vllm test tier checks it against the real code bit for bit), with CAM++ on
  CUDA through omni-deploy's encoder, as with the plugin;
- per-voice, all CPU: the same with CAM++ on ONNX Runtime (one thread), 0.30.0 without the plugin;
- batched: omni_deploy.speaker.refprep in one pass (exact tokens: voices near a rounding boundary
  are recomputed one by one), and variants: without that recheck, with CAM++ and the S3 tokenizer
  on one stream.
Each timing covers everything `_prepare_prompt` does from the WAV file on: decoding (a stand-in
reader: the stdlib `wave` module, as soundfile is not installed here), resampling, both mels, the
S3 tokens, the Kaldi fbank and CAM++. Then parity on the 32 voices (tokens against the per-voice
path, before and after the recheck; the quantizer's values; embeddings against the per-voice path
and against ONNX Runtime, TF32 on and off; mels) and the CPU time left per voice.

Stand-in weights: CAM++ from `omni-deploy spk make-standin`'s exporter, the S3 tokenizer as
s3tokenizer's own S3TokenizerV2 in its real configuration (1280 wide, 6 layers) with random weights.
Precision as in a vLLM 0.30.0 worker by default: matmuls FP32 (VLLM_FLOAT32_MATMUL_PRECISION
highest), cuDNN TF32 as torch leaves it (on); CAM++ TF32 on (token2wav_allow_tf32's default).
"""

from __future__ import annotations

import argparse
import itertools
import json
import platform
import statistics
import sys
import tempfile
import time
import wave
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from omni_deploy.speaker.encoder import get_encoder
from omni_deploy.speaker.inputs import synthetic_one
from omni_deploy.speaker.parity import ort_session
from omni_deploy.speaker.refprep import upstream_ops
from omni_deploy.speaker.refprep.prepare import ReferencePreparer, Voice
from omni_deploy.speaker.refprep.s3_tokens import FSQ_SCALE
from omni_deploy.speaker.standin import export_standin

RATES = (24000, 16000, 22050, 44100, 48000)  # voice 0: 6 s at 24 kHz, what requests are normalised to
SIZES = (1, 4, 8, 32)
# (N, limit ms) for the batched pass, and (N, least speed-up over the per-voice path), issue 26.
TARGET_MS = {1: 4.0, 8: 8.0, 32: 20.0}
TARGET_SPEEDUP = {8: 20.0, 32: 30.0}
# Issue 30, per policy: (N, limit ms), (N, least speed-up), least min cosine against ONNX Runtime.
POLICIES = {"tf32": True, "fp32": False}  # token2wav_allow_tf32
POLICY_TARGET_MS = {"tf32": {1: 3.0, 8: 6.0, 32: 15.0}, "fp32": {8: 15.0, 32: 40.0}}
POLICY_TARGET_SPEEDUP = {"tf32": {8: 20.0, 32: 40.0}, "fp32": {}}
POLICY_TARGET_COSINE = {"tf32": 0.99999, "fp32": 0.999999}
POLICY_VARIANTS: dict[str, dict[str, Any]] = {
    "batched": {},  # the route the policy chooses, rechecks batched
    "batched, no recheck": {"margin": -1.0},
    "batched, device route": {"route": "device"},  # the all-GPU front end, whatever the policy
    "batched, own-shapes eagerly": {
        "route": "own-shapes",
        "own_shape_graphs": False,
    },  # before issue 30's end
}


def write_voices(folder: Path, count: int, seed: int) -> list[Path]:
    """`count` voices of 1-6 s at the five rates, every other one stereo, as 16-bit WAV files."""
    rng = np.random.default_rng(seed)
    paths = []
    for i in range(count):
        rate = RATES[i % len(RATES)]
        seconds = 6.0 if i == 0 else float(rng.uniform(1.0, 6.0))
        left = synthetic_one(seconds, seed=seed * 1000 + i, sample_rate=rate).waveform
        channels = [left] if i % 2 == 0 else [left, 0.8 * np.roll(left, 7)]
        pcm = np.clip(np.stack(channels, axis=1) * 32767.0, -32768, 32767).astype("<i2")
        path = folder / f"voice-{i:02d}-{rate}-{len(channels)}ch.wav"
        with wave.open(str(path), "wb") as handle:
            handle.setnchannels(len(channels))
            handle.setsampwidth(2)
            handle.setframerate(rate)
            handle.writeframes(pcm.tobytes())
        paths.append(path)
    return paths


def write_serving(folder: Path, count: int) -> list[Path]:
    """`count` request references as vllm-omni keeps them: 6 s at 24 kHz, mono, 16-bit."""
    paths = []
    for i in range(count):
        wave_ = synthetic_one(
            float(np.random.default_rng(i).uniform(1.0, 6.0)), seed=500 + i, sample_rate=24000
        )
        samples = np.zeros(6 * 24000, dtype=np.float32)
        samples[: wave_.waveform.size] = wave_.waveform  # shorter ones zero-padded, as vllm-omni does
        path = folder / f"ref-{i:02d}.wav"
        with wave.open(str(path), "wb") as handle:
            handle.setnchannels(1)
            handle.setsampwidth(2)
            handle.setframerate(24000)
            handle.writeframes(np.clip(samples * 32767.0, -32768, 32767).astype("<i2").tobytes())
        paths.append(path)
    return paths


def decode(path: Path) -> tuple[np.ndarray, int]:
    """Stand-in for vLLM's load_audio(path, sr=None, mono=True) (soundfile is not installed here):
    16-bit PCM / 32768 as float32, channels averaged."""
    with wave.open(str(path), "rb") as handle:
        channels, rate = handle.getnchannels(), handle.getframerate()
        raw = handle.readframes(handle.getnframes())
    data = np.frombuffer(raw, dtype="<i2").astype(np.float32)
    data *= np.float32(1.0 / 32768.0)
    if channels > 1:
        data = data.reshape(-1, channels).mean(axis=1, dtype=np.float32)
    return data, rate


def sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


SMOKE = False  # --smoke: every measurement once, no warm-up


def timed(fn: Callable[[], Any], repeats: int, warmup: int = 2) -> list[float]:
    if SMOKE:
        repeats, warmup = 1, 0
    for _ in range(warmup):
        fn()
    sync()
    out = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        sync()
        out.append((time.perf_counter() - start) * 1000.0)
    return out


def memory() -> tuple[float, float]:
    """MiB allocated and reserved by torch's allocator on the current device (0, 0 on the CPU)."""
    if not torch.cuda.is_available():
        return 0.0, 0.0
    return torch.cuda.memory_allocated() / 2**20, torch.cuda.memory_reserved() / 2**20


def summary(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "median_ms": statistics.median(ordered),
        "p90_ms": ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))],
        "min_ms": ordered[0],
        "runs": len(ordered),
    }


def cosine(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.double().reshape(-1), b.double().reshape(-1)
    return float(a @ b / (a.norm() * b.norm()))


VARIANTS: dict[str, dict[str, Any]] = {
    # name: ReferencePreparer options. "batched" is the default: the route the precision settings
    # call for (host under cuDNN TF32, torch's default), near-boundary tokens rechecked.
    "batched": {},
    "batched, no recheck": {"margin": -1.0},
    "batched, one stream": {"streams": False},
    "batched, one host thread": {"host_threads": 1},
    "batched, 8 host threads": {"host_threads": 8},
    "batched, no split-K": {"split_k": False},
    "batched, device route": {"route": "device"},
}


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)))
    parser.add_argument("--full-tokenizer", action=argparse.BooleanOptionalAction, default=True,
                        help="the S3 tokenizer's real configuration (off: a small one, for a CPU dry run)")  # fmt: skip
    parser.add_argument("--repeats", type=int, default=20, help="runs of each batched case")
    parser.add_argument("--smoke", action="store_true", help="one run of everything (a CPU dry run)")
    parser.add_argument("--serving-sizes", default="8,32",
                        help="N of the serving-shape case: every voice 6 s at 24 kHz, as vllm-omni normalises "
                        "request references ('' to skip)")  # fmt: skip
    parser.add_argument("--tf32-sizes", default="1,8,32",
                        help="N timed again with matmuls in TF32 (VLLM_FLOAT32_MATMUL_PRECISION=high) ('' to skip)")  # fmt: skip
    parser.add_argument("--record", help="write the results here as JSON")
    parser.add_argument("--only", default="policies,variance", help="comma-separated sections to run: issue 30's "
                        "policies, variance; issue 26's timings, phases, serving, parity, probes, tf32, cpu_left "
                        "('all': every one)")  # fmt: skip
    parser.add_argument("--policy-sizes", default="1,8,32", help="N timed per policy")
    parser.add_argument(
        "--warm-voices", type=int, default=32, help="max_voices of the warm-up before the first call"
    )
    return parser.parse_args()


def _ints(text: str) -> list[int]:
    return [int(s) for s in text.split(",") if s]


class Bench:
    """One run: the stand-in models, the voices, the preparers, and the record it writes."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.only = {s for s in args.only.split(",") if s and s != "all"}
        self.sizes = _ints(args.sizes)
        self.dev = dev = torch.device(args.device)
        self.on_gpu = dev.type == "cuda"
        torch.set_float32_matmul_precision("highest")  # vLLM 0.30.0's default VLLM_FLOAT32_MATMUL_PRECISION
        self.record: dict[str, Any] = {
            "host": platform.node(),
            "device": torch.cuda.get_device_name(dev) if self.on_gpu else "cpu",
            "torch": torch.__version__,
            "precision": {
                "float32_matmul_precision": torch.get_float32_matmul_precision(),
                "cudnn_allow_tf32": torch.backends.cudnn.allow_tf32,
                "campplus_allow_tf32": True,
            },
            "argv": sys.argv[1:],
        }
        from s3tokenizer.model import ModelConfig
        from s3tokenizer.model_v2 import S3TokenizerV2

        torch.manual_seed(0)
        small = ModelConfig(n_audio_state=128, n_audio_head=2, n_audio_layer=2)
        config = ModelConfig() if args.full_tokenizer else small
        self.tokenizer = S3TokenizerV2("speech_tokenizer_v2_25hz", config=config).to(dev).eval()
        self.record["s3_tokenizer"] = {"n_audio_state": config.n_audio_state, "n_audio_layer": config.n_audio_layer,
                                       "parameters": sum(p.numel() for p in self.tokenizer.parameters())}  # fmt: skip
        self.work = Path(tempfile.mkdtemp(prefix="refprep-"))
        onnx_path = self.work / "campplus.onnx"
        export_standin(onnx_path, seed=0)
        self.encoder = get_encoder(str(onnx_path), device=dev, allow_tf32=True)
        self.encoder_tf32_off = get_encoder(str(onnx_path), device=dev, allow_tf32=False)
        self.ort = ort_session(str(onnx_path), threads=1)
        self.paths = write_voices(self.work, max(self.sizes), seed=26)
        self.decoded_all = [decode(p) for p in self.paths]
        self.record["voices"] = [{"file": p.name, "seconds": round(len(v[0]) / v[1], 3), "rate": v[1]}
                                 for p, v in zip(self.paths, self.decoded_all, strict=True)]  # fmt: skip
        self.preparers = {name: self.make(options) for name, options in VARIANTS.items()}
        self.plugin_speaker = self.encoder.__call__
        self.cpu_speaker = upstream_ops.onnxruntime_speaker(self.ort, dev)

    def wanted(self, section: str) -> bool:
        return not self.only or section in self.only

    def save(self) -> None:
        if self.args.record:
            Path(self.args.record).write_text(json.dumps(self.record, indent=2) + "\n")

    # The batched pass's callables, as the plugin's hook gives them.
    def exact(self, voice: Voice, mel: torch.Tensor | None) -> torch.Tensor:
        samples = np.asarray(voice.samples)
        return upstream_ops.s3_tokens(samples, voice.sample_rate, self.tokenizer, self.dev, mel=mel)[0]

    def host_mels(self, voice: Voice) -> torch.Tensor:
        return upstream_ops.s3_mel(np.asarray(voice.samples), voice.sample_rate)

    def embed(self, waves: list[torch.Tensor]) -> torch.Tensor:
        return self.encoder.embed_waveforms(waves, 16000)

    def make(self, options: dict[str, Any]) -> ReferencePreparer:
        # Issue 26's sections ran before the policy existed: FP32 matmuls, as a vLLM worker's default.
        options = {"allow_tf32": False, **options}
        return ReferencePreparer(self.tokenizer, self.embed, self.dev, exact_tokens=self.exact,
                                 host_s3_mels=self.host_mels, **options)  # fmt: skip

    def make_for(self, allow_tf32: bool, options: dict[str, Any]) -> ReferencePreparer:
        """A preparer as the plugin builds it under this policy: CAM++ under it too."""
        encoder = self.encoder if allow_tf32 else self.encoder_tf32_off

        def embed(waves: list[torch.Tensor]) -> torch.Tensor:
            return encoder.embed_waveforms(waves, 16000)

        return ReferencePreparer(self.tokenizer, embed, self.dev, exact_tokens=self.exact,
                                 host_s3_mels=self.host_mels, allow_tf32=allow_tf32, **options)  # fmt: skip

    # Issue 30: the two policies side by side, and upstream's own variance.
    def policies(self) -> None:
        if not self.wanted("policies"):
            return
        from omni_deploy.speaker.precision import precision_scope

        out: dict[str, Any] = {}
        self.record["policies"] = out
        for policy, allow_tf32 in POLICIES.items():
            print(f"policy {policy}", file=sys.stderr, flush=True)
            row: dict[str, Any] = {"token2wav_allow_tf32": allow_tf32}
            out[policy] = row
            row["first_call_after_warm_up"] = self.first_call(allow_tf32)
            self.save()
            preparers = {name: self.make_for(allow_tf32, opts) for name, opts in POLICY_VARIANTS.items()}
            speaker = (self.encoder if allow_tf32 else self.encoder_tf32_off).__call__
            timings: dict[str, Any] = {}
            for n in _ints(self.args.policy_sizes):
                voices_n = self.decoded_all[:n]
                cell: dict[str, Any] = {}
                with precision_scope(allow_tf32):  # the per-voice path under the same policy
                    cell["per-voice, plugin"] = summary(
                        timed(lambda v=voices_n, sp=speaker: self.per_voice_decoded(v, sp), 3, warmup=1)
                    )
                for name, preparer in preparers.items():
                    try:
                        cell[name] = summary(
                            timed(
                                lambda p=preparer, v=voices_n: self.batched_decoded(p, v), self.args.repeats
                            )
                        )
                        stats = self.batched_decoded(preparer, voices_n)[1]
                        cell[name]["route"] = preparer.last_route.s3 if preparer.last_route else None
                        cell[name]["rechecked"] = stats.rechecked
                    except Exception as exc:  # one broken variant must not cost the run
                        cell[name] = {"error": f"{type(exc).__name__}: {exc}"}
                timings[str(n)] = cell
                row["timings"] = timings
                self.save()
            row["parity"] = {}
            for name in POLICY_VARIANTS:
                try:
                    row["parity"][name] = policy_parity(self, preparers[name], allow_tf32)
                except Exception as exc:
                    row["parity"][name] = {"error": f"{type(exc).__name__}: {exc}"}
                self.save()
            row["targets"] = policy_targets(policy, row)
            self.save()
            if allow_tf32:  # the default before own-shapes graphs (no capture in its warm-up)
                row["first_call_after_warm_up, own-shapes eagerly"] = self.first_call(
                    allow_tf32, {"own_shape_graphs": False}, budget_s=120.0
                )
                self.save()

    def first_call(
        self, allow_tf32: bool, options: dict[str, Any] | None = None, budget_s: float | None = None
    ) -> dict[str, Any]:
        """A fresh preparer (its own S3 graphs: none yet), `warm_up`, then the first call of each N;
        the device memory the warm-up left held (allocated and reserved by torch's allocator,
        graph pools included)."""
        preparer = self.make_for(allow_tf32, options or {})
        sync()
        allocated, reserved = memory()
        start = time.perf_counter()
        done = preparer.warm_up(self.args.warm_voices, budget_s=budget_s)
        sync()
        result: dict[str, Any] = {
            "options": options or {},
            "warm_up_ms": (time.perf_counter() - start) * 1000.0,
            "route": done.route,
            "graphs_captured_by_warm_up": done.graphs_captured,
            "warm_up_passes": done.passes,
            "warm_up_skipped": done.skipped,
        }
        after = memory()
        result["warm_up_memory_mib"] = {"allocated": after[0] - allocated, "reserved": after[1] - reserved}
        for n in _ints(self.args.policy_sizes):
            before = preparer._tokens.graphs
            start = time.perf_counter()
            self.batched_decoded(preparer, self.decoded_all[:n])
            sync()
            result[f"first call N={n} ms"] = (time.perf_counter() - start) * 1000.0
            result[f"first call N={n} S3 graphs captured"] = preparer._tokens.graphs - before
            second = timed(lambda n=n: self.batched_decoded(preparer, self.decoded_all[:n]), 3, warmup=0)
            result[f"next calls N={n} median ms"] = statistics.median(second)
        return result

    def variance(self) -> None:
        if not self.wanted("variance"):
            return
        print("upstream variance", file=sys.stderr, flush=True)
        self.record["upstream_variance"] = upstream_variance(self.decoded_all, self.tokenizer, self.dev)
        self.save()

    # The paths timed.
    def per_voice(self, paths_n: list[Path], speaker: Any) -> list[Any]:
        return [
            upstream_ops.prepare_one(*decode(path), self.tokenizer, speaker, self.dev) for path in paths_n
        ]

    def per_voice_decoded(self, voices: list[tuple[np.ndarray, int]], speaker: Any) -> list[Any]:
        return [upstream_ops.prepare_one(s, r, self.tokenizer, speaker, self.dev) for s, r in voices]

    @staticmethod
    def batched(preparer: ReferencePreparer, paths_n: list[Path]) -> Any:
        return preparer.prepare([Voice(*decode(p)) for p in paths_n])

    @staticmethod
    def batched_decoded(preparer: ReferencePreparer, voices: list[tuple[np.ndarray, int]]) -> Any:
        return preparer.prepare([Voice(s, r) for s, r in voices])

    def captures(self) -> None:
        """Graph captures (first call of each bucket) timed on their own, then kept out of the timings."""
        captures = {}
        for n in self.sizes:
            start = time.perf_counter()
            self.batched(self.preparers["batched, no recheck"], self.paths[:n])
            sync()
            captures[n] = (time.perf_counter() - start) * 1000.0
        self.record["first_call_ms"] = captures

    def timings(self) -> dict[str, dict[str, Any]]:
        timings: dict[str, dict[str, Any]] = {}
        for n in self.sizes if self.wanted("timings") else []:
            print(f"timing N={n}", file=sys.stderr, flush=True)
            timings[str(n)] = self.timing_row(n)
            self.record["timings"] = timings
            self.save()
        return timings

    def timing_row(self, n: int) -> dict[str, Any]:
        paths, repeats, voices_n = self.paths[:n], self.args.repeats, self.decoded_all[:n]
        row: dict[str, Any] = {}
        few = max(3, repeats // (4 if n >= 8 else 2))
        row["per-voice, plugin"] = summary(
            timed(lambda: self.per_voice(paths, self.plugin_speaker), few, warmup=1)
        )
        row["per-voice, all CPU"] = summary(
            timed(lambda: self.per_voice(paths, self.cpu_speaker), 3, warmup=1)
        )
        row["batched"] = summary(timed(lambda: self.batched(self.preparers["batched"], paths), repeats))
        row["decoded: per-voice, plugin"] = summary(
            timed(lambda: self.per_voice_decoded(voices_n, self.plugin_speaker), few, warmup=1)
        )
        row["rechecked"] = {}
        row["route"] = {}
        for name, preparer in self.preparers.items():
            try:
                row[f"decoded: {name}"] = summary(
                    timed(lambda p=preparer: self.batched_decoded(p, voices_n), repeats)
                )
                row["rechecked"][name] = self.batched_decoded(preparer, voices_n)[1].rechecked
                row["route"][name] = preparer.last_route.s3 if preparer.last_route else None
            except Exception as exc:  # one broken variant must not cost the run
                row[f"decoded: {name}"] = {"error": f"{type(exc).__name__}: {exc}"}
                print(f"{name}: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        return row

    def phases(self) -> None:
        profiler = self.make({"streams": False, "profile": self.on_gpu})
        phases: dict[str, Any] = {}
        for n in self.sizes if self.on_gpu and self.wanted("phases") else []:
            runs = []
            for _ in range(1 if SMOKE else 12):
                self.batched_decoded(profiler, self.decoded_all[:n])
                runs.append(dict(profiler.last_phases))
            phases[str(n)] = {name: statistics.median(r[name] for r in runs[2:] or runs) for name in runs[0]}
        self.record["phases_one_stream_ms"] = phases
        self.save()

    def serving(self) -> None:
        serving_sizes = _ints(self.args.serving_sizes) if self.wanted("serving") else []
        if not serving_sizes:
            return
        folder = self.work / "serving"
        folder.mkdir()
        serving = write_serving(folder, max(serving_sizes))
        rows: dict[str, Any] = {}
        for n in serving_sizes:
            print(f"timing serving shape N={n}", file=sys.stderr, flush=True)
            paths = serving[:n]
            row = {
                "per-voice, plugin": summary(
                    timed(lambda v=paths: self.per_voice(v, self.plugin_speaker), 3, 1)
                )
            }
            for name in ("batched", "batched, no recheck", "batched, device route"):
                row[name] = summary(
                    timed(lambda v=paths, p=self.preparers[name]: self.batched(p, v), self.args.repeats)
                )
            row["rechecked"] = self.batched(self.preparers["batched"], paths)[1].rechecked
            rows[str(n)] = row
        self.record["serving_shape"] = rows
        self.save()

    def parity_of(self, preparer: ReferencePreparer) -> dict[str, Any]:
        return parity(self.decoded_all, self.tokenizer, self.encoder, self.encoder_tf32_off, self.ort, self.dev,
                      preparer)  # fmt: skip

    def parity(self) -> None:
        self.record["parity"] = {}
        for name in (
            ("batched", "batched, no recheck", "batched, device route") if self.wanted("parity") else ()
        ):
            try:
                self.record["parity"][name] = self.parity_of(self.preparers[name])
            except Exception as exc:
                self.record["parity"][name] = {"error": f"{type(exc).__name__}: {exc}"}
        self.save()

    def probes(self) -> None:
        if not self.wanted("probes"):
            return
        self.record["probes"] = {
            "cudnn TF32 on (torch's default)": probes(
                self.decoded_all, self.tokenizer, self.dev, cudnn_tf32=True
            ),
            "cudnn TF32 off": probes(self.decoded_all, self.tokenizer, self.dev, cudnn_tf32=False),
        }
        self.save()

    def tf32(self) -> None:
        tf32_sizes = _ints(self.args.tf32_sizes) if self.on_gpu and self.wanted("tf32") else []
        if not tf32_sizes:
            return
        torch.set_float32_matmul_precision("high")
        try:
            fast = {name: self.make(VARIANTS[name]) for name in ("batched", "batched, device route")}
            rows = {}
            for n in tf32_sizes:
                print(f"timing TF32 matmuls N={n}", file=sys.stderr, flush=True)
                voices_n = self.decoded_all[:n]
                row = {"decoded: per-voice, plugin": summary(
                    timed(lambda v=voices_n: self.per_voice_decoded(v, self.plugin_speaker), 3, warmup=1))}  # fmt: skip
                for name, preparer in fast.items():
                    row[f"decoded: {name}"] = summary(
                        timed(lambda v=voices_n, p=preparer: self.batched_decoded(p, v), self.args.repeats)
                    )
                rows[str(n)] = row
            self.record["tf32_matmuls"] = {
                "timings": rows,
                "parity": {name: self.parity_of(p) for name, p in fast.items()},
            }
        finally:
            torch.set_float32_matmul_precision("highest")
        self.save()


def main() -> int:
    args = parse_args()
    global SMOKE
    SMOKE = args.smoke
    bench = Bench(args)
    bench.policies()
    bench.variance()
    if bench.only and not bench.only - {"policies", "variance"}:
        bench.save()
        print(report_policies(bench.record))
        return 0
    bench.captures()
    timings = bench.timings()
    bench.phases()
    bench.serving()
    bench.parity()
    bench.probes()
    bench.tf32()
    if bench.wanted("cpu_left"):
        bench.record["cpu_left"] = cpu_left(bench.paths, bench.preparers, bench.tokenizer, bench.plugin_speaker,
                                            bench.dev)  # fmt: skip
    bench.record["targets"] = targets(timings)
    bench.save()
    print(report(bench.record))
    return 0


def upstream_s3(tokenizer: Any, dev: torch.device, decoded: list[tuple[np.ndarray, int]],
                mels: list[torch.Tensor]) -> list[torch.Tensor]:  # fmt: skip
    """vllm-omni's S3 branch of each voice alone (its CPU log-mel given): [1, L] tokens on the CPU."""
    return [upstream_ops.s3_tokens(s, r, tokenizer, dev, mel=m)[0].cpu()
            for (s, r), m in zip(decoded, mels, strict=True)]  # fmt: skip


def policy_parity(bench: Bench, preparer: ReferencePreparer, allow_tf32: bool) -> dict[str, Any]:
    """One batched pass over all voices against the per-voice path under the same policy: tokens
    bit for bit; embeddings against the per-voice plugin path and ONNX Runtime."""
    import torchaudio.compliance.kaldi as kaldi

    from omni_deploy.speaker.precision import precision_scope

    decoded = bench.decoded_all
    got, stats = preparer.prepare([Voice(s, r) for s, r in decoded])
    encoder = bench.encoder if allow_tf32 else bench.encoder_tf32_off
    with precision_scope(allow_tf32):
        reference = [
            upstream_ops.prepare_one(s, r, bench.tokenizer, encoder.__call__, bench.dev) for s, r in decoded
        ]
    name = bench.ort.get_inputs()[0].name
    flips = tokens = 0
    flipped_voices, cos_ort, cos_plugin = [], [], []
    for i, (ref, out) in enumerate(zip(reference, got, strict=True)):
        assert out is not None
        tokens += ref[0].numel()
        flipped = int((ref[0] != out.speech_tokens).sum())
        flips += flipped
        if flipped:
            flipped_voices.append(
                {"voice": i, "flips": flipped, "margin": out.margin, "rechecked": out.rechecked}
            )
        samples16 = upstream_ops.torchaudio_resample(decoded[i][0], decoded[i][1], 16000)
        feat = kaldi.fbank(torch.from_numpy(samples16)[None], num_mel_bins=80, dither=0)
        feat = feat - feat.mean(dim=0, keepdim=True)
        ort_emb = torch.from_numpy(bench.ort.run(None, {name: feat[None].numpy()})[0])
        cos_ort.append(cosine(out.speaker_embedding.cpu(), ort_emb))
        cos_plugin.append(cosine(out.speaker_embedding.cpu(), ref[2].cpu()))
    return {
        "route": preparer.last_route.s3 if preparer.last_route else None,
        "voices": len(decoded),
        "tokens": tokens,
        "token_flips": flips,
        "flipped_voices": flipped_voices,
        "rechecked_voices": stats.rechecked,
        "min_cosine_vs_onnxruntime": min(cos_ort),
        "min_cosine_vs_per_voice_plugin": min(cos_plugin),
    }


def _differ(a: list[torch.Tensor], b: list[torch.Tensor]) -> dict[str, int]:
    diffs = [int((x != y).sum()) for x, y in zip(a, b, strict=True)]
    return {"tokens_differ": sum(diffs), "voices": sum(1 for d in diffs if d)}


def upstream_variance(
    decoded: list[tuple[np.ndarray, int]], tokenizer: Any, dev: torch.device
) -> dict[str, Any]:
    """vllm-omni's own per-voice S3 tokens under other settings, against its run under each policy
    (cuDNN defaults): how far its own tokens move when nothing but a setting changes."""
    import copy

    import s3tokenizer

    from omni_deploy.speaker.precision import precision_scope

    mels = [upstream_ops.s3_mel(s, r) for s, r in decoded]
    with precision_scope(False):
        fp32 = upstream_s3(tokenizer, dev, decoded, mels)
    with precision_scope(True):
        tf32 = upstream_s3(tokenizer, dev, decoded, mels)

    def again() -> list[torch.Tensor]:
        with precision_scope(False):
            return upstream_s3(tokenizer, dev, decoded, mels)

    def cudnn_benchmark() -> list[torch.Tensor]:
        with precision_scope(False):
            torch.backends.cudnn.benchmark = True  # precision_scope restores it
            return upstream_s3(tokenizer, dev, decoded, mels)

    def one_thread() -> list[torch.Tensor]:
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            with precision_scope(False):
                return upstream_s3(tokenizer, dev, decoded, mels)
        finally:
            torch.set_num_threads(threads)

    def batch_of_two() -> list[torch.Tensor]:
        out = []
        with precision_scope(False):
            for a in range(0, len(mels), 2):
                group = mels[a : a + 2]
                m, lens = s3tokenizer.padding(group)
                codes, code_lens = tokenizer.quantize(m.to(dev), lens.to(dev))
                out += [codes[j : j + 1, : int(code_lens[j])].cpu() for j in range(len(group))]
        return out

    def cudnn_tf32_off() -> list[torch.Tensor]:
        with precision_scope(False, cudnn_tf32=False):
            return upstream_s3(tokenizer, dev, decoded, mels)

    def on_the_cpu() -> list[torch.Tensor]:
        cpu = copy.deepcopy(tokenizer).cpu()
        return upstream_s3(cpu, torch.device("cpu"), decoded, mels)

    rows: dict[str, Any] = {"tokens": sum(int(t.numel()) for t in fp32)}
    settings = {
        "the same settings again": again,
        "cudnn.benchmark on": cudnn_benchmark,
        "one torch thread": one_thread,
        "s3tokenizer's own batch of two": batch_of_two,
        "cuDNN TF32 off": cudnn_tf32_off,
        "TF32 matmuls (token2wav_allow_tf32 true)": lambda: tf32,
        "strict FP32 matmuls (token2wav_allow_tf32 false)": lambda: fp32,
        "the whole S3 branch on the CPU": on_the_cpu,
    }
    for name, run in settings.items():
        try:
            tokens = run()
            rows[name] = {"vs FP32 policy": _differ(tokens, fp32), "vs TF32 policy": _differ(tokens, tf32)}
        except Exception as exc:
            rows[name] = {"error": f"{type(exc).__name__}: {exc}"}
    return rows


def policy_targets(policy: str, row: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    timings = row.get("timings", {})
    for n, limit in POLICY_TARGET_MS[policy].items():
        cell = timings.get(str(n), {}).get("batched", {})
        if "median_ms" in cell:
            out[f"N={n} batched <= {limit} ms"] = {
                "value": cell["median_ms"],
                "met": cell["median_ms"] <= limit,
            }
    for n, least in POLICY_TARGET_SPEEDUP[policy].items():
        cell = timings.get(str(n), {})
        if "median_ms" in cell.get("batched", {}) and "median_ms" in cell.get("per-voice, plugin", {}):
            ratio = cell["per-voice, plugin"]["median_ms"] / cell["batched"]["median_ms"]
            out[f"N={n} batched >= {least}x per-voice plugin"] = {"value": ratio, "met": ratio >= least}
    parity_ = row.get("parity", {}).get("batched", {})
    if "token_flips" in parity_:
        out["tokens exact against the per-voice path under the policy"] = {
            "value": parity_["token_flips"], "met": parity_["token_flips"] == 0}  # fmt: skip
        least = POLICY_TARGET_COSINE[policy]
        got = parity_["min_cosine_vs_onnxruntime"]
        out[f"min cosine vs ONNX Runtime >= {least}"] = {"value": got, "met": got >= least}
    return out


def report_policies(record: dict[str, Any]) -> str:
    lines = [
        f"{record['device']}, torch {record['torch']}, cuDNN TF32 {record['precision']['cudnn_allow_tf32']}"
    ]
    for policy, row in record.get("policies", {}).items():
        lines.append(f"policy {policy} (token2wav_allow_tf32 {row['token2wav_allow_tf32']})")
        for key in sorted(k for k in row if k.startswith("first_call_after_warm_up")):
            lines.append(f"  {key.replace('_', ' ')}: " + json.dumps(row[key]))
        for n, cell in row.get("timings", {}).items():
            for name, value in cell.items():
                if "median_ms" in value:
                    extra = (
                        f" route {value.get('route')}, rechecked {value.get('rechecked')}"
                        if "route" in value
                        else ""
                    )
                    lines.append(
                        f"  N={n:<3} {name:<28} {value['median_ms']:>9.2f} ms (p90 {value['p90_ms']:.2f}){extra}"
                    )
                else:
                    lines.append(f"  N={n:<3} {name:<28} {value}")
        for name, result in row.get("parity", {}).items():
            lines.append(f"  parity {name}: " + json.dumps(result))
        for name, target in row.get("targets", {}).items():
            lines.append(f"  {'met ' if target['met'] else 'MISS'} {name}: {target['value']:.6g}")
    for name, result in record.get("upstream_variance", {}).items():
        lines.append(f"upstream {name}: {json.dumps(result)}")
    return "\n".join(lines)


def parity(decoded: list[tuple[np.ndarray, int]], tokenizer: Any, encoder: Any, encoder_off: Any, ort: Any,
           dev: torch.device, preparer: ReferencePreparer) -> dict[str, Any]:  # fmt: skip
    """One batched pass over all voices against the per-voice path, voice by voice."""
    import torchaudio.compliance.kaldi as kaldi

    voices = [Voice(s, r) for s, r in decoded]
    got, stats = preparer.prepare(voices)
    captured: list[torch.Tensor] = []
    hook = tokenizer.quantizer._codebook.project_down.register_forward_hook(
        lambda module, args, out: captured.append((out.detach().float().tanh() * FSQ_SCALE).reshape(-1, 8))
    )
    try:
        reference = [upstream_ops.prepare_one(s, r, tokenizer, encoder.__call__, dev) for s, r in decoded]
    finally:
        hook.remove()
    embed_off = encoder_off.embed_waveforms(
        [torch.from_numpy(upstream_ops.torchaudio_resample(s, r, 16000)).to(dev) for s, r in decoded], 16000
    )
    flips = tokens = 0
    flipped_voices = []
    max_value_diff = max_mel_diff = 0.0
    cos_plugin, cos_ort, cos_ort_off = [], [], []
    name = ort.get_inputs()[0].name
    for i, (ref, out) in enumerate(zip(reference, got, strict=True)):
        assert out is not None
        tokens += ref[0].numel()
        flipped = int((ref[0] != out.speech_tokens).sum())
        flips += flipped
        if flipped:
            flipped_voices.append(
                {"voice": i, "flips": flipped, "margin": out.margin, "rechecked": out.rechecked}
            )
        if out.quantizer_values is not None:  # None on the per-voice route: vllm-omni's own tokens
            max_value_diff = max(max_value_diff, float((captured[i] - out.quantizer_values).abs().max()))
        max_mel_diff = max(max_mel_diff, float((ref[3] - out.mels).abs().max()))
        samples16 = upstream_ops.torchaudio_resample(decoded[i][0], decoded[i][1], 16000)
        feat = kaldi.fbank(torch.from_numpy(samples16)[None], num_mel_bins=80, dither=0)
        feat = feat - feat.mean(dim=0, keepdim=True)
        ort_emb = torch.from_numpy(ort.run(None, {name: feat[None].numpy()})[0])
        cos_plugin.append(cosine(out.speaker_embedding.cpu(), ref[2].cpu()))
        cos_ort.append(cosine(out.speaker_embedding.cpu(), ort_emb))
        cos_ort_off.append(cosine(embed_off[i].cpu(), ort_emb))
    margins = [out.margin for out in got if out is not None]
    return {
        "voices": len(decoded),
        "tokens": tokens,
        "token_flips": flips,
        "flipped_voices": flipped_voices,
        "rechecked_voices": stats.rechecked,
        "max_abs_diff_quantizer_values": max_value_diff,
        "voices_with_margin_under": {f"{d:g}": sum(m < d for m in margins) for d in (1e-6, 1e-5, 1e-4, 1e-3)},
        "max_abs_diff_prompt_mels": max_mel_diff,
        "min_cosine_vs_per_voice_plugin": min(cos_plugin),
        "min_cosine_vs_onnxruntime_tf32_on": min(cos_ort),
        "min_cosine_vs_onnxruntime_tf32_off": min(cos_ort_off),
    }


def probes(
    decoded: list[tuple[np.ndarray, int]], tokenizer: Any, dev: torch.device, cudnn_tf32: bool
) -> dict[str, Any]:
    """Where batched tokens part from vllm-omni's: each step changed on its own, against vllm-omni's
    quantize of one voice on its CPU mel (the per-voice path), by the quantizer's values and tokens."""
    from omni_deploy.speaker.precision import precision_scope
    from omni_deploy.speaker.refprep.plan import s3_tokens
    from omni_deploy.speaker.refprep.s3_mel import s3_log_mel
    from omni_deploy.speaker.refprep.s3_tokens import PackedS3, layout
    from omni_deploy.speaker.refprep.waves import resample_group

    saved = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = cudnn_tf32
    try:
        packed = PackedS3(tokenizer, dev)
        cpu_mels = [upstream_ops.s3_mel(s, r) for s, r in decoded]

        def device_mel(samples: np.ndarray, rate: int) -> torch.Tensor:
            x = torch.from_numpy(samples).to(dev)[None]
            with torch.inference_mode(), precision_scope(False, cudnn_tf32=False):
                a16 = resample_group(x, rate, 16000)[0]
                n = int(a16.numel())
                at = torch.tensor([0, n, n // 160], device=dev)
                return s3_log_mel(a16, at[0:1], at[1:2], at[2:3], n // 160)[0]

        gpu_mels = [device_mel(s, r) for s, r in decoded]

        def one_by_one(mels: list[torch.Tensor]) -> list[tuple[torch.Tensor, torch.Tensor]]:
            out = []
            seen: list[torch.Tensor] = []
            hook = tokenizer.quantizer._codebook.project_down.register_forward_hook(
                lambda module, args, o: seen.append((o.detach().float().tanh() * FSQ_SCALE).reshape(-1, 8))
            )
            try:
                for mel in mels:
                    import s3tokenizer

                    m, lens = s3tokenizer.padding([mel.to(dev)])
                    codes, _ = tokenizer.quantize(m.to(dev), lens.to(dev))
                    out.append((codes[0], seen[-1]))
            finally:
                hook.remove()
            return out

        def batched(mels: list[torch.Tensor], apart: bool) -> list[tuple[torch.Tensor, torch.Tensor]]:
            frames = [int(m.shape[1]) for m in mels]
            tokens = [s3_tokens(f) for f in frames]
            width = s3_tokens(max(frames))
            rows, owners = layout(tokens, len(mels), width, sum(tokens))
            rows_t, owners_t = torch.from_numpy(rows).to(dev), torch.from_numpy(owners).to(dev)
            with torch.inference_mode():
                if apart:
                    h = packed.convs_one_by_one([m.to(dev)[None] for m in mels])
                    codes, values, _ = packed.blocks(
                        h, torch.tensor(tokens, device=dev), width, rows_t, owners_t
                    )
                else:
                    mel = torch.zeros(len(mels), 128, max(frames), device=dev)
                    for i, m in enumerate(mels):
                        mel[i, :, : m.shape[1]] = m.to(dev)
                    codes, values, _ = packed(mel, torch.tensor(frames, device=dev), rows_t, owners_t)
            starts = np.cumsum([0, *tokens])
            return [(codes[a:b], values[a:b]) for a, b in itertools.pairwise(starts)]

        reference = one_by_one(cpu_mels)

        def against(results: list[tuple[torch.Tensor, torch.Tensor]]) -> dict[str, Any]:
            flips = sum(
                int((c.reshape(-1) != rc.reshape(-1)).sum())
                for (c, _), (rc, _) in zip(results, reference, strict=True)
            )
            diff = max(
                float((v - rv).abs().max()) for (_, v), (_, rv) in zip(results, reference, strict=True)
            )
            return {"token_flips": flips, "max_abs_diff_quantizer_values": diff}

        return {
            "tokens": sum(int(c.numel()) for c, _ in reference),
            "per-voice again (determinism)": against(one_by_one(cpu_mels)),
            "per-voice on the device's mels": against(one_by_one(gpu_mels)),
            "batched convs on the CPU mels": against(batched(cpu_mels, apart=False)),
            "convs apart on the CPU mels": against(batched(cpu_mels, apart=True)),
            "batched convs on the device's mels": against(batched(gpu_mels, apart=False)),
            "convs apart on the device's mels": against(batched(gpu_mels, apart=True)),
        }
    finally:
        torch.backends.cudnn.allow_tf32 = saved


def cpu_left(paths: list[Path], preparers: dict[str, ReferencePreparer], tokenizer: Any, speaker: Any,
             dev: torch.device) -> dict[str, Any]:  # fmt: skip
    """CPU time per voice: in the per-voice path, by step, and what the batched pass leaves."""
    import s3tokenizer
    import torchaudio.compliance.kaldi as kaldi

    path = paths[0]  # 6 s
    samples, rate = decode(path)
    steps: dict[str, Callable[[], Any]] = {
        "decode (stdlib wave stand-in)": lambda: decode(path),
        "resample to 16 kHz": lambda: upstream_ops.torchaudio_resample(samples, rate, 16000),
        "S3 log-mel": lambda: s3tokenizer.log_mel_spectrogram(torch.from_numpy(s16)),
        "Kaldi fbank": lambda: kaldi.fbank(torch.from_numpy(s16)[None], num_mel_bins=80, dither=0),
        "resample to 24 kHz": lambda: upstream_ops.torchaudio_resample(samples, rate, 24000),
        "flow mel": lambda: upstream_ops.cosyvoice_mel(torch.from_numpy(s24)[None]),
    }
    s16 = upstream_ops.torchaudio_resample(samples, rate, 16000)
    s24 = upstream_ops.torchaudio_resample(samples, rate, 24000)
    per_step = {}
    reps = 1 if SMOKE else 20
    for name, fn in steps.items():
        fn()
        start = time.thread_time()
        for _ in range(reps):
            fn()
        per_step[name] = (time.thread_time() - start) / reps * 1000.0
    left: dict[str, Any] = {}
    for name in ("batched", "batched, device route"):
        preparer = preparers[name]
        left[name] = {}
        for n in sorted({min(n, len(paths)) for n in (1, 8, 32)}):
            preparer.prepare([Voice(*decode(p)) for p in paths[:n]])
            sync()
            host = []
            for _ in range(1 if SMOKE else 10):
                start = time.thread_time()
                decoded = [decode(p) for p in paths[:n]]
                decode_ms = (time.thread_time() - start) * 1000.0
                preparer.prepare([Voice(s, r) for s, r in decoded])
                host.append((decode_ms, preparer.last_host_ms))
            left[name][str(n)] = {
                "decode_ms_per_voice": statistics.median(h[0] for h in host) / n,
                "pass_host_ms_per_voice": statistics.median(h[1] for h in host) / n,
            }
    left["note"] = (
        "thread CPU time: decoding (stand-in reader), and the pass's own host work without its one wait"
    )
    return {
        "per_voice_path_6s_voice_ms": per_step,
        "batched": left,
        "rate": rate,
        "seconds": len(samples) / rate,
    }


def targets(timings: dict[str, Any]) -> dict[str, Any]:
    """Issue 26's targets, for the default pass from the WAV file on (what `_prepare_prompt` does),
    and on decoded voices for the default and the device route."""
    out: dict[str, Any] = {}
    pairs = [("batched", "per-voice, plugin"), ("decoded: batched", "decoded: per-voice, plugin"),
             ("decoded: batched, device route", "decoded: per-voice, plugin")]  # fmt: skip
    for ours, theirs in pairs:
        for n, limit in TARGET_MS.items():
            row = timings.get(str(n), {})
            if "median_ms" in row.get(ours, {}):
                got = row[ours]["median_ms"]
                out[f"N={n} {ours} <= {limit} ms"] = {"value": got, "met": got <= limit}
        for n, least in TARGET_SPEEDUP.items():
            row = timings.get(str(n), {})
            if "median_ms" in row.get(ours, {}) and "median_ms" in row.get(theirs, {}):
                ratio = row[theirs]["median_ms"] / row[ours]["median_ms"]
                out[f"N={n} {ours} >= {least}x {theirs}"] = {"value": ratio, "met": ratio >= least}
    return out


def report(record: dict[str, Any]) -> str:
    lines = [f"{record['device']}, torch {record['torch']}, {record['precision']}"]
    for n, row in record.get("timings", {}).items():
        lines.append(f"N={n}: rechecked {row['rechecked']}, routes {row.get('route')}")
        for name, value in row.items():
            if isinstance(value, dict) and "error" in value:
                lines.append(f"  {name:<48} {value['error']}")
            elif isinstance(value, dict) and "median_ms" in value:
                lines.append(f"  {name:<48} {value['median_ms']:>9.2f} ms (p90 {value['p90_ms']:.2f})")
    lines.append("first call per N (graph captures), ms: " + json.dumps(record["first_call_ms"]))
    lines.append("phases, one stream, ms: " + json.dumps(record.get("phases_one_stream_ms")))
    for n, row in record.get("serving_shape", {}).items():
        cells = ", ".join(f"{k} {v['median_ms']:.2f}" for k, v in row.items() if isinstance(v, dict))
        lines.append(f"serving shape N={n}: {cells}, rechecked {row['rechecked']}")
    for name, result in record.get("parity", {}).items():
        lines.append(f"parity {name}: " + json.dumps(result))
    for name, result in record.get("probes", {}).items():
        lines.append(f"probes, {name}: " + json.dumps(result))
    if "tf32_matmuls" in record:
        lines.append("TF32 matmuls: " + json.dumps(record["tf32_matmuls"]))
    lines.append("cpu left: " + json.dumps(record.get("cpu_left")))
    for name, target in record["targets"].items():
        lines.append(f"  {'met ' if target['met'] else 'MISS'} {name}: {target['value']:.2f}")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
