"""explain says what each release's own Code2Wav does (vllm_omni_own), from that release's code.

The cases are files (tests/data/explain/release_own/cases.json); the oracle for 0.32.0rc1's TF32
policy is its own `_tf32_mode`, taken from the wheel by AST and run on the file's merged extra.
"""

from __future__ import annotations

import ast
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from omni_deploy.config.nodes import to_plain
from omni_deploy.deployment.model import Deployment
from omni_deploy.knowledge.target import release_reads
from tests.support.cli import run_cli
from tests.support.upstream import CACHE, unpacked

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "explain" / "release_own"
BUNDLED = ROOT / "deploy" / "minicpmo_4_5_turn.yaml"
CASES = json.loads((DATA / "cases.json").read_text())["cases"]
CODE2WAV = "vllm_omni/model_executor/models/minicpmo_4_5/minicpmo_4_5_code2wav.py"


def _file(case: dict[str, Any]) -> Path:
    return (DATA / case["file"]).resolve() if case["file"] else BUNDLED


def _own(capsys: pytest.CaptureFixture[str], case: dict[str, Any]) -> dict[str, dict[str, Any]]:
    result = run_cli(
        capsys, "explain", str(_file(case)), "--backend", "--platform", case["platform"],
        "--target-version", case["version"], "-o", "json",
    )  # fmt: skip
    assert result.code == 0, result.err
    platform = json.loads(result.out)["platforms"][case["platform"]]
    return {b["topic"]: b for b in platform["vllm_omni_own"]}


def _name(case: dict[str, Any]) -> str:
    return f"{case['version']}-{case['platform']}-{case['file']}-{case['env']}"


@pytest.mark.parametrize("case", CASES, ids=_name)
def test_each_release_says_what_its_own_code2wav_does(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, case: dict[str, Any]
) -> None:
    monkeypatch.delenv("MINICPMO_CODE2WAV_TF32", raising=False)
    for name, value in case["env"].items():
        monkeypatch.setenv(name, value)
    own = _own(capsys, case)
    assert {topic: own[topic]["value"] for topic in case["expect"]} == case["expect"]
    reads = release_reads(case["version"])
    for behaviour in own.values():
        # Every citation is a line of that release's facts; none is borrowed from another release.
        assert behaviour["at"] is None or behaviour["at"] in reads.facts.values()


def test_npu_on_0_32_is_torch_on_the_npu(capsys: pytest.CaptureFixture[str]) -> None:
    """0.32.0rc1 calls enable_device_spk_embedding on NPU (minicpmo_4_5_code2wav.py:1525)."""
    for version, backend in (
        ("0.30.0", "cpu-onnxruntime"),
        ("0.31.0rc1", "cpu-onnxruntime"),
        ("0.32.0rc1", "npu-torch"),
    ):
        result = run_cli(capsys, "explain", str(BUNDLED), "--backend", "--platform", "npu",
                         "--target-version", version, "-o", "json")  # fmt: skip
        npu = json.loads(result.out)["platforms"]["npu"]
        assert npu["speaker_backend"] == backend, version
        text = run_cli(
            capsys, "explain", str(BUNDLED), "--backend", "--platform", "npu", "--target-version", version
        )
        assert f"npu: {backend}" in text.out
        assert "CPU off CUDA" in text.out if backend == "cpu-onnxruntime" else "torch on the NPU" in text.out


def _wheel(version: str) -> Path:
    target = CACHE / f"vllm_omni-{version}"
    if (target / CODE2WAV).is_file():
        return target
    return unpacked(version, target)


def _line(version: str, at: str) -> str:
    rel, _, number = at.rpartition(":")
    return (_wheel(version) / rel).read_text(encoding="utf-8").splitlines()[int(number) - 1]


def _upstream_tf32_mode(version: str) -> Any:
    """0.32.0rc1's own `_tf32_mode`, compiled from the wheel's source (it needs only os and Mapping)."""
    source = (_wheel(version) / CODE2WAV).read_text(encoding="utf-8")
    tree = ast.parse(source)
    node = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "_tf32_mode")
    namespace: dict[str, Any] = {"os": os, "Mapping": Mapping, "Any": Any}
    exec(compile(ast.Module(body=[node], type_ignores=[]), CODE2WAV, "exec"), namespace)
    return namespace["_tf32_mode"]


@pytest.mark.upstream
@pytest.mark.parametrize(
    "case", [c for c in CASES if c["version"] == "0.32.0rc1" and c["platform"] == "cuda"], ids=_name
)
def test_tf32_as_0_32_own_tf32_mode_computes_it(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, case: dict[str, Any]
) -> None:
    monkeypatch.delenv("MINICPMO_CODE2WAV_TF32", raising=False)
    for name, value in case["env"].items():
        monkeypatch.setenv(name, value)
    extra = Deployment.load(str(_file(case))).code2wav_extra()
    expected = _upstream_tf32_mode(case["version"])(to_plain(extra) if extra is not None else {}) != "off"
    assert _own(capsys, case)["tf32"]["value"] is expected


@pytest.mark.upstream
@pytest.mark.parametrize("version", ["0.30.0", "0.31.0rc1", "0.32.0rc1"])
def test_each_citation_is_the_line_that_does_it(capsys: pytest.CaptureFixture[str], version: str) -> None:
    """The cited lines hold what the sentence says (read from the wheel, not from our table)."""
    wanted = {
        "tf32": {"0.31.0rc1": 'get("token2wav_allow_tf32", False)',
                 "0.32.0rc1": 'extra.get("token2wav_allow_tf32", extra.get("code2wav_allow_tf32", True))'},
        "reference_prefetch": {"0.32.0rc1": 'extra.get("token2wav_ref_prefetch", True)'},
        "campplus_session": {"0.30.0": "onnxruntime.InferenceSession(", "0.31.0rc1": "onnxruntime.InferenceSession(",
                             "0.32.0rc1": "if self._spk_model is None:"},
    }  # fmt: skip
    for platform in ("cuda", "npu"):
        own = _own(capsys, {"version": version, "platform": platform, "file": None})
        for topic, per_version in wanted.items():
            at = own[topic]["at"]
            if topic == "tf32" and platform != "cuda" and version == "0.32.0rc1":
                assert "is_cuda()" in _line(version, at)
            elif version in per_version:
                assert per_version[version] in _line(version, at), (topic, at)
            else:
                assert at is None, (topic, version)
    npu = _own(capsys, {"version": version, "platform": "npu", "file": None})["campplus"]
    if version == "0.32.0rc1":
        assert "token2wav.enable_device_spk_embedding()" in _line(version, npu["at"])
        number = int(npu["at"].rpartition(":")[2])
        assert "is_npu()" in _line(version, f"{CODE2WAV}:{number - 4}")
    else:
        assert "campplus.onnx" in _line(version, npu["at"])
