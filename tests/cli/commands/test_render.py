"""`omni-deploy render`: output that vllm-omni loads back to the same config."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from omni_deploy.config.stage_schema import PLATFORMS
from tests.support import upstream
from tests.support.cli import run_cli
from tests.support.json_shapes import assert_shape

ROOT = Path(__file__).resolve().parents[3]
FILES = upstream.deploy_files()


@pytest.mark.upstream
@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_rendered_yaml_loads_back_to_the_same_config(
    path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    result = run_cli(capsys, "render", str(path))
    assert result.code == 0, result.err
    rendered = tmp_path / "rendered.yaml"
    rendered.write_text(result.out)
    expected = upstream.oracle().resolve_deploy_yaml(path)
    assert upstream.oracle().resolve_deploy_yaml(rendered) == expected
    # Rendering the rendered file again gives the same text (apart from the header line).
    again = run_cli(capsys, "render", str(rendered))
    assert again.out.splitlines()[1:] == result.out.splitlines()[1:]


@pytest.mark.upstream
@pytest.mark.parametrize(
    "name", ["minicpmo_4_5.yaml", "qwen3_tts.yaml", "minicpmo_4_5_8x4090_stage1_replicas.yaml"]
)
def test_platform_render_is_what_vllm_omni_runs(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = upstream.deploy_dir() / name
    for platform in PLATFORMS:
        try:
            expected = upstream.applied(path, platform)
        except NotImplementedError:
            continue
        result = run_cli(capsys, "render", str(path), "--platform", platform)
        assert result.code == 0, result.err
        rendered = tmp_path / f"{platform}.yaml"
        rendered.write_text(result.out)
        reloaded = upstream.oracle().resolve_deploy_yaml(rendered)
        assert upstream.reparsed(reloaded) == expected


@pytest.mark.upstream
def test_bundled_turn_profile_equals_upstreams_turn_overlay() -> None:
    ours = upstream.oracle().resolve_deploy_yaml(ROOT / "deploy" / "minicpmo_4_5_turn.yaml")
    theirs = upstream.oracle().resolve_deploy_yaml(upstream.deploy_dir() / "minicpmo_4_5_turn.yaml")
    assert ours == theirs


def test_json_output_and_origins(capsys: pytest.CaptureFixture[str]) -> None:
    result = run_cli(
        capsys, "render", str(ROOT / "deploy" / "turn-bench.yaml"), "-o", "json", "--show-origin"
    )
    assert result.code == 0, result.err
    data = json.loads(result.out)
    assert_shape(data, "render")
    assert data["config"]["stages"][0]["max_num_seqs"] == 16
    seqs = data["origins"]["$.stages[0].max_num_seqs"]
    assert seqs["file"].endswith("deploy/turn-bench.yaml") and seqs["layer"] == "overlay"
    assert data["origins"]["$.stages[1].max_model_len"]["layer"] == "base"


def test_json_keeps_one_shape_without_origins(capsys: pytest.CaptureFixture[str]) -> None:
    shown = json.loads(
        run_cli(capsys, "render", str(ROOT / "deploy" / "turn-bench.yaml"), "-o", "json", "--show-origin").out
    )
    plain = run_cli(capsys, "render", str(ROOT / "deploy" / "turn-bench.yaml"), "-o", "json")
    data = json.loads(plain.out)
    assert_shape(data, "render")
    assert set(data) == set(shown) and data["origins"] == {} and data["config"] == shown["config"]
    assert data["schema_version"] == 1 and data["platform"] is None


def test_stdin_and_case_insensitive_platform(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import io

    text = (ROOT / "deploy" / "turn-bench.yaml").read_text()
    monkeypatch.setattr("sys.stdin", io.StringIO(text))
    name = str(ROOT / "deploy" / "turn-bench.yaml")
    piped = run_cli(capsys, "render", "-", "--stdin-filename", name, "--platform", "CUDA")
    direct = run_cli(capsys, "render", name, "--platform", "cuda")
    assert piped.code == 0 and piped.out == direct.out
    monkeypatch.setattr("sys.stdin", io.StringIO("stages: [\n"))
    broken = run_cli(capsys, "render", "-")
    assert broken.code == 1 and "<stdin>:" in broken.err


def test_show_origin_yaml_is_still_yaml(capsys: pytest.CaptureFixture[str]) -> None:
    plain = run_cli(capsys, "render", str(ROOT / "deploy" / "turn-bench.yaml"), "--platform", "cuda")
    shown = run_cli(
        capsys, "render", str(ROOT / "deploy" / "turn-bench.yaml"), "--platform", "cuda", "--show-origin"
    )
    assert shown.code == 0
    assert yaml.safe_load(shown.out) == yaml.safe_load(plain.out)
    line = next(x for x in shown.out.splitlines() if "kv_cache_memory_bytes: 4294967296" in x)
    assert "turn-bench.yaml:" in line and "(platform:cuda)" in line


def test_default_file_outside_a_project_is_the_bundled_profile(
    capsys: pytest.CaptureFixture[str], outside_project: Path
) -> None:
    result = run_cli(capsys, "render")
    assert result.code == 0
    assert "minicpmo_4_5_turn.yaml" in result.out.splitlines()[0]
    assert "using the bundled MiniCPM-o 4.5 turn profile" in result.err  # and it says so


def test_bad_input_is_a_message_not_a_traceback(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("stages:\n  - stage_id: 0\n  max: [\n")
    result = run_cli(capsys, "render", str(bad))
    assert result.code == 1
    assert "Traceback" not in result.err
    assert result.err.startswith("omni-deploy: error: ")
    assert "bad.yaml:" in result.err
    missing = run_cli(capsys, "render", str(tmp_path / "absent.yaml"))
    assert missing.code == 1 and "no such file" in missing.err
    usage = run_cli(capsys, "render", "--platform", "tpu")
    assert usage.code == 2


def test_render_does_not_touch_the_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = ROOT / "deploy" / "turn-bench.yaml"
    copy = tmp_path / "turn-bench.yaml"
    base = tmp_path / "minicpmo_4_5_turn.yaml"
    copy.write_text(src.read_text())
    base.write_text((ROOT / "deploy" / "minicpmo_4_5_turn.yaml").read_text())
    before = {p: p.read_bytes() for p in (copy, base)}
    assert run_cli(capsys, "render", str(copy), "--platform", "cuda").code == 0
    assert {p: p.read_bytes() for p in (copy, base)} == before
    assert sorted(tmp_path.iterdir()) == sorted(before)


@pytest.mark.parametrize(
    "args",
    [
        ["--help"],
        ["render", "--help"],
        ["render", "deploy/turn-bench.yaml"],
        ["validate", "deploy/turn-bench.yaml"],
        ["explain", "deploy/turn-bench.yaml", "--backend", "--probe"],
        ["serve", "--help"],
    ],
)
def test_light_commands_import_no_heavy_module(args: list[str]) -> None:
    probe = (
        "import sys\n"
        "from omni_deploy.cli.app import main\n"
        f"code = main({args!r})\n"
        "heavy = [m for m in ('torch', 'onnx', 'onnxruntime', 'vllm', 'vllm_omni') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
        "sys.exit(code)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_validate_starts_without_its_slow_imports(tmp_path: Path) -> None:
    # What start-up work (benchmarks/cli_startup.py) took out: the schema is evaluated without
    # jsonschema, versions are read without importlib.metadata, and nothing draws tables.
    probe = (
        "import sys\n"
        "from omni_deploy.cli.app import main\n"
        f"code = main(['validate', {str(ROOT / 'deploy' / 'turn-bench.yaml')!r}])\n"
        "slow = [m for m in ('jsonschema', 'importlib.metadata', 'tomllib', 'rich', 'difflib', 'shutil')"
        " if m in sys.modules]\n"
        "assert not slow, slow\n"
        "sys.exit(code)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
