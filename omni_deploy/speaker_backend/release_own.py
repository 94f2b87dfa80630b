"""What the target vllm-omni release's own Code2Wav does with a deploy file, from that release's code.

Each behaviour is a fact read from the release's wheel (knowledge/facts.py, upstream_facts.json),
cited at its upstream file:line, and valued for this file: the TF32 matmul policy and its
precedence, reference prefetch at request arrival, where CAM++ runs on the platform, and when the
CPU ONNX Runtime session for campplus.onnx is built. Where a release's code lacks a fact, the line
says what that release does instead; nothing is borrowed from another release.

The value rules mirror the release's code, cited beside each:
- 0.32.0rc1 `_tf32_mode` (minicpmo_4_5_code2wav.py:62-82): env MINICPMO_CODE2WAV_TF32 when set and
  not empty, else `token2wav_allow_tf32`, else `code2wav_allow_tf32`, else on; a string is on only
  for tf32/tf32x3/3xtf32/flow/1/true/yes; the CFM applies it on CUDA only (:1479).
- 0.31.0rc1 `forward` (minicpmo_4_5_code2wav.py:741): `token2wav_allow_tf32` (default off) turns TF32
  on for the whole Code2Wav forward.

Pure: takes the target's reads, the platform, the Code2Wav extra and the stage's environment.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

from omni_deploy.config.nodes import Map, Scalar, child_path, to_plain
from omni_deploy.integrations.speaker_rules import ENV_CODE2WAV_TF32, KEY_ALLOW_TF32, KEY_TF32_ALIAS
from omni_deploy.knowledge.target import TargetReads
from omni_deploy.speaker_backend.types import Reason, SpeakerDecision

KEY_TF32 = KEY_ALLOW_TF32
KEY_PREFETCH, KEY_PREFETCH_SETUP = "token2wav_ref_prefetch", "token2wav_ref_prefetch_setup"
KEY_PREFETCH_WAITERS = "token2wav_ref_prefetch_max_waiters"
# `_tf32_mode`'s string table (0.32.0rc1 minicpmo_4_5_code2wav.py:73-81): any other string is off.
_TF32_ON_STRINGS = frozenset({"tf32", "tf32x3", "3xtf32", "flow", "1", "true", "yes"})
# The speaker backend 0.32.0rc1 gives the NPU: torch CAM++ on the device (enable_device_spk_embedding).
NPU_TORCH = "npu-torch"


@dataclass(frozen=True)
class OwnBehaviour:
    """One thing the release's Code2Wav does with this file."""

    topic: str  # "tf32", "reference_prefetch", "campplus", "campplus_session"
    value: Any  # the effective value for this file (None where none applies)
    decided_by: str  # "env NAME", "$.path (file:line:col)", "default", "platform", "code"
    says: str  # one sentence
    at: str | None  # the upstream file:line that shows it; None where the release's code lacks it

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def line(self) -> str:
        where = f"  [{self.at}]" if self.at else ""
        return f"{self.topic}: {self.says}{where}"


@dataclass(frozen=True)
class _Knob:
    value: Any
    decided_by: str
    set: bool


def _knob(extra: Map | None, path: str, name: str, default: Any) -> _Knob:
    node = extra.get(name) if extra is not None else None
    if isinstance(node, Scalar):
        return _Knob(to_plain(node), f"{child_path(path, name)} ({node.origin})", True)
    return _Knob(default, "default", False)


def code2wav_own(
    reads: TargetReads, platform: str, extra: Map | None, extra_path: str, environ: dict[str, str]
) -> list[OwnBehaviour]:
    """What `reads`' release does itself in MiniCPM-o 4.5's Code2Wav on `platform` with this
    file's Code2Wav `extra` and the stage's environment `environ`; empty without that release's
    code or without a Code2Wav stage in it."""
    if not reads.facts or not reads.fact("code2wav_module"):
        return []
    return [
        _tf32(reads, platform, extra, extra_path, environ),
        _prefetch(reads, extra, extra_path),
        _campplus(reads, platform),
        _session(reads),
    ]


def _tf32(
    reads: TargetReads, platform: str, extra: Map | None, path: str, environ: dict[str, str]
) -> OwnBehaviour:
    version = reads.version
    on_at = reads.fact("code2wav_tf32_default_on")
    if on_at is not None:
        if platform != "cuda" and reads.fact("code2wav_tf32_cuda_only"):
            return OwnBehaviour(
                "tf32", False, "platform",
                f"off on {platform}: vllm-omni {version} applies its TF32 policy to the CFM on CUDA only",
                reads.fact("code2wav_tf32_cuda_only"),
            )  # fmt: skip
        raw = environ.get(ENV_CODE2WAV_TF32) if reads.fact("code2wav_tf32_env") else None
        if raw not in (None, ""):
            chosen = _Knob(raw, f"env {ENV_CODE2WAV_TF32}", True)
        else:
            key = _knob(extra, path, KEY_TF32, None)
            alias = _knob(extra, path, KEY_TF32_ALIAS, True)
            chosen = key if key.set else alias
        on = _tf32_on(chosen.value)
        return OwnBehaviour(
            "tf32", on, chosen.decided_by,
            f"Code2Wav's matmuls (CFM DiT GEMMs; reference preparation under the same policy) use TF32: "
            f"{'on' if on else 'off'}; precedence: env {ENV_CODE2WAV_TF32}, then {KEY_TF32}, then its alias "
            f"{KEY_TF32_ALIAS}, default on",
            on_at,
        )  # fmt: skip
    off_at = reads.fact("code2wav_tf32_default_off")
    if off_at is not None:
        knob = _knob(extra, path, KEY_TF32, False)
        on = bool(knob.value) and platform == "cuda"
        where = "" if platform == "cuda" else f" (a CUDA matmul flag: no effect on {platform})"
        return OwnBehaviour(
            "tf32", on, knob.decided_by,
            f"{KEY_TF32} turns TF32 matmuls on for Code2Wav's whole forward: {'on' if on else 'off'}; "
            f"default off; no environment variable{where}",
            off_at,
        )  # fmt: skip
    return OwnBehaviour(
        "tf32", False, "code",
        f"vllm-omni {version} reads no TF32 key: Code2Wav keeps PyTorch's matmul default (TF32 off)",
        None,
    )  # fmt: skip


def _tf32_on(value: Any) -> bool:
    """`_tf32_mode` (0.32.0rc1 minicpmo_4_5_code2wav.py:72-82): a string by its table, else truthiness."""
    if isinstance(value, str):
        return value.strip().lower() in _TF32_ON_STRINGS
    return bool(value)


def _prefetch(reads: TargetReads, extra: Map | None, path: str) -> OwnBehaviour:
    at = reads.fact("ref_prefetch")
    if at is None:
        return OwnBehaviour(
            "reference_prefetch", False, "code",
            f"vllm-omni {reads.version} has no reference prefetch: a new voice is prepared at its request's chunk 0",
            None,
        )  # fmt: skip
    knob = _knob(extra, path, KEY_PREFETCH, True)
    if not bool(knob.value):
        return OwnBehaviour(
            "reference_prefetch", False, knob.decided_by,
            f"off: a new voice is prepared at its request's chunk 0 ({KEY_PREFETCH} default on)", at,
        )  # fmt: skip
    setup = _knob(extra, path, KEY_PREFETCH_SETUP, False)
    waiters = _knob(extra, path, KEY_PREFETCH_WAITERS, 1)
    what = (
        "the prompt and the flow set-up" if bool(setup.value) else "the prompt (the set-up stays at chunk 0)"
    )
    return OwnBehaviour(
        "reference_prefetch", True, knob.decided_by,
        f"on: a new request's reference voice is prepared in idle steps after it arrives, before its chunk 0: "
        f"{what}; it runs while at most {waiters.value} request(s) wait ({KEY_PREFETCH_WAITERS}, "
        f"{waiters.decided_by}); {KEY_PREFETCH_SETUP}: {json_bool(setup.value)} ({setup.decided_by})",
        at,
    )  # fmt: skip


def json_bool(value: Any) -> str:
    return "true" if bool(value) else "false"


def _campplus(reads: TargetReads, platform: str) -> OwnBehaviour:
    npu_at = reads.fact("npu_device_spk")
    if platform == "npu" and npu_at is not None:
        return OwnBehaviour(
            "campplus", NPU_TORCH, "platform",
            "CAM++ runs in torch on the NPU (enable_device_spk_embedding, FP32 weights from campplus.onnx), "
            "not in ONNX Runtime on the CPU",
            npu_at,
        )  # fmt: skip
    trt = (
        " unless token2wav_trt puts it on TensorRT"
        if platform == "cuda" and reads.fact("token2wav_trt")
        else ""
    )
    return OwnBehaviour(
        "campplus", "cpu-onnxruntime", "platform",
        f"vllm-omni {reads.version}'s own CAM++ on {platform} is campplus.onnx in ONNX Runtime on the CPU{trt}",
        reads.fact("campplus_onnx"),
    )  # fmt: skip


def _session(reads: TargetReads) -> OwnBehaviour:
    lazy = reads.fact("campplus_session_lazy")
    if lazy is not None:
        return OwnBehaviour(
            "campplus_session", "lazy", "code",
            "the CPU ONNX Runtime session for campplus.onnx is built on first use only: where a device path "
            "replaces CAM++ (TensorRT, torch on the NPU, omni-deploy's plugin) it is never allocated",
            lazy,
        )  # fmt: skip
    return OwnBehaviour(
        "campplus_session", "eager", "code",
        "the CPU ONNX Runtime session for campplus.onnx is built when the token2wav models load, also where "
        "a device path then replaces CAM++",
        reads.fact("campplus_session_eager"),
    )  # fmt: skip


def on_release_device(decision: SpeakerDecision, reads: TargetReads) -> SpeakerDecision:
    """`decision` with the device the release's own code gives CAM++ off CUDA: torch on the NPU
    where the release calls enable_device_spk_embedding there (0.32.0rc1 on), instead of the CPU
    ONNX Runtime session the older releases use."""
    at = reads.fact("npu_device_spk")
    if decision.platform != "npu" or at is None or decision.speaker_backend != "cpu-onnxruntime":
        return decision
    reasons = [r for r in decision.reasons if r.setting != "platform rule"]
    reasons.append(
        Reason("platform rule", "CAM++ runs in torch on the NPU", f"vllm-omni {reads.version}: {at}")
    )
    return replace(
        decision,
        speaker_backend=NPU_TORCH,
        provider=f"vllm-omni {reads.version} (torch CAM++ on the NPU, weights from campplus.onnx)",
        weights_dtype="fp32",
        inputs_dtype="fp32",
        reasons=reasons,
    )


def with_release_tf32(
    decision: SpeakerDecision, own: list[OwnBehaviour], environ: dict[str, str]
) -> SpeakerDecision:
    """`decision` with the plugin's CAM++ TF32 as the plugin sets it on a release with a TF32 policy of
    its own (0.31 on): the stage's policy, so that the batched preparation computes what vllm-omni's
    own would (integrations/minicpmo.stage_choice); env OMNI_DEPLOY_SPK_TF32 still overrides it."""
    from omni_deploy.integrations.speaker_rules import CUDA_TORCH, ENV_TF32

    policy = next((b for b in own if b.topic == "tf32" and b.at is not None), None)
    if policy is None or decision.speaker_backend != CUDA_TORCH or environ.get(ENV_TF32):
        return decision
    if "omni-deploy" not in decision.provider:
        return decision
    reasons = [r for r in decision.reasons if r.setting != "matmul TF32"]
    reasons.append(Reason("matmul TF32", bool(policy.value), f"the stage's own policy ({policy.decided_by})"))
    return replace(decision, matmul_tf32=bool(policy.value), reasons=reasons)
