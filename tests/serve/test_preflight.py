"""serve's preflight on a host snapshot whose installed versions were set aside."""

from __future__ import annotations

from omni_deploy.serve.preflight import run_preflight
from omni_deploy.speaker_backend.host import HostCaps


def _checks(host: HostCaps) -> dict[str, str]:
    found = run_preflight("openbmb/MiniCPM-o-4_5", "cpu", "cpu-onnxruntime", host).refusals
    return {refusal.check + ":" + refusal.message: refusal.message for refusal in found}


def test_unusable_installed_versions_are_refused_with_the_reason() -> None:
    host = HostCaps(
        probed=True,
        vllm=None,
        vllm_omni=None,
        version_problems={
            "vllm": "a version of 5002 characters (at most 64)",
            "vllm-omni": "a version with control characters",
        },
    )
    messages = list(_checks(host))
    assert "vllm-omni:the installed vllm-omni's metadata gives a version with control characters" in messages
    assert "vllm:the installed vllm's metadata gives a version of 5002 characters (at most 64)" in messages
    assert not any("not installed" in m for m in messages)


def test_one_unusable_version_is_not_compared() -> None:
    host = HostCaps(probed=True, vllm="0.30.0", vllm_omni=None, version_problems={"vllm-omni": "x"})
    messages = list(_checks(host))
    assert "vllm-omni:the installed vllm-omni's metadata gives x" in messages
    assert not any(m.startswith("versions:") for m in messages)


def test_an_absent_vllm_omni_is_still_not_installed() -> None:
    messages = list(_checks(HostCaps(probed=True, vllm="0.30.0", vllm_omni=None)))
    assert "vllm-omni:vllm-omni is not installed in this environment" in messages
