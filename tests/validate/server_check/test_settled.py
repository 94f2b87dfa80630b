"""The server check's verdict settles the static tier's start-up claims on a file it decided.

The ServerRun here is a stand-in record (what the child would report), named as such: the real
child's verdicts run in the vllm tier (tests/integration/test_server_check.py), where 0.32.0rc1's
own code accepts taomate_h3_usp2_realtime.yaml's `quantization` mapping.
"""

from __future__ import annotations

from omni_deploy.validate.check_server import settled_by_server
from omni_deploy.validate.findings import Finding
from omni_deploy.validate.server_check.run import FileVerdict, Refusal, ServerRun


def _finding(code: str, path: str, severity: str = "error") -> Finding:
    return Finding(severity, code, "f.yaml", 3, 5, path, "static says no")


def _standin_run(verdict: FileVerdict) -> ServerRun:
    return ServerRun(True, "", "python", "0.32.0rc1", "typed_config", 1.0, {"f.yaml": verdict})


STATIC = [
    _finding("E201", "$.stages[?@.stage_id==0].quantization"),
    _finding("E315", "$.stages[?@.stage_id==0].model_runner"),
    _finding("E373", "$.connectors.shm.extra.code2wav_bfloat16_attention_cache"),  # a build-time refusal
    _finding("E201", "$.connectors.shm.extra.codec_chunk_frames"),  # read only when Code2Wav builds
    _finding("W310", "$.x", "warning"),
]


def test_accepted_on_every_platform_settles_what_the_check_runs() -> None:
    accepted = FileVerdict(platforms=["cuda", "npu"])
    out = settled_by_server(STATIC, _standin_run(accepted), "f.yaml")
    assert [f.severity for f in out] == ["info", "info", "error", "error", "warning"]
    assert "0.32.0rc1's own start-up config code accepts this file on cuda, npu" in out[0].message


def test_a_refusal_an_undecided_file_or_no_run_settles_nothing() -> None:
    refused = FileVerdict(
        refusals=[Refusal("cuda", "typed_config", "ValueError", "no", None)], platforms=["cuda"]
    )
    undecided = FileVerdict(undecided="needs torchvision", platforms=["cuda"])
    for run in (_standin_run(refused), _standin_run(undecided), None, ServerRun(False, "not installed")):
        assert settled_by_server(STATIC, run, "f.yaml") == STATIC
    assert settled_by_server(STATIC, _standin_run(FileVerdict(platforms=["cuda"])), "other.yaml") == STATIC
