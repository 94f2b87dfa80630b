"""The server check's parent side, against a stand-in interpreter (tests/support/standin_bin/
server-python, named as such: it is not vllm-omni). The real child runs in the vllm tier
(tests/integration/test_server_check.py)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from omni_deploy.deployment.model import Deployment
from omni_deploy.validate.context import Options
from omni_deploy.validate.runner import validate_file, validate_inputs
from omni_deploy.validate.server_check.locate import places
from omni_deploy.validate.server_check.run import Job, Refusal, check

ROOT = Path(__file__).resolve().parents[3]
STANDIN = str(ROOT / "tests" / "support" / "standin_bin" / "server-python")
DATA = ROOT / "tests" / "data" / "validate"


def places_in(refusal: Refusal, deployment: Deployment) -> list:  # type: ignore[type-arg]
    return places(refusal, deployment.config)


def _job(tmp_path: Path, text: str, name: str = "f.yaml") -> Job:
    path = tmp_path / name
    path.write_text(text)
    return Job(str(path), path, ("cuda",), "minicpmo_4_5")


def test_a_hanging_child_is_stopped_at_its_time_limit(tmp_path: Path) -> None:
    job = _job(tmp_path, "# standin-server-check: hang\npipeline: minicpmo_4_5\n")
    started = time.monotonic()
    run = check([job], python=STANDIN, target_version="0.30.0", timeout_s=2)
    assert time.monotonic() - started < 20
    assert run.ran and "timed out after 2 s" in run.reason
    assert "stopped before this file" in (run.verdicts[job.name].undecided or "")


def test_a_child_over_its_memory_limit_fails_without_taking_the_parent(tmp_path: Path) -> None:
    job = _job(tmp_path, "# standin-server-check: allocate\npipeline: minicpmo_4_5\n")
    run = check([job], python=STANDIN, target_version="0.30.0", memory_gib=1)
    assert run.ran and not run.verdicts[job.name].decided
    assert "exited with" in run.reason


def test_not_run_without_vllm_omni_and_says_why(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STANDIN_SERVER_VERSION", "")
    run = check([_job(tmp_path, "pipeline: minicpmo_4_5\n")], python=STANDIN, target_version="0.30.0")
    assert not run.ran and run.reason == f"vllm-omni is not installed for {STANDIN}"


def test_not_run_when_the_target_is_another_release(tmp_path: Path) -> None:
    run = check([_job(tmp_path, "pipeline: minicpmo_4_5\n")], python=STANDIN, target_version="0.26.0")
    assert not run.ran and run.reason == f"the target is vllm-omni 0.26.0; {STANDIN} has vllm-omni 0.30.0"


def test_this_interpreter_without_vllm_omni_is_not_run(tmp_path: Path) -> None:
    pytest.importorskip("jsonschema")
    if os.environ.get("OMNI_DEPLOY_VLLM_TIER"):
        pytest.skip("this interpreter has vllm-omni")
    import importlib.util

    if importlib.util.find_spec("vllm_omni") is not None:
        pytest.skip("this interpreter has vllm-omni")
    report = validate_file(str(DATA / "base_minicpmo.yaml"), Options(server_check="auto"))
    assert report.server is not None and not report.server.ran
    assert report.valid


def test_one_child_checks_many_files_and_stdin_is_left_out(tmp_path: Path) -> None:
    files = [tmp_path / f"f{i}.yaml" for i in range(3)]
    for i, path in enumerate(files):
        path.write_text(f"base_config: {DATA / 'base_minicpmo.yaml'}\nasync_chunk: false\n# n{i}\n")
    options = Options(server_check="on", server_python=STANDIN)
    reports = validate_inputs(
        [*((str(p), None) for p in files), ("-.yaml", "pipeline: minicpmo_4_5\n")], options
    )
    runs = {id(r.server) for r in reports}
    assert len(runs) == 1  # one run for all of them
    assert [r.valid for r in reports] == [True, True, True, False]
    # (stdin's file has no stages: I326 notes it)
    assert [f.code for f in reports[3].findings if f.severity != "info"] == ["E397"]


def test_a_refusal_lands_on_the_key_it_names_in_its_stage_and_platform(tmp_path: Path) -> None:
    path = tmp_path / "f.yaml"
    path.write_text(
        f"base_config: {DATA / 'base_minicpmo.yaml'}\n"
        "stages:\n  - stage_id: 0\n    enable_lora: true\n  - stage_id: 1\n    enable_lora: true\n"
        "platforms:\n  npu:\n    stages:\n      - stage_id: 1\n        enable_lora: false\n"
    )
    deployment = Deployment.load(str(path))
    message = "Stage 1 (llm_ar) has explicit engine argument(s) with no structured config owner: enable_lora"
    found = places_in(Refusal("cuda", "typed_config", "ValueError", message, None), deployment)
    assert [(p.origin.line, p.path) for p in found] == [(6, "$.stages[?@.stage_id==1].enable_lora")]
    found = places_in(Refusal("npu", "typed_config", "ValueError", message, None), deployment)
    assert {p.origin.line for p in found} == {6, 11}


def test_a_message_naming_nothing_in_the_file_is_about_the_whole_file(tmp_path: Path) -> None:
    path = tmp_path / "f.yaml"
    path.write_text("pipeline: minicpmo_4_5\n")
    deployment = Deployment.load(str(path))
    assert (
        places_in(Refusal("cuda", "load", "RecursionError", "maximum recursion depth", None), deployment)
        == []
    )


def test_a_plain_name_after_the_colon_is_found_as_a_value(tmp_path: Path) -> None:
    path = tmp_path / "f.yaml"
    path.write_text(
        f"base_config: {DATA / 'base_minicpmo.yaml'}\nstages:\n  - stage_id: 2\n    input_connectors:\n"
        "      from_stage_1: nope\n"
    )
    deployment = Deployment.load(str(path))
    refusal = Refusal(
        "cuda", "transfer_config", "ValueError", "Undefined connector reference: nope", None, True
    )
    assert [p.origin.line for p in places_in(refusal, deployment)] == [5]


def test_json_output_carries_the_run_and_matches_its_schema(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from tests.support.cli import run_cli
    from tests.support.json_shapes import assert_shape

    path = DATA / "negative" / "server_check_refuses.yaml"
    result = run_cli(capsys, "validate", str(path), "--server-python", STANDIN, "-o", "json")
    data = json.loads(result.out)
    assert_shape(data, "validate")
    assert data["server_check"]["ran"] is True and data["server_check"]["vllm_omni"] == "0.30.0"
    assert data["files"][0]["server_check"] == {"decided": True, "reason": None}
    assert result.code == 1


def test_text_output_says_why_it_did_not_run(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.support.cli import run_cli

    monkeypatch.setenv("STANDIN_SERVER_VERSION", "")
    result = run_cli(capsys, "validate", str(DATA / "base_minicpmo.yaml"), "--server-python", STANDIN)
    assert f"server check: not run (vllm-omni is not installed for {STANDIN})" in result.out
    assert result.code == 0
    result = run_cli(capsys, "validate", str(DATA / "base_minicpmo.yaml"), "--server-check", "off")
    assert "server check" not in result.out
