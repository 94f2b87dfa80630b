"""The rule for token2wav_device_prepare (speaker_rules.choose_prepare), on top of choose's answer."""

from __future__ import annotations

import pytest

from omni_deploy.integrations.speaker_rules import (
    CPU_ORT,
    CUDA_TORCH,
    KEY_DEVICE_PREPARE,
    TENSORRT,
    choose,
    choose_prepare,
)


@pytest.mark.parametrize(
    ("extra", "env", "on_cuda", "batched", "by"),
    [
        ({}, {}, True, True, "token2wav_device_prepare (default)"),
        ({KEY_DEVICE_PREPARE: True}, {}, True, True, "token2wav_device_prepare"),
        ({KEY_DEVICE_PREPARE: "off"}, {}, True, False, "token2wav_device_prepare"),
        ({KEY_DEVICE_PREPARE: False}, {}, True, False, "token2wav_device_prepare"),
        ({}, {}, False, False, f"speaker backend {CPU_ORT}"),
        ({"token2wav_device_spk": False}, {}, True, False, f"speaker backend {CPU_ORT}"),
        ({"token2wav_trt": True}, {}, True, False, f"speaker backend {TENSORRT}"),
        ({}, {"OMNI_DEPLOY_SPK_BACKEND": CPU_ORT}, True, False, f"speaker backend {CPU_ORT}"),
        ({"token2wav_device_spk": False}, {"OMNI_DEPLOY_SPK_BACKEND": CUDA_TORCH}, True, True,
         "token2wav_device_prepare (default)"),
    ],
)  # fmt: skip
def test_the_batched_pass_follows_the_cuda_campplus_path(
    extra: dict[str, object], env: dict[str, str], on_cuda: bool, batched: bool, by: str
) -> None:
    speaker = choose(extra, env, on_cuda)
    got = choose_prepare(extra, speaker.backend, speaker.decided_by)
    assert (got.batched, got.decided_by) == (batched, by)
    assert got.explicit == (KEY_DEVICE_PREPARE in extra and by == KEY_DEVICE_PREPARE)
    assert got.problems == ()


def test_settings_that_cannot_apply_or_be_read_are_said() -> None:
    off = choose({"token2wav_device_spk": False}, {}, on_cuda=True)
    (problem,) = choose_prepare({KEY_DEVICE_PREPARE: True}, off.backend, off.decided_by).problems
    assert "cannot apply" in problem and CPU_ORT in problem
    on = choose({}, {}, on_cuda=True)
    got = choose_prepare({KEY_DEVICE_PREPARE: "maybe"}, on.backend, on.decided_by)
    assert got.batched and got.decided_by == "token2wav_device_prepare (default)"
    assert got.problems == ("token2wav_device_prepare: 'maybe' is not a boolean; taken as True",)


def test_validate_knows_the_key_as_the_plugins() -> None:
    from omni_deploy.knowledge import readers
    from omni_deploy.knowledge.keys import CUDA_ONLY_CODE2WAV, by_place
    from omni_deploy.knowledge.target import resolve_target

    for version in ("0.28.0", "0.30.0"):
        status = readers.status("code2wav", KEY_DEVICE_PREPARE, resolve_target(version))
        assert status.kind == readers.BY_PLUGIN, version
    assert by_place("code2wav")[KEY_DEVICE_PREPARE].default is True
    assert KEY_DEVICE_PREPARE in CUDA_ONLY_CODE2WAV
