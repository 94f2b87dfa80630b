"""speaker_rules' mirrors of vLLM's reading of the environment, against vLLM 0.30.0's own code: the
VLLM_PLUGINS allowlist (vllm/envs.py, vllm/plugins/__init__.py), what its Ray executor copies to
workers (vllm/ray/ray_env.py), and whether an INFO line of a `vllm.` logger is printed
(vllm/logger.py). `explain --probe` and serve say what these mirrors say, so they must be what vLLM does.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from omni_deploy.integrations.speaker_rules import (
    ENV_BACKEND,
    ENV_RAY_EXTRA_PREFIXES,
    ENV_RAY_EXTRA_VARS,
    ENV_REPORT_DIR,
    ENV_TRT,
    LOGGER_NAME,
    PLUGIN_NAME,
    allowlist,
    allowlist_drops_plugin,
    allowlist_fix,
    ray_copies,
    report_line_logged,
)

pytest.importorskip("vllm")

pytestmark = pytest.mark.vllm

ALLOWLISTS = [
    None,
    "",
    PLUGIN_NAME,
    f"vllm_omni_register_models,{PLUGIN_NAME}",
    f"vllm_omni_register_models, {PLUGIN_NAME}",
    f"{PLUGIN_NAME} ",
    f"{PLUGIN_NAME},",
    "vllm_omni_register_models",
]


@pytest.mark.parametrize("value", ALLOWLISTS)
def test_the_allowlist_is_what_vllm_reads(value: str | None, monkeypatch: pytest.MonkeyPatch) -> None:
    import vllm.envs

    if value is None:
        monkeypatch.delenv("VLLM_PLUGINS", raising=False)
    else:
        monkeypatch.setenv("VLLM_PLUGINS", value)
    allowed = vllm.envs.VLLM_PLUGINS
    assert allowlist(value) == allowed
    # vllm/plugins/__init__.py: `allowed_plugins is None or plugin.name in allowed_plugins`
    assert allowlist_drops_plugin(value) == (allowed is not None and PLUGIN_NAME not in allowed)
    if value is not None:
        monkeypatch.setenv("VLLM_PLUGINS", allowlist_fix(value))
        assert PLUGIN_NAME in vllm.envs.VLLM_PLUGINS  # the fix line loads the plugin


RAY_ENVS: list[dict[str, str]] = [
    {},
    {ENV_RAY_EXTRA_VARS: ENV_REPORT_DIR},
    {ENV_RAY_EXTRA_VARS: f" {ENV_BACKEND} , MY_VAR"},
    {ENV_RAY_EXTRA_PREFIXES: "OMNI_DEPLOY_"},
    {ENV_RAY_EXTRA_PREFIXES: "MINICPMO_, OMNI_DEPLOY_SPK_"},
]


@pytest.mark.parametrize("extra", RAY_ENVS)
def test_what_ray_workers_get_is_what_vllm_copies(
    extra: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from vllm.ray import ray_env

    monkeypatch.setattr(ray_env, "RAY_NON_CARRY_OVER_ENV_VARS", set())
    for name in (ENV_RAY_EXTRA_VARS, ENV_RAY_EXTRA_PREFIXES):
        monkeypatch.delenv(name, raising=False)
    ours = {ENV_BACKEND: "cuda-torch", ENV_TRT: "1", ENV_REPORT_DIR: "/run/speaker", "HF_TOKEN": "x",
            "VLLM_LOGGING_LEVEL": "INFO", "MY_VAR": "1"}  # fmt: skip
    env = {**ours, **extra}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    copied = ray_env.get_env_vars_to_copy()
    for name in ours:
        assert ray_copies(name, env) == (name in copied), name


@pytest.fixture
def fresh_vllm_logging() -> Iterator[None]:
    """vLLM's logger tree as a new process has it before vllm.logger configures it, restored after."""
    tree = logging.getLogger("vllm")
    saved = (list(tree.handlers), tree.level, tree.propagate)
    yield
    tree.handlers[:], tree.level, tree.propagate = saved


LOGGING_ENVS: list[dict[str, str]] = [
    {},
    {"VLLM_LOGGING_LEVEL": "WARNING"},
    {"VLLM_LOGGING_LEVEL": "debug"},
    {"VLLM_LOGGING_LEVEL": "info"},
    {"VLLM_LOGGING_LEVEL": "ERROR"},
    {"VLLM_CONFIGURE_LOGGING": "0"},
]


@pytest.mark.parametrize("env", LOGGING_ENVS)
def test_whether_the_report_line_is_printed_is_what_vllm_logging_does(
    env: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    fresh_vllm_logging: None,
) -> None:
    import vllm.logger

    for name in ("VLLM_LOGGING_LEVEL", "VLLM_CONFIGURE_LOGGING", "VLLM_LOGGING_CONFIG_PATH"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("VLLM_LOGGING_STREAM", "ext://sys.stdout")
    tree = logging.getLogger("vllm")
    tree.handlers[:], tree.level, tree.propagate = [], logging.NOTSET, True
    vllm.logger._configure_vllm_root_logger()  # what importing vllm.logger does in a fresh process
    capsys.readouterr()
    vllm.logger.init_logger(LOGGER_NAME).info("omni-deploy CAM++ report: parity")
    printed = "omni-deploy CAM++ report: parity" in capsys.readouterr().out
    logged, why = report_line_logged(env)
    assert logged is printed, why
