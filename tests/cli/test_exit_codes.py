"""Exit code 2 for every usage error, whichever layer finds it; every doc that lists exit codes
lists them all."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from omni_deploy.cli import app as cli
from tests.support.cli import run_cli

ROOT = Path(__file__).resolve().parents[2]
BENCH = str(ROOT / "deploy" / "turn-bench.yaml")
ALL_CODES = sorted(
    {
        getattr(cli, name)
        for name in dir(cli)
        if name.startswith("EXIT_") and isinstance(getattr(cli, name), int)
    }
)


@pytest.fixture
def taken(tmp_path: Path) -> Path:
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "x").write_text("")
    (tmp_path / "plot.png").write_text("")
    (tmp_path / "results").mkdir()
    (tmp_path / "campplus.onnx").write_text("")
    return tmp_path


USAGE_ERRORS = [
    (["serve", BENCH, "--dry-run", "--", "--port", "9"], "--port is set by omni-deploy serve"),
    (["serve", BENCH, "--dry-run", "--", "--headless"], "--headless needs --omni-master-address"),
    (["serve", BENCH, "--dry-run", "--", "--stage-id", "7"], "--stage-id 7"),
    (["serve", BENCH, "--dry-run", "--run-dir", "{tmp}/taken"], "is not an empty directory"),
    (["serve", BENCH, "-o", "json"], "-o json needs --dry-run"),
    (["k8s", BENCH, "--model", "m/x", "--platform", "npu"], "renders NVIDIA GPU pods"),
    (["k8s", BENCH, "--model", "./relative"], "neither a Hugging Face id"),
    (["k8s", BENCH, "--model", "m/x", "--name", "Bad_Name"], "DNS-1123"),
    (["bench", "report", "{tmp}/results", "--plot", "{tmp}/plot.png"], "exists; not overwritten"),
    (["bench", "report", "{tmp}/results", "--plot", "{tmp}/plot.gif"], "use a .png or .svg file"),
    (["bench", "ab", BENCH, "--a", "spk-backend=x", "--b", "x=y", "--dataset-path", "{tmp}"], "KEY=VALUE"),
    (["bench", "ab", BENCH, "--model-path", "m", "--a", "a=b", "--b", "c=d", "--dataset-path", "{tmp}"],
     "--model-path is now --model"),
    (["spk", "make-standin", "{tmp}/campplus.onnx"], "pass --force"),
    (["spk", "parity", "--onnx", "{tmp}/campplus.onnx", "--device", "tpu"], "'tpu' is not a device"),
    (["validate", BENCH, "--ignore", "W3"], "not a finding code"),
    (["validate", BENCH, "--target-version", "0.3"], "not a vllm-omni release"),
    (["validate", BENCH, "--platform", "tpu"], "not a platform"),
    (["valdate", BENCH], "Did you mean 'validate'?"),
    (["explain", BENCH, "--color", "sometimes"], "'sometimes' is not one of"),
]  # fmt: skip


@pytest.mark.parametrize(("args", "said"), USAGE_ERRORS, ids=[" ".join(a[:4]) for a, _ in USAGE_ERRORS])
def test_usage_errors_exit_2(
    capsys: pytest.CaptureFixture[str], taken: Path, args: list[str], said: str
) -> None:
    result = run_cli(capsys, *(a.replace("{tmp}", str(taken)) for a in args))
    assert result.code == 2, result.err
    assert said in result.err and "Traceback" not in result.err


def test_a_host_without_an_accelerator_needs_the_platform_named(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")  # no nvidia-smi and friends
    result = run_cli(capsys, "serve", BENCH)
    assert result.code == 2 and "no accelerator found" in result.err and "pass --platform" in result.err


PAGES_WITH_EXIT_CODES = ["README.md", "docs/ci.md", "docs/serving.md"]


@pytest.mark.parametrize("page", PAGES_WITH_EXIT_CODES)
def test_docs_list_every_exit_code(page: str) -> None:
    text = (ROOT / page).read_text()
    section = text[text.index("xit codes") :]
    section = section[: section.find("\n#", 1)] if "\n#" in section else section
    listed = {int(n) for n in re.findall(r"(?<![\w.])(\d{1,3})(?= |\s*\||:)", section)}
    assert set(ALL_CODES) <= listed, f"{page} leaves out {sorted(set(ALL_CODES) - listed)}"


def test_help_lists_every_exit_code() -> None:
    listed = {int(n) for n in re.findall(r"(?<![\w.])(\d{1,3}) ", cli.EXIT_HELP)}
    assert set(ALL_CODES) <= listed
