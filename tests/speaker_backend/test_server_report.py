"""serve's reading of the plugin's report lines, against lines the plugin itself formats."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from omni_deploy.integrations.report import Outcome, report
from omni_deploy.integrations.speaker_rules import LOGGER_NAME
from omni_deploy.speaker_backend.server_report import parse_report_line, read_report, summary_lines


@pytest.fixture
def plugin_lines() -> list[str]:
    records: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: records.append(  # type: ignore[method-assign]
        f"INFO 12-01 00:45:04 [vllm_plugin.py:233] {record.getMessage()}"
    )
    logger = logging.getLogger(LOGGER_NAME)
    logger.addHandler(handler)
    old = logger.level
    logger.setLevel(logging.INFO)
    yield records
    logger.removeHandler(handler)
    logger.setLevel(old)


def test_a_line_the_plugin_formats_is_read_back(plugin_lines: list[str]) -> None:
    outcome = Outcome(
        "cuda-torch",
        "cuda:1",
        "token2wav_device_spk (default)",
        stage="2",
        replaced="onnxruntime-cpu",
        tf32="on:x",
        kernels="triton",
        onnx="/m/c.onnx",
    )
    report(outcome)
    (stage,) = read_report(plugin_lines).stages
    assert stage.stage == "2" and stage.backend == "cuda-torch"
    assert stage.fields["device"] == "cuda:1" and stage.fields["onnx"] == "/m/c.onnx"
    assert stage.fields["decided-by"] == "token2wav_device_spk(default)"


def test_warnings_and_other_lines() -> None:
    report = read_report(
        [
            "INFO loading weights",
            "WARNING 12-01 [vllm_plugin.py:1] omni-deploy CAM++: stage 2: the encoder failed (x); ...",
        ]
    )
    assert report.stages == [] and report.warnings == [
        "omni-deploy CAM++: stage 2: the encoder failed (x); ..."
    ]
    assert parse_report_line("omni-deploy CAM++ report: stage=2") is None  # no backend: not a report


def test_no_report_is_a_loud_warning() -> None:
    ((level, text),) = summary_lines(read_report([]), "cuda-torch")
    assert level == "warning" and "NO speaker-backend report" in text and "VLLM_PLUGINS" in text
    assert "not cuda-torch" in text


def test_a_backend_other_than_the_one_asked_for_warns() -> None:
    report = read_report(["omni-deploy CAM++ report: stage=2 backend=cpu-onnxruntime device=cpu"])
    ((level, text),) = summary_lines(report, "cuda-torch")
    assert level == "warning" and "asked for cuda-torch" in text
    ((level, _),) = summary_lines(report, "cpu-onnxruntime")
    assert level == "info"


def test_report_files_come_first_and_a_broken_one_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from omni_deploy.integrations.report import write_file

    directory = tmp_path
    monkeypatch.setenv("OMNI_DEPLOY_SPK_REPORT_DIR", str(directory))
    path = write_file(Outcome("cuda-torch", "cuda:0", "token2wav_device_spk", stage="2", vllm_omni="0.30.0"))
    assert path is not None and Path(path).name.startswith("minicpmo_4_5-2-")
    (directory / "garbage.json").write_text("{not json")
    line = "omni-deploy CAM++ report: stage=2 backend=cpu-onnxruntime device=cpu"  # an older line in the log
    report = read_report([line], directory)
    (stage,) = report.stages
    assert report.source == "report files" and stage.backend == "cuda-torch"
    assert stage.fields["vllm-omni"] == "0.30.0" and stage.fields["decided-by"] == "token2wav_device_spk"
    assert any("garbage.json" in w for w in report.warnings)
    assert read_report([line], directory / "missing").source == "server log"


def test_a_rewritten_file_replaces_the_first_report(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from omni_deploy.integrations.report import write_file

    directory = tmp_path
    monkeypatch.setenv("OMNI_DEPLOY_SPK_REPORT_DIR", str(directory))
    outcome = Outcome("cuda-torch", "cuda:0", "x", stage="2")
    write_file(outcome)
    outcome.backend, outcome.retired = "cpu-onnxruntime", "EmbeddingRejected: norm 0"
    write_file(outcome)  # what the guard does when it retires the encoder for good
    (stage,) = read_report([], directory).stages
    assert stage.backend == "cpu-onnxruntime" and stage.fields["retired"] == "EmbeddingRejected: norm 0"
    assert not [p for p in directory.iterdir() if p.name.startswith(".")]  # no temporary file left


def test_a_model_that_reports_at_its_first_request_is_not_a_warning() -> None:
    ((level, text),) = summary_lines(
        read_report([]), "cpu-onnxruntime", later="CosyVoice3 multimodal processor"
    )
    assert level == "info" and "first request with a reference voice" in text and "--probe" in text


def test_the_report_is_in_launch_json_before_it_is_said(tmp_path) -> None:  # type: ignore[no-untyped-def]
    # Whoever reads the printed line may open launch.json at once (a test did, under load, and
    # found no report yet): the record is written first.
    import json

    from omni_deploy.serve.rundir import write_record
    from omni_deploy.serve.start import report_speaker_backend

    write_record(tmp_path, {"platform": "cuda"})
    (tmp_path / "server.log").write_text(
        "INFO 12-01 00:45:04 [vllm_plugin.py:233] omni-deploy CAM++ report: stage=2 backend=cuda-torch\n"
    )
    seen: list[dict] = []  # type: ignore[type-arg]

    def say(_line: str) -> None:
        seen.append(json.loads((tmp_path / "launch.json").read_text()))

    report_speaker_backend(tmp_path, "cuda-torch", say)
    assert seen and all(record["speaker_report"]["reported"] for record in seen)


def test_the_prepare_field_reads_the_same_from_the_line_and_the_file(
    plugin_lines: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OMNI_DEPLOY_SPK_REPORT_DIR", str(tmp_path))
    report(Outcome("cuda-torch", "cuda:0", "token2wav_device_spk (default)", stage="2", prepare="batched"))
    (from_line,) = read_report(plugin_lines).stages
    (from_file,) = read_report([], tmp_path).stages
    assert from_line.fields["prepare"] == from_file.fields["prepare"] == "batched"


def test_a_start_up_fallback_is_explained_with_what_to_do() -> None:
    line = (
        "INFO omni-deploy CAM++ report: stage=2 backend=cpu-onnxruntime device=cpu tf32=n/a kernels=n/a "
        "onnx=/m/campplus.onnx replaced=nothing decided-by=fallback:_CUDA_error_in_the_encoder_warm-up "
        "model=minicpmo_4_5 vllm-omni=0.30.0 prepare=n/a"
    )
    lines = summary_lines(read_report([line]), "cuda-torch")
    advice = [text for level, text in lines if level == "warning" and "fell back at start-up" in text]
    assert len(advice) == 1 and advice[0].startswith("stage 2:")
    assert "CUDA context may be unusable" in advice[0] and "token2wav_device_spk: false" in advice[0]
    fine = line.replace(
        "decided-by=fallback:_CUDA_error_in_the_encoder_warm-up", "decided-by=token2wav_device_spk"
    )
    assert not any("fell back" in text for _, text in summary_lines(read_report([fine]), "cpu-onnxruntime"))
