"""`omni-deploy explain` through the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.cli import run_cli

ROOT = Path(__file__).resolve().parents[3]
DATA = ROOT / "tests" / "data" / "explain"
# Without FILE, explain takes the bundled profile only outside a project (the checkout is one).
pytestmark = pytest.mark.usefixtures("outside_project")


def _backends(out: str) -> dict[str, str]:
    return {p: d["speaker_backend"] for p, d in json.loads(out)["platforms"].items()}


@pytest.mark.parametrize("args", [[], [str(ROOT / "deploy" / "turn-bench.yaml")]])
def test_bundled_files(capsys: pytest.CaptureFixture[str], args: list[str]) -> None:
    result = run_cli(capsys, "explain", "--backend", *args, "--target-version", "0.30.0", "-o", "json")
    assert result.code == 0, result.err
    assert _backends(result.out) == {
        "cuda": "cuda-torch", "rocm": "cpu-onnxruntime", "npu": "cpu-onnxruntime", "xpu": "cpu-onnxruntime",
        "musa": "cpu-onnxruntime",
    }  # fmt: skip
    cuda = json.loads(result.out)["platforms"]["cuda"]
    assert set(cuda) == {"speaker_backend", "provider", "weights_dtype", "inputs_dtype", "matmul_tf32", "cudnn_tf32",
                         "reasons", "fallbacks", "warnings", "reference_preparation", "vllm_omni_own"}  # fmt: skip
    assert all({"setting", "value", "origin"} == set(r) for r in cuda["reasons"])
    text = run_cli(capsys, "explain", "--backend", *args, "--target-version", "0.30.0")
    assert "cuda: cuda-torch" in text.out and "rocm: cpu-onnxruntime" in text.out
    assert "(default)" in text.out


@pytest.mark.parametrize(
    ("name", "backend", "origin"),
    [
        ("device_spk_off.yaml", "cpu-onnxruntime", "device_spk_off.yaml:5:29"),
        ("trt_on.yaml", "tensorrt", "trt_on.yaml:5:22"),
    ],
)
def test_overlays_change_the_answer(
    capsys: pytest.CaptureFixture[str], name: str, backend: str, origin: str
) -> None:
    result = run_cli(capsys, "explain", "--backend", str(DATA / name), "--platform", "cuda", "-o", "json")
    cuda = json.loads(result.out)["platforms"]["cuda"]
    assert cuda["speaker_backend"] == backend
    assert any(origin in r["origin"] for r in cuda["reasons"])


def test_env_var_changes_the_answer(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MINICPMO_TOKEN2WAV_TRT", "1")
    result = run_cli(capsys, "explain", "--backend", "--platform", "cuda", "-o", "json")
    assert _backends(result.out) == {"cuda": "tensorrt"}


def test_probe_without_gpu_or_vllm(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    result = run_cli(capsys, "explain", "--backend", "--probe")
    assert result.code == 0, result.err
    assert "nvidia-smi not found" in result.out
    data = json.loads(run_cli(capsys, "explain", "--backend", "--probe", "-o", "json").out)
    assert data["host"]["probed"] is True and data["host"]["gpus"] == []


def test_overview(capsys: pytest.CaptureFixture[str]) -> None:
    result = run_cli(capsys, "explain", str(ROOT / "deploy" / "turn-bench.yaml"), "-o", "json")
    data = json.loads(result.out)["platforms"]["cuda"]
    assert [s["role"] for s in data["stages"]] == ["Thinker", "Talker", "Code2Wav"]
    assert data["devices"]["0"]["gpu_memory_utilization"] == 0.88
    assert data["devices"]["0"]["kv_cache_bytes"] == 6 * 1024**3
    assert data["code2wav"]["micro_batch_size"] == 4 and data["code2wav"]["speaker_backend"] == "cuda-torch"
    text = run_cli(capsys, "explain", str(ROOT / "deploy" / "turn-bench.yaml"))
    assert "Talker" in text.out and "device 0: stages [0, 1, 2] ask for 0.88" in text.out


def test_non_minicpm_pipeline(capsys: pytest.CaptureFixture[str]) -> None:
    result = run_cli(
        capsys, "explain", "--backend", str(DATA / "other_pipeline.yaml"), "--platform", "cuda", "-o", "json"
    )
    assert _backends(result.out) == {"cuda": "not-applicable"}


def test_spk_backend_override_shows_up_as_a_reason(capsys: pytest.CaptureFixture[str]) -> None:
    result = run_cli(
        capsys, "explain", "--backend", "--platform", "cuda", "--spk-backend", "cpu-onnxruntime", "-o", "json"
    )
    cuda = json.loads(result.out)["platforms"]["cuda"]
    assert cuda["speaker_backend"] == "cpu-onnxruntime"
    assert {"setting": "--spk-backend", "value": "cpu-onnxruntime", "origin": "--spk-backend"} in cuda[
        "reasons"
    ]


def test_json_always_has_host_null_unless_probed(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.support.json_shapes import assert_shape

    bench = str(ROOT / "deploy" / "turn-bench.yaml")
    for args in (["--backend"], [], ["--platform", "ALL"]):
        data = json.loads(run_cli(capsys, "explain", bench, *args, "-o", "json").out)
        assert_shape(data, "explain")
        assert data["host"] is None and data["target_version"] and data["schema_version"] == 1
    monkeypatch.setenv("PATH", "/nonexistent")
    probed = json.loads(run_cli(capsys, "explain", bench, "--probe", "-o", "json").out)
    assert_shape(probed, "explain")
    assert probed["host"]["probed"] is True


def test_names_are_checked(capsys: pytest.CaptureFixture[str]) -> None:
    banana = run_cli(capsys, "explain", "--target-version", "banana")
    assert banana.code == 2 and "not a version" in banana.err
    pipeline = run_cli(capsys, "explain", "--pipeline", "minicpmo")
    assert pipeline.code == 2 and "did you mean 'minicpmo_4_5'" in pipeline.err
    assert run_cli(capsys, "explain", "--platform", "Cuda", "--backend").code == 0


def test_stdin(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    bench = ROOT / "deploy" / "turn-bench.yaml"
    monkeypatch.setattr("sys.stdin", io.StringIO(bench.read_text()))
    result = run_cli(capsys, "explain", "-", "--stdin-filename", str(bench), "-o", "json")
    assert result.code == 0 and json.loads(result.out)["file"] == str(bench)


def test_probe_warns_about_an_allowlist_without_the_plugin(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VLLM_PLUGINS", "vllm_omni_register_models")
    result = run_cli(capsys, "explain", "--backend", "--probe", "--platform", "cuda")
    assert "allowlist without omni_deploy_campplus" in result.out
    assert "cuda: cpu-onnxruntime" in result.out  # what the server would run
    # vLLM splits on commas and strips nothing: " omni_deploy_campplus" is not the plugin's name.
    monkeypatch.setenv("VLLM_PLUGINS", "vllm_omni_register_models, omni_deploy_campplus")
    out = run_cli(capsys, "explain", "--backend", "--probe", "--platform", "cuda").out
    assert "cuda: cpu-onnxruntime" in out and "vLLM compares ' omni_deploy_campplus'" in out
    assert "fix: VLLM_PLUGINS=vllm_omni_register_models,omni_deploy_campplus" in out
    monkeypatch.setenv("VLLM_PLUGINS", "vllm_omni_register_models,omni_deploy_campplus")
    assert "cuda: cuda-torch" in run_cli(capsys, "explain", "--backend", "--probe", "--platform", "cuda").out


def test_probe_warns_about_a_vllm_from_another_environment(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # A `vllm` launcher as pip writes them, for an interpreter of another virtualenv.
    other = tmp_path / "other-venv" / "bin"
    other.mkdir(parents=True)
    (other / "vllm").write_text(f"#!{other / 'python'}\nimport sys\n")
    (other / "vllm").chmod(0o755)
    monkeypatch.setenv("PATH", str(other))
    result = run_cli(capsys, "explain", "--backend", "--probe", "--platform", "cuda")
    assert "another environment than omni-deploy's" in result.out
    assert "cuda: cpu-onnxruntime" in result.out
    data = json.loads(
        run_cli(capsys, "explain", "--backend", "--probe", "--platform", "cuda", "-o", "json").out
    )
    assert data["host"]["vllm_elsewhere"] is True


def test_a_stage_runtime_env_is_part_of_the_answer(capsys: pytest.CaptureFixture[str]) -> None:
    result = run_cli(capsys, "explain", "--backend", str(DATA / "stage_env_cpu.yaml"), "--platform", "cuda")
    assert "cuda: cpu-onnxruntime" in result.out
    assert "OMNI_DEPLOY_SPK_BACKEND" in result.out and "stages[2] env" in result.out


def _probe(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    result = run_cli(capsys, "explain", "--backend", "--probe", "--platform", "cuda", *args)
    assert result.code == 0, result.err
    return result.out


def test_probe_names_an_unverified_vllm_omni_and_the_switch_refuses_it(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import omni_deploy.speaker_backend.host

    real = omni_deploy.speaker_backend.host.installed_version
    monkeypatch.setattr(
        omni_deploy.speaker_backend.host,
        "installed_version",
        lambda d: "0.99.0" if d == "vllm-omni" else real(d),
    )
    out = _probe(capsys)
    assert (
        "warning: vllm-omni 0.99.0 is not a release the plugin is verified against (0.30.0, 0.32.0rc1)" in out
    )
    assert "cuda: cuda-torch" in out  # it still patches where the code has the shapes it checks
    monkeypatch.setenv("OMNI_DEPLOY_SPK_VERIFIED_ONLY", "1")
    out = _probe(capsys)
    assert "cuda: cpu-onnxruntime" in out and "OMNI_DEPLOY_SPK_VERIFIED_ONLY=1 refuses it" in out


def test_probe_says_a_log_level_hides_the_report_line_but_not_the_backend(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VLLM_LOGGING_LEVEL", "WARNING")
    out = _probe(capsys)
    assert "cuda: cuda-torch" in out
    assert (
        "report line will not be in the server log (VLLM_LOGGING_LEVEL=WARNING: INFO lines are not printed)"
        in out
    )
    assert "report files still are" in out


def test_probe_shows_the_last_servers_report_files(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from omni_deploy.integrations.report import Outcome, write_file

    monkeypatch.setenv("OMNI_DEPLOY_SPK_REPORT_DIR", str(tmp_path))
    assert "last server report: none found in" in _probe(capsys)
    write_file(
        Outcome("cuda-torch", "cuda:0", "token2wav_device_spk (default)", stage="2", vllm_omni="0.30.0")
    )
    out = _probe(capsys)
    assert f"last server report ({tmp_path}):" in out
    assert (
        "minicpmo_4_5 stage 2: cuda-torch on cuda:0 (decided by token2wav_device_spk (default); vllm-omni 0.30.0"
        in out
    )


def test_probe_of_the_run_directories_of_serve(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from omni_deploy.integrations.report import Outcome, write_file

    monkeypatch.delenv("OMNI_DEPLOY_SPK_REPORT_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    runs = tmp_path / "omni-deploy" / "runs"
    for run, backend in (
        ("20261201-100000-aaaaaa", "cpu-onnxruntime"),
        ("20261201-110000-bbbbbb", "cuda-torch"),
    ):
        monkeypatch.setenv("OMNI_DEPLOY_SPK_REPORT_DIR", str(runs / run / "speaker"))
        write_file(Outcome(backend, "cuda:0", "x", stage="2"))
    monkeypatch.delenv("OMNI_DEPLOY_SPK_REPORT_DIR")
    out = _probe(capsys)
    assert "20261201-110000-bbbbbb" in out and "stage 2: cuda-torch" in out  # the newest run's


@pytest.mark.parametrize(
    ("args", "origin"),
    [
        ((), "no --platform: every platform explained"),
        (("--platform", "cuda"), "--platform"),
        (("--platform", "all"), "--platform all"),
    ],
)
def test_the_platform_label_says_its_true_source(
    capsys: pytest.CaptureFixture[str], outside_project: Path, args: tuple[str, ...], origin: str
) -> None:
    # The issue: `platform = "cuda" (--platform)` was printed when no --platform was given.
    done = run_cli(capsys, "explain", "--backend", *args)
    assert done.code == 0, done.err
    labels = [line.strip() for line in done.out.splitlines() if line.strip().startswith("platform = ")]
    assert labels and all(line.endswith(f"({origin})") for line in labels), labels
    data = run_cli(capsys, "explain", "--backend", *args, "-o", "json")
    for decision in json.loads(data.out)["platforms"].values():
        (reason,) = [r for r in decision["reasons"] if r["setting"] == "platform"]
        assert reason["origin"] == origin


def test_the_overview_says_what_the_code2wav_voice_caches_hold(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The caches validate's I366/I367 judge, as a short table: at their defaults (setup 1, prompt
    4) against the 8 requests a forward batches, and set to 16 in an overlay."""
    bench = str(ROOT / "deploy" / "turn-bench.yaml")
    result = run_cli(
        capsys, "explain", bench, "--platform", "cuda", "--target-version", "0.30.0", "-o", "json"
    )
    assert result.code == 0, result.err
    caches = json.loads(result.out)["platforms"]["cuda"]["code2wav_caches"]
    assert caches["max_num_seqs"] == 8
    assert (caches["setup"]["voices"], caches["setup"]["origin"]) == (1, "default")
    assert (caches["prompt"]["voices"], caches["prompt"]["origin"]) == (4, "default")
    overlay = tmp_path / "caches.yaml"
    overlay.write_text(
        f"base_config: {bench}\nconnectors:\n  connector_of_shared_memory:\n    extra:\n"
        "      token2wav_setup_cache_size: 16\n      token2wav_runtime_prompt_cache_size: 16\n"
    )
    result = run_cli(capsys, "explain", str(overlay), "--platform", "cuda", "--target-version", "0.30.0")
    assert result.code == 0, result.err
    table = result.out[result.out.index("code2wav voice caches") :]
    assert "setup   16 voices  token2wav_setup_cache_size (" in table and "holds a full batch" in table
    assert "about 5.76 GiB of the stage's GPU memory" in table
