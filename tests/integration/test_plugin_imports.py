"""What `register()` costs a vLLM process that never builds a patched model (the API server, the
Thinker, the Talker, their workers): measured in fresh interpreters with `-X importtime`, through
vLLM's own `load_general_plugins`, with and without omni-deploy's plugin in VLLM_PLUGINS.

The figure (module count, import time) is printed; benchmarks/plugin_register.py records it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from typing import Any

import pytest

from omni_deploy.integrations.speaker_rules import CODE2WAV_MODULE

pytest.importorskip("vllm_omni")
pytest.importorskip("vllm")

pytestmark = pytest.mark.vllm

CODE2WAV = CODE2WAV_MODULE
HEAVY = ("torch", "onnx", "onnxruntime", "s3tokenizer", "hyperpyyaml", "vllm_omni.model_executor.models")

PROCESS = textwrap.dedent(
    """
    import json, os, sys, time
    import vllm.plugins
    before = set(sys.modules)
    start = time.perf_counter()
    vllm.plugins.load_general_plugins()
    elapsed = time.perf_counter() - start
    after = {"new": sorted(set(sys.modules) - before), "seconds": elapsed}
    if sys.argv[1] != "-":  # then import this module, as the Code2Wav stage does
        import importlib
        module = importlib.import_module(sys.argv[1])
        after["patched"] = getattr(module.MiniCPMO45Code2Wav._build_backend, "_omni_deploy_campplus", False)
    print("RESULT " + json.dumps(after))
    """
)


def _load(plugins: str, then: str = "") -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", PROCESS, then or "-"],
        capture_output=True, text=True, timeout=600, env={**_env(), "VLLM_PLUGINS": plugins},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    (line,) = [x for x in done.stdout.splitlines() if x.startswith("RESULT ")]
    result: dict[str, Any] = json.loads(line[len("RESULT ") :])
    # -X importtime: "import time: self [us] | cumulative | name"; top-level omni_deploy entries.
    result["omni_deploy_us"] = sum(
        int(row.split("|")[1])
        for row in done.stderr.splitlines()
        if row.startswith("import time:") and row.split("|")[-1].strip().startswith("omni_deploy")
        and not row.split("|")[-1].startswith("  ")
    )  # fmt: skip
    return result


def _env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if not k.startswith("OMNI_DEPLOY_SPK_")}


def test_register_in_a_process_without_code2wav_imports_nothing_heavy() -> None:
    without = _load("vllm_omni_register_models")
    with_plugin = _load("vllm_omni_register_models,omni_deploy_campplus")
    added = sorted(set(with_plugin["new"]) - set(without["new"]))
    ours = [m for m in added if m == "omni_deploy" or m.startswith("omni_deploy.")]
    others = [m for m in added if m not in ours]
    print(f"\nregister(): {len(ours)} omni-deploy modules, {with_plugin['omni_deploy_us'] / 1000:.1f} ms "
          f"cumulative import time; other modules it added: {others}")  # fmt: skip
    assert not [m for m in added if m.startswith(HEAVY) or m.split(".")[0] in HEAVY]
    assert not [m for m in ours if m.startswith("omni_deploy.speaker.")]  # the encoder stays unloaded
    assert len(ours) <= 6, ours
    assert CODE2WAV not in with_plugin["new"]
    assert all(m.split(".")[0] in sys.stdlib_module_names for m in others), others


def test_the_hook_patches_code2wav_when_it_is_imported_later() -> None:
    result = _load("vllm_omni_register_models,omni_deploy_campplus", then=CODE2WAV)
    assert result["patched"] is True
