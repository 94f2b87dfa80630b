"""vllm-omni's real MiniCPM-o 4.5 Code2Wav stage (0.30.0 or 0.32.0rc1), loaded as vLLM loads it, timed on a GPU.

    python benchmarks/code2wav_stage_gpu.py --release 0.30.0 --device cuda --out docs/benchmarks/code2wav-stage-h200.json
    python benchmarks/code2wav_stage_gpu.py --release 0.32.0rc1 --device cuda \
        --out docs/benchmarks/code2wav-stage-h200-0.32.0rc1.json
    python benchmarks/code2wav_stage_gpu.py --device cpu --small --iters 2   # the whole path on a CPU

`--release` names the vllm-omni the run must load (default: whichever is importable); a run that
imports another refuses to start, and the record names the release it loaded (its version and the
folder its code came from). The stage process's vLLM is the release's pair (0.30.0 with vLLM 0.30.0,
0.32.0rc1 with vLLM 0.32.0).

One run, one process per case (the plugin patches classes process-wide):
- (a) vllm-omni without omni-deploy's plugin;
- (b) the plugin with `token2wav_device_prepare: false` (the CUDA CAM++ encoder per voice);
- (c) the plugin as shipped (batched reference preparation);
each loaded under vLLM's loader context in bf16, timed: forward p50/p90 for 1, 4 and 8 requests per
call with all voices new and with the same voices cached, and the first requests after start
(1 voice, then 8); then (c) loaded in float16 and float32 contexts: the take-over's outcome and one
forward with 4 new voices.

Before the first request each case runs the forward vLLM's runner makes at start-up (its dummy
run: no request, no additional information), where 0.32 captures its graphs
(`cfm_graph_precapture`); it is timed on its own (`startup_forward_ms`). On a release that prepares
references at request arrival (0.32's `on_requests_added` + `run_idle_prefetch`), each case also
measures that path as the runner drives it: 1 and 8 references queued, the idle steps until the
queue is empty (`prefetch_idle_ms`), then the requests' first forward and the time its
`prepare_prompt` calls take (`prepare_in_forward_ms`). Waiting references are let through together
(`token2wav_ref_prefetch_max_waiters: 8` in every case; vllm-omni's default 1 holds all of them
back while more than one waits).

The stage: vLLM 0.30.0's own `BaseModelLoader.load_model` (`set_default_torch_dtype(dtype)`,
`with torch.device(target)` around construction, then `load_weights`) builds vllm-omni's
`MiniCPMO45Code2Wav`; `forward` runs as vLLM's runner runs it (`torch.inference_mode()`, input ids
on the stage's device, several requests per call, request references as CPU tensors in
`runtime_additional_information`). Its Code2Wav settings: deploy/minicpmo_4_5_turn.yaml's connector
extra with deploy/turn-bench.yaml's overlay (CFM micro-batch 4, CFM graphs, HiFT graph capture sizes
1, 2, 4, 8), max_num_seqs 8, plus `token2wav_runtime_prompt_cache_size: 16` so that 8 voices can
stay cached (vllm-omni's default keeps 4).

Token2wav assets of the real structures with RANDOM weights (the checkpoint's are not here; audio
is noise, timings are what matter):
- flow.yaml/flow.pt: the `cosyvoice2` flow classes the checkpoint's flow.yaml names, from
  `stepaudio2-minicpmo` 0.1.1 on PyPI (aliased as `cosyvoice2.*` as its token2wav.py does), at
  MiniCPM-o 4.5's dimensions as public code mirrors them (../shared/reference/vllm-omni.md: encoder
  UpsampleConformerEncoderV2 512/8 heads/2048/6 blocks/4 up blocks; estimator DiT 320->80,
  hidden 512, depth 16, 8 heads of 64, mlp 4.0; CausalConditionalCFM cfg 0.7; vocab 6561);
- hift.pt: vllm-omni's own HiFT (`_build_hift`), random init;
- the S3 tokenizer: s3tokenizer 0.3.0's S3TokenizerV2 in its real configuration (ModelConfig's
  defaults: 128 mels, 1280 wide, 20 heads, 6 layers), random init, in place of
  `s3tokenizer.load_model` (the real file is a 500 MB ONNX export);
- campplus.onnx: a STAND-IN from `omni-deploy spk make-standin` (CAM++'s structure, random weights).
`--small` shrinks the flow and the S3 tokenizer (stand-in sizes) for a CPU check of the script.

On a machine without vLLM's compiled libraries (the GPU machine: see benchmarks/gpu_carry.sh),
empty modules stand in for vllm._C, vllm._C_stable_libtorch and vllm._moe_C (the Code2Wav path
calls none of them). The plugin is registered through `vllm_plugin.register()` (what vLLM's
`load_general_plugins` calls through the entry point, which an uninstalled checkout lacks).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import logging
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path
from types import SimpleNamespace
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CASES = {"a": "vllm-omni, no plugin", "b": "plugin, token2wav_device_prepare: false",
         "c": "plugin as shipped"}  # fmt: skip
SIZES = (1, 4, 8)
TOKENS = 50  # codec tokens per request and call: 2 s of audio at 25 Hz
REF_SECONDS = 4.0
REPORT_MARK = "omni-deploy CAM++ report:"


# -- the environment: vLLM without its compiled libraries, the flow classes under their yaml names --


def stub_vllm_libraries() -> None:
    stubbed = False
    for name in ("vllm._C", "vllm._C_stable_libtorch", "vllm._moe_C"):
        if name not in sys.modules:
            try:
                found = importlib.util.find_spec(name)
            except (ImportError, ValueError):
                found = None
            if found is None:
                sys.modules[name] = types.ModuleType(name)
                stubbed = True
    if stubbed:
        # Capability probes vLLM runs at import time (cutlass_scaled_mm_supports_block_fp8, ...)
        # call ops of the missing library: without it they answer False. The Code2Wav path calls
        # no op of it.
        from vllm import _custom_ops

        for name in dir(_custom_ops):
            if "supports" in name or name.endswith("_supported"):
                setattr(_custom_ops, name, lambda *args, **kwargs: False)
        # Without vLLM's metadata its platform is "unspecified" (its CUDA platform imports compiled
        # flash-attention modules): vllm-omni's HiFT graphs ask it for a graph pool, torch's here.
        import torch
        from vllm.platforms import current_platform

        if torch.cuda.is_available() and getattr(current_platform, "graph_pool_handle", None) is None:
            current_platform.graph_pool_handle = torch.cuda.graph_pool_handle


def alias_cosyvoice2() -> None:
    """`cosyvoice2.*` -> stepaudio2-minicpmo's `stepaudio2.cosyvoice2.*`, as its token2wav.py does,
    without running stepaudio2/__init__.py (which imports its whole TTS stack)."""
    if "cosyvoice2.flow.flow" in sys.modules:
        return
    spec = importlib.util.find_spec("stepaudio2")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("stepaudio2-minicpmo is not installed (benchmarks/gpu_carry.sh carries its wheel)")
    package = types.ModuleType("stepaudio2")
    package.__path__ = list(spec.submodule_search_locations)
    sys.modules.setdefault("stepaudio2", package)
    for sub in ("flow.flow", "flow.flow_matching", "flow.decoder_dit", "transformer.upsample_encoder_v2"):
        module = importlib.import_module(f"stepaudio2.cosyvoice2.{sub}")
        parts = f"cosyvoice2.{sub}".split(".")
        for depth in range(1, len(parts)):
            name = ".".join(parts[:depth])
            if name not in sys.modules:
                sys.modules[name] = types.ModuleType(name)
                sys.modules[name].__path__ = []
                if depth > 1:
                    setattr(sys.modules[".".join(parts[: depth - 1])], parts[depth - 1], sys.modules[name])
        sys.modules[f"cosyvoice2.{sub}"] = module
        setattr(sys.modules[".".join(parts[:-1])], parts[-1], module)


# -- the assets --------------------------------------------------------------------------------------

FLOW_REAL = {"dim": 512, "heads": 8, "units": 2048, "blocks": 6, "up_blocks": 4, "hidden": 512, "depth": 16,
             "dit_heads": 8, "head_dim": 64}  # fmt: skip
FLOW_SMALL = {"dim": 64, "heads": 2, "units": 128, "blocks": 1, "up_blocks": 1, "hidden": 128, "depth": 2,
              "dit_heads": 2, "head_dim": 64}  # fmt: skip


def flow_yaml(size: dict[str, int]) -> str:
    return f"""flow: !new:cosyvoice2.flow.flow.CausalMaskedDiffWithXvec
  input_size: {size["dim"]}
  output_size: 80
  spk_embed_dim: 192
  output_type: mel
  vocab_size: 6561
  encoder: !new:cosyvoice2.transformer.upsample_encoder_v2.UpsampleConformerEncoderV2
    input_size: {size["dim"]}
    output_size: {size["dim"]}
    input_layer: linear
    pre_lookahead_len: 3
    num_blocks: {size["blocks"]}
    num_up_blocks: {size["up_blocks"]}
    up_stride: 2
    up_scale_factor: 2
    attention_heads: {size["heads"]}
    pos_enc_layer_type: rel_pos_espnet
    selfattention_layer_type: rel_selfattn
    key_bias: true
    linear_units: {size["units"]}
    dropout_rate: 0.1
    positional_dropout_rate: 0.1
    attention_dropout_rate: 0.1
    normalize_before: true
    activation_type: swish
  decoder: !new:cosyvoice2.flow.flow_matching.CausalConditionalCFM
    inference_cfg_rate: 0.7
    estimator: !new:cosyvoice2.flow.decoder_dit.DiT
      in_channels: 320
      out_channels: 80
      mlp_ratio: 4.0
      depth: {size["depth"]}
      num_heads: {size["dit_heads"]}
      head_dim: {size["head_dim"]}
      hidden_size: {size["hidden"]}
"""


def build_assets(root: Path, small: bool) -> Path:
    import numpy as np
    import soundfile
    import torch
    from hyperpyyaml import load_hyperpyyaml
    from vllm_omni.model_executor.models.step_audio2.step_audio2_token2wav import _build_hift

    token2wav = root / "assets" / "token2wav"
    token2wav.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "omni_deploy", "spk", "make-standin", str(token2wav / "campplus.onnx"),
                    "--force"], check=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": _pythonpath()},
                   stdout=subprocess.DEVNULL)  # fmt: skip
    torch.manual_seed(0)
    torch.save(_build_hift().state_dict(), token2wav / "hift.pt")
    text = flow_yaml(FLOW_SMALL if small else FLOW_REAL)
    (token2wav / "flow.yaml").write_text(text)
    torch.save(load_hyperpyyaml(text)["flow"].state_dict(), token2wav / "flow.pt")
    (token2wav / "speech_tokenizer_v2_25hz.onnx").write_bytes(
        b"stand-in: read through s3tokenizer.load_model"
    )
    rate = 16000
    t = np.arange(rate) / rate
    soundfile.write(
        root / "assets" / "HT_ref_audio.wav", (0.3 * np.sin(2 * np.pi * 200 * t)).astype("float32"), rate
    )
    return root


def _pythonpath() -> str:
    return os.pathsep.join([str(ROOT), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))])


def s3_loader(small: bool) -> Any:
    def load_model(name: str, download_root: str | None = None) -> Any:
        import torch
        from s3tokenizer.model import ModelConfig
        from s3tokenizer.model_v2 import S3TokenizerV2

        torch.manual_seed(0)
        config = ModelConfig(n_audio_state=64, n_audio_head=1, n_audio_layer=1) if small else ModelConfig()
        return S3TokenizerV2("speech_tokenizer_v2_25hz", config=config).eval()

    return load_model


def stage_extra(case: str) -> dict[str, Any]:
    import yaml

    base = yaml.safe_load((ROOT / "deploy" / "minicpmo_4_5_turn.yaml").read_text())
    overlay = yaml.safe_load((ROOT / "deploy" / "turn-bench.yaml").read_text())
    extra = dict(base["connectors"]["connector_of_shared_memory"]["extra"])
    extra |= overlay["connectors"]["connector_of_shared_memory"]["extra"]
    extra["token2wav_runtime_prompt_cache_size"] = 16  # 8 voices stay cached (default 4)
    extra["token2wav_ref_prefetch_max_waiters"] = max(SIZES)  # 0.32's prefetch: 8 waiting references run
    if case == "b":
        extra["token2wav_device_prepare"] = False
    return extra


# -- one case in its own process ---------------------------------------------------------------------


class Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(f"{record.levelname} {record.getMessage()}")


def load_stage(model_dir: Path, case: str, dtype: Any, device: str) -> Any:
    import torch
    from vllm.model_executor.model_loader.base_loader import BaseModelLoader
    from vllm_omni.model_executor.models.minicpmo_4_5 import minicpmo_4_5_code2wav as c2w

    model_config = SimpleNamespace(
        model=str(model_dir), revision=None, stage_id=2, dtype=dtype, quantization=None,
        word_embeddings_untied_by_checkpoint=False,
        stage_connector_config={"name": "SharedMemoryConnector", "extra": stage_extra(case)},
    )  # fmt: skip
    vllm_config = SimpleNamespace(
        model_config=model_config, device_config=SimpleNamespace(device=torch.device(device)),
        load_config=SimpleNamespace(device=None), quant_config=None,
        scheduler_config=SimpleNamespace(max_num_seqs=max(SIZES)),
    )  # fmt: skip

    class StageLoader(BaseModelLoader):
        def download_model(self, model_config: Any) -> None:
            raise NotImplementedError

        def create_model(self, vllm_config: Any, model_config: Any, prefix: str = "") -> Any:
            return c2w.MiniCPMO45Code2Wav(vllm_config=vllm_config)

        def load_weights(self, model: Any, model_config: Any) -> None:
            model.load_weights(iter(()))

    accelerator = getattr(torch, "accelerator", None)
    if accelerator is not None and not accelerator.is_available():
        # vLLM 0.32's load_model ends with torch.accelerator.empty_cache(), which a CPU-only run
        # refuses; with no accelerator there is no cache to release (the --device cpu check only).
        accelerator.empty_cache = lambda: None
    return StageLoader(SimpleNamespace()).load_model(vllm_config, model_config)


class Requests:
    """Forward calls as vLLM's runner makes them; each new voice is a waveform never sent before."""

    def __init__(self, model: Any, device: str) -> None:
        self.model, self.device, self.serial = model, device, 0

    def voices(self, count: int) -> list[Any]:
        import numpy as np
        import torch

        out = []
        for _ in range(count):
            self.serial += 1
            rng = np.random.default_rng(self.serial)
            t = np.arange(int(REF_SECONDS * 16000)) / 16000
            wave = 0.3 * np.sin(2 * np.pi * (120 + self.serial % 200) * t) + 0.05 * rng.standard_normal(
                t.shape
            )
            out.append(torch.from_numpy(wave.astype("float32")))  # a CPU tensor, as requests carry it
        return out

    def ids(self, count: int) -> list[str]:
        """The request ids of the next call of `count` requests (for a prefetch queued before it)."""
        return [f"req-{self.serial + 1 + i}" for i in range(count)]

    def call(self, refs: list[Any]) -> tuple[float, bool]:
        import torch

        infos, tokens = [], []
        for ref in refs:
            self.serial += 1
            codes = torch.randint(0, 6561, (TOKENS,), generator=torch.Generator(device="cpu").manual_seed(self.serial),
                                  dtype=torch.int64, device="cpu")  # fmt: skip
            meta = {"request_id": f"req-{self.serial}", "cache_epoch": 0, "chunk_seq": 0, "last_chunk": True,
                    "ref_audio_sr": 16000, "code_flat_numel": TOKENS}  # fmt: skip
            infos.append({"meta": meta, "codes": {"audio": codes, "ref": ref}})
            tokens.append(codes)
        input_ids = torch.cat(tokens).to(self.device)
        sync(self.device)
        start = time.perf_counter()
        with torch.inference_mode():
            out = self.model.forward(
                input_ids=input_ids, runtime_additional_information=infos,
                request_ids=[i["meta"]["request_id"] for i in infos], seq_token_counts=[TOKENS] * len(refs),
            )  # fmt: skip
        sync(self.device)
        seconds = time.perf_counter() - start
        audio = out.multimodal_outputs["model_outputs"]
        finite = all(bool(torch.isfinite(a).all()) and a.numel() > 0 for a in audio) and len(audio) == len(
            refs
        )
        return seconds, finite


class Phases:
    """Where one forward's time goes: the stage's per-voice steps, each timed between device
    synchronisations (instance attributes wrapped, the classes untouched). Installed only for the
    breakdown calls after the timed ones: the synchronisations would change what they time."""

    def __init__(self, model: Any, device: str) -> None:
        self.device = device
        self.ms: dict[str, float] = {}
        backend = model.backend
        targets = [(model, "_materialize_runtime_prompt", "materialize (sha256, WAV write)"),
                   (backend, "prepare_prompt", "prepare_prompt (the hook and vllm-omni's own)"),
                   (backend, "setup_batch", "setup_batch"),
                   (backend, "decode_batch", "decode_batch"),
                   (backend, "decode_ragged_batch", "decode_ragged_batch")]  # fmt: skip
        state = getattr(model, "_omni_deploy_refprep", None)
        if state is not None:
            targets += [
                (state, "decode", "hook: read the WAV"),
                (state.preparer, "prepare", "hook: batched pass"),
            ]
        for owner, name, label in targets:
            if hasattr(owner, name):
                setattr(owner, name, self._timed(getattr(owner, name), label))

    def _timed(self, fn: Any, label: str) -> Any:
        def timed(*args: Any, **kwargs: Any) -> Any:
            sync(self.device)
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                sync(self.device)
                self.ms[label] = self.ms.get(label, 0.0) + 1000 * (time.perf_counter() - start)

        return timed

    def take(self) -> dict[str, float]:
        out, self.ms = self.ms, {}
        return out


def mean_phases(calls: list[tuple[float, dict[str, float]]]) -> dict[str, float]:
    """Per label the mean ms per call; `forward` is the whole call (with the synchronisations)."""
    labels = sorted({label for _, phases in calls for label in phases})
    out = {"forward": round(1000 * statistics.fmean(s for s, _ in calls), 2)}
    out.update({label: round(statistics.fmean(p.get(label, 0.0) for _, p in calls), 2) for label in labels})
    return out


def sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def spread(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    p90 = ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]
    return {"p50_ms": round(1000 * statistics.median(ordered), 2), "p90_ms": round(1000 * p90, 2),
            "min_ms": round(1000 * ordered[0], 2), "n": len(ordered)}  # fmt: skip


def breakdown(model: Any, requests: Requests, args: argparse.Namespace, sizes: list[int]) -> dict[str, Any]:
    """`args.breakdown` calls per size, new voices then cached, with the per-voice steps timed."""
    phases = Phases(model, args.device)
    out: dict[str, Any] = {}
    for size in sizes:
        new_calls, cached_calls = [], []
        for _ in range(args.breakdown):
            new_calls.append((requests.call(requests.voices(size))[0], phases.take()))
        same = requests.voices(size)
        requests.call(same)
        phases.take()
        for _ in range(args.breakdown):
            cached_calls.append((requests.call(same)[0], phases.take()))
        out[f"phases_new_{size}"] = mean_phases(new_calls)
        out[f"phases_cached_{size}"] = mean_phases(cached_calls)
    return out


def configure_vllm_logging() -> None:
    """The `vllm` logger tree as a stage process has it: importing vllm.logger configures it up to
    vLLM 0.30; from 0.32 the stage process applies its logging config (`configure_logging`)."""
    import vllm.logger

    configure = getattr(vllm.logger, "configure_logging", None)
    if configure is not None:
        from vllm.config.logging import LoggingConfig

        configure(LoggingConfig())


def startup_forward(model: Any, device: str) -> float:
    """The forward vLLM's runner makes at start-up before any request (no additional information),
    where vllm-omni 0.32 captures its graphs; seconds."""
    import torch

    sync(device)
    start = time.perf_counter()
    with torch.inference_mode():
        model.forward(
            input_ids=torch.zeros(1, dtype=torch.int64, device=device), runtime_additional_information=None
        )
    sync(device)
    return time.perf_counter() - start


def prefetched_call(model: Any, requests: Requests, size: int, device: str) -> dict[str, Any]:
    """`size` new references queued at arrival as 0.32's runner queues them, the idle steps until
    the queue is empty, then the requests' forward with its prepare_prompt time."""
    import torch
    from vllm_omni.core.sched.output import OmniRequestPrewarm

    refs = requests.voices(size)
    ids = requests.ids(size)
    model.on_requests_added([OmniRequestPrewarm(request_id=i, payload={"ref_audio": r, "ref_audio_sr": 16000})
                             for i, r in zip(ids, refs, strict=True)])  # fmt: skip
    queued = len(model._prefetch_queue)
    steps = 0
    sync(device)
    start = time.perf_counter()
    with torch.inference_mode():
        while model._prefetch_queue and steps < 4 * size + 4:
            model.run_idle_prefetch()
            steps += 1
    sync(device)
    idle = time.perf_counter() - start
    backend, spent = model.backend, [0.0]
    original = backend.prepare_prompt

    def timed(*args: Any, **kwargs: Any) -> Any:
        sync(device)
        t0 = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            sync(device)
            spent[0] += time.perf_counter() - t0

    backend.prepare_prompt = timed
    try:
        seconds, finite = requests.call(refs)
    finally:
        backend.prepare_prompt = original
    return {"queued": queued, "idle_steps": steps, "prefetch_idle_ms": round(1000 * idle, 2),
            "forward_ms": round(1000 * seconds, 2), "prepare_in_forward_ms": round(1000 * spent[0], 3),
            "finite": finite}  # fmt: skip


def loaded_release() -> dict[str, str]:
    """The vllm-omni this process imported: its version and where its code is."""
    import vllm_omni

    return {"version": str(getattr(vllm_omni, "__version__", "?")),
            "path": str(Path(vllm_omni.__file__).parent)}  # fmt: skip


def timed_calls(model: Any, requests: Requests, args: argparse.Namespace, result: dict[str, Any]) -> bool:
    """The case's timed forwards into `result`; whether all audio was finite."""
    sizes = [int(s) for s in args.sizes.split(",")]
    finite = True

    def timed(refs: list[Any]) -> float:
        nonlocal finite
        seconds, ok = requests.call(refs)
        finite = finite and ok
        print(
            f"  [{args.case}] forward {len(refs)} requests: {1000 * seconds:.1f} ms",
            file=sys.stderr,
            flush=True,
        )
        return seconds

    try:
        if args.dtype_check:
            result["forward_4_new_ms"] = round(1000 * timed(requests.voices(4)), 2)
        else:
            result["first_1_new_ms"] = round(1000 * timed(requests.voices(1)), 2)
            result[f"first_{sizes[-1]}_new_ms"] = round(1000 * timed(requests.voices(sizes[-1])), 2)
            for size in sizes:
                timed(requests.voices(size))  # this size's first call after the ones above
                new = [timed(requests.voices(size)) for _ in range(args.iters)]
                same = requests.voices(size)
                timed(same)  # prepared and cached here
                cached = [timed(same) for _ in range(args.iters)]
                result[f"new_{size}"], result[f"cached_{size}"] = spread(new), spread(cached)
        if not args.dtype_check and hasattr(model, "run_idle_prefetch"):
            for size in (1, sizes[-1]):
                result[f"prefetch_{size}"] = prefetched_call(model, requests, size, args.device)
        if not args.dtype_check and args.breakdown:
            result.update(breakdown(model, requests, args, sizes))
    except Exception as exc:
        import traceback

        result["errors"].append(f"forward: {type(exc).__name__}: {exc}")
        result["traceback"] = traceback.format_exc()[-4000:]
    return finite


def worker(args: argparse.Namespace) -> dict[str, Any]:
    stub_vllm_libraries()
    import torch

    loaded = loaded_release()
    if args.release and loaded["version"] != args.release:
        return {"case": args.case, "dtype": args.dtype, "loaded": loaded,
                "errors": [f"asked for vllm-omni {args.release}, imported {loaded['version']} from {loaded['path']}"]}  # fmt: skip

    os.environ["OMNI_DEPLOY_SPK_REPORT_DIR"] = reports = tempfile.mkdtemp(prefix="spk-report-")
    if args.case != "a":
        from omni_deploy.integrations import vllm_plugin

        vllm_plugin.register()
    import s3tokenizer

    configure_vllm_logging()

    alias_cosyvoice2()
    s3tokenizer.load_model = s3_loader(args.small)
    lines = Lines()
    logging.getLogger("vllm").addHandler(lines)
    dtype = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}[args.dtype]
    result: dict[str, Any] = {"case": args.case, "dtype": args.dtype, "loaded": loaded, "errors": []}
    start = time.perf_counter()
    try:
        model = load_stage(Path(args.model_dir), args.case, dtype, args.device)
    except Exception as exc:
        import traceback

        result["errors"].append(f"load: {type(exc).__name__}: {exc}")
        result["traceback"] = traceback.format_exc()[-4000:]
        result["log"] = lines.lines[-20:]
        return result
    result["load_s"] = round(time.perf_counter() - start, 2)
    print(f"  [{args.case}] loaded in {result['load_s']} s", file=sys.stderr, flush=True)
    result["startup_forward_ms"] = round(1000 * startup_forward(model, args.device), 2)
    core = model.backend._token2wav._core
    result["speaker_model"] = type(core._spk_model).__name__
    report = [line for line in lines.lines if REPORT_MARK in line]
    result["report"] = report[-1].split(REPORT_MARK, 1)[1].strip() if report else None
    files = sorted(Path(reports).glob("*.json"))
    result["report_file"] = json.loads(files[-1].read_text()) if files else None  # warmup_s among others
    result["plugin_warnings"] = [line for line in lines.lines if "omni-deploy CAM++:" in line]
    requests = Requests(model, args.device)
    finite = timed_calls(model, requests, args, result)
    result["finite"] = finite
    state = getattr(model, "_omni_deploy_refprep", None)
    if state is not None:
        result["batched_passes"], result["batched_voices"] = state.passes, state.voices
    guard = core._spk_model
    result["guard"] = guard.counters() if hasattr(guard, "counters") else None
    result["cuda_errors"] = sum(
        "CUDA error" in line or "illegal memory" in line for line in lines.lines
    ) + sum("CUDA error" in e for e in result["errors"])
    return result


# -- the run -----------------------------------------------------------------------------------------


def run_case(
    args: argparse.Namespace, model_dir: Path, case: str, dtype: str, dtype_check: bool
) -> dict[str, Any]:
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as handle:
        out = handle.name
    command = [sys.executable, __file__, "--worker", "--case", case, "--dtype", dtype, "--model-dir", str(model_dir),
               "--device", args.device, "--iters", str(args.iters), "--sizes", args.sizes,
               "--worker-out", out, "--release", args.release]  # fmt: skip
    command += ["--small"] if args.small else []
    command += ["--dtype-check"] if dtype_check else []
    command += ["--breakdown", str(args.breakdown)]
    env = {**os.environ, "PYTHONPATH": _pythonpath(), "PYTHONUNBUFFERED": "1"}
    if args.device == "cpu":
        env["OMNI_DEPLOY_SPK_ALLOW_CPU"] = "1"  # the CPU stands in for CUDA
    start = time.perf_counter()
    try:
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=args.case_timeout)
        stderr, code = done.stderr, str(done.returncode)
    except subprocess.TimeoutExpired as exc:
        stderr, code = (
            (exc.stderr or b"").decode(errors="replace")
            if isinstance(exc.stderr, bytes)
            else str(exc.stderr),
            "timeout",
        )
    seconds = round(time.perf_counter() - start, 1)
    try:
        result = json.loads(Path(out).read_text())
    except (OSError, ValueError):
        result = {"case": case, "dtype": dtype, "errors": [f"worker exit {code}: {stderr[-3000:]}"]}
    finally:
        Path(out).unlink(missing_ok=True)
    result["process_s"] = seconds
    print(f"[{case} {dtype}] {seconds}s {json.dumps(result)}", flush=True)
    return result


def machine() -> dict[str, Any]:
    import torch

    info: dict[str, Any] = {"python": platform.python_version(), "torch": torch.__version__}
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(0)
    for name in ("vllm", "vllm_omni", "triton", "onnxruntime", "s3tokenizer"):
        try:
            module = __import__(name)
            info[name] = getattr(module, "__version__", "?")
        except Exception as exc:  # recorded, not fatal
            info[name] = f"not importable ({type(exc).__name__})"
    return info


def table(results: list[dict[str, Any]]) -> str:
    rows = ["| case | N | new p50 / p90 ms | cached p50 / p90 ms | new - cached (p50) ms |",
            "| --- | --- | --- | --- | --- |"]  # fmt: skip
    for r in results:
        for size in (*SIZES, 2):
            new, cached = r.get(f"new_{size}"), r.get(f"cached_{size}")
            if not new or not cached:
                continue
            rows.append(f"| ({r['case']}) {CASES[r['case']]} | {size} | {new['p50_ms']} / {new['p90_ms']} | "
                        f"{cached['p50_ms']} / {cached['p90_ms']} | {round(new['p50_ms'] - cached['p50_ms'], 2)} |")  # fmt: skip
    return "\n".join(rows)


def prefetch_table(results: list[dict[str, Any]]) -> str:
    """0.32's prefetch at request arrival: the idle steps, then the requests' forward."""
    rows = ["| case | N | idle steps | prefetch (idle) ms | forward ms | prepare_prompt in the forward ms |",
            "| --- | --- | --- | --- | --- | --- |"]  # fmt: skip
    for r in results:
        for size in SIZES:
            p = r.get(f"prefetch_{size}")
            if p:
                rows.append(f"| ({r['case']}) | {size} | {p['idle_steps']} | {p['prefetch_idle_ms']} | "
                            f"{p['forward_ms']} | {p['prepare_in_forward_ms']} |")  # fmt: skip
    return "\n".join(rows)


def phase_table(results: list[dict[str, Any]]) -> str:
    """The breakdown calls: mean ms per call of each per-voice step, new voices and cached."""
    rows = ["| case | N | voices | step | ms per call |", "| --- | --- | --- | --- | --- |"]
    for r in results:
        for size in SIZES:
            for kind in ("new", "cached"):
                for label, ms in (r.get(f"phases_{kind}_{size}") or {}).items():
                    rows.append(f"| ({r['case']}) | {size} | {kind} | {label} | {ms} |")
    return "\n".join(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--release", default="",
                        help="the vllm-omni release the run must load (0.30.0, 0.32.0rc1); default: the importable one")  # fmt: skip
    parser.add_argument(
        "--small", action="store_true", help="stand-in sizes (flow, S3 tokenizer): a CPU check"
    )
    parser.add_argument("--iters", type=int, default=10)
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)), help="requests per call")
    parser.add_argument("--cases", default="abc")
    parser.add_argument(
        "--dtypes", default="float16,float32", help="loader contexts checked with (c) besides bf16"
    )
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--breakdown", type=int, default=3,
                        help="after the timed calls, this many calls per size with each per-voice step timed "
                             "between synchronisations (0: none)")  # fmt: skip
    parser.add_argument("--case-timeout", type=int, default=420)
    parser.add_argument(
        "--work", type=Path, default=None, help="folder for the assets (default: a temporary one)"
    )
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--case", default="c", help=argparse.SUPPRESS)
    parser.add_argument("--dtype", default="bfloat16", help=argparse.SUPPRESS)
    parser.add_argument("--dtype-check", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--model-dir", default="", help=argparse.SUPPRESS)
    parser.add_argument("--worker-out", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        Path(args.worker_out).write_text(json.dumps(worker(args)))
        return 0
    stub_vllm_libraries()
    alias_cosyvoice2()
    loaded = loaded_release()
    if args.release and loaded["version"] != args.release:
        print(
            f"asked for vllm-omni {args.release}, this Python imports {loaded['version']} from {loaded['path']}"
        )
        return 2
    args.release = loaded["version"]
    work = args.work or Path(tempfile.mkdtemp(prefix="code2wav-stage-"))
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    t0 = time.perf_counter()
    model_dir = build_assets(work / "model", args.small)
    assets_s = round(time.perf_counter() - t0, 1)
    results = [run_case(args, model_dir, case, "bfloat16", False) for case in args.cases]
    checks = [run_case(args, model_dir, "c", d, True) for d in filter(None, args.dtypes.split(","))]
    failed = [r for r in [*results, *checks] if r.get("errors")]
    status = f"failed: {len(failed)} of {len(results) + len(checks)} cases with errors" if failed else "ok"
    record = {
        "benchmark": "code2wav_stage_gpu",
        # A record read on its own says whether it holds figures: a failed case has none.
        "status": status,
        "date": started,
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "machine": machine(),
        "release": loaded,
        "device": args.device,
        "small": args.small,
        "iters": args.iters,
        "tokens_per_request": TOKENS,
        "ref_seconds": REF_SECONDS,
        "assets_s": assets_s,
        "extra": stage_extra("c"),
        "cases": results,
        "dtype_checks": checks,
    }
    print(table(results))
    print(phase_table(results))
    print(prefetch_table(results))
    for r in results:
        print(f"({r['case']}) startup forward {r.get('startup_forward_ms')} ms, first request "
              f"{r.get('first_1_new_ms')} ms, steady new_1 p50 {(r.get('new_1') or {}).get('p50_ms')} ms")  # fmt: skip
    for r in [*results, *checks]:
        print(f"({r['case']}) {r['dtype']}: report={r.get('report')} finite={r.get('finite')} "
              f"cuda_errors={r.get('cuda_errors')} errors={r.get('errors')}")  # fmt: skip
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(record, indent=1))
    print(f"status: {status}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
