"""Code frames show only a deploy file's own lines, through the redactor (common/output/frames.frame_lines)."""

from __future__ import annotations

from omni_deploy.common.output.frames import frame_lines
from omni_deploy.common.redact import REDACTED, redact_line, scrub_shapes

TOP = {"stages", "base_config", "connectors", "stage_id"}


def test_files_that_are_not_deploy_files_have_no_frame() -> None:
    assert frame_lines("hf_abcdefghijklmnopqrstuvwxyz\n", TOP) == []  # an HF token file
    assert frame_lines('{"auths": {"r": {"auth": "c2VjcmV0"}}}\n', TOP) == []  # Docker's config.json
    assert frame_lines("[default]\naws_access_key_id = AKIAQWERTYUIOPASDFGH\n", TOP) == []


def test_deploy_files_keep_their_frames_with_secrets_redacted() -> None:
    lines = frame_lines("stages:\n  - stage_id: 0\n    api_key: abcdefgh1234\n", TOP)
    assert lines[:2] == ["stages:", "  - stage_id: 0"] and lines[2] == f"    api_key: {REDACTED}"
    assert frame_lines('{"stages": []}', TOP) == ['{"stages": []}']
    assert frame_lines("- stage_id: 0\n", TOP) == ["- stage_id: 0", ""]  # a bare list of stages (E104)


def test_the_redactor_keeps_what_is_not_a_secret() -> None:
    assert redact_line("max_num_batched_tokens: 8192") == "max_num_batched_tokens: 8192"
    assert redact_line("hf_token: ${oc.env:HF_TOKEN}") == "hf_token: ${oc.env:HF_TOKEN}"
    assert redact_line("tokenizer: openbmb/x") == "tokenizer: openbmb/x"
    assert scrub_shapes("key ghp_" + "a" * 36 + " end") == f"key {REDACTED} end"
