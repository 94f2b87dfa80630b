"""What omni-deploy's vLLM plugin costs a vLLM process that never builds a patched model.

    python benchmarks/plugin_register.py [--runs 5] [--record docs/benchmarks/plugin-register.json]

Needs the vllm tier (real vllm and vllm-omni). Each run is a fresh interpreter that imports
`vllm.plugins` and calls vLLM's own `load_general_plugins()` with VLLM_PLUGINS=vllm_omni_register_models,
the way every vLLM process starts (API server, Thinker, Talker, workers), and then times one more step,
the plugin's, alone (so vllm-omni's own registration, which dominates and varies, stays out of it):
- `lazy (round 3)`: `omni_deploy.integrations.vllm_plugin.register()` as it is now: hooks only;
- `eager (round 2)`: importing the two vllm-omni modules the round-2 plugin imported in `register()`
  (MiniCPM-o Code2Wav and the Step-Audio2 token2wav core).
Columns, medians over --runs (after one run that fills the bytecode cache, as an installed package
has one): modules the step added to sys.modules, its wall time, and the growth of the process's
resident memory over it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EAGER = (
    "vllm_omni.model_executor.models.minicpmo_4_5.minicpmo_4_5_code2wav",
    "vllm_omni.model_executor.models.step_audio2.step_audio2_token2wav",
)
PROCESS = textwrap.dedent(
    """
    import importlib, json, sys, time
    import vllm.plugins
    vllm.plugins.load_general_plugins()
    def rss_mib():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * __import__("os").sysconf("SC_PAGE_SIZE") / 2**20
    before, rss = set(sys.modules), rss_mib()
    start = time.perf_counter()
    if sys.argv[1:] == ["lazy"]:
        from omni_deploy.integrations import vllm_plugin
        vllm_plugin.register()
    else:
        for name in sys.argv[1:]:
            importlib.import_module(name)
    seconds = time.perf_counter() - start
    print("RESULT " + json.dumps({"modules": len(set(sys.modules) - before), "ms": seconds * 1000,
                                  "rss_mib": rss_mib() - rss}))
    """
)
VARIANTS = {"lazy (round 3)": ("lazy",), "eager (round 2)": EAGER}


def _run(step: tuple[str, ...], pycache: str) -> dict[str, float]:
    # Bytecode cached as an installed package has it (pip compiles on install), in a private folder.
    env = {k: v for k, v in os.environ.items() if not k.startswith("OMNI_DEPLOY_SPK_")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = pycache
    done = subprocess.run(
        [sys.executable, "-c", PROCESS, *step],
        capture_output=True, text=True, check=True, env={**env, "VLLM_PLUGINS": "vllm_omni_register_models"},
    )  # fmt: skip
    line = next(x for x in done.stdout.splitlines() if x.startswith("RESULT "))
    result: dict[str, float] = json.loads(line[len("RESULT ") :])
    return result


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--record", help="write the results here as JSON")
    args = parser.parse_args()
    rows: dict[str, dict[str, float]] = {}
    pycache = tempfile.mkdtemp(prefix="plugin-register-pycache-")
    for name, step in VARIANTS.items():
        _run(step, pycache)  # writes the bytecode cache; not counted
        runs = [_run(step, pycache) for _ in range(args.runs)]
        rows[name] = {key: statistics.median(r[key] for r in runs) for key in ("modules", "ms", "rss_mib")}
    print(f"{'plugin step':20} {'modules':>8} {'ms':>8} {'RSS MiB':>8}")
    for name, row in rows.items():
        print(f"{name:20} {row['modules']:8.0f} {row['ms']:8.1f} {row['rss_mib']:8.1f}")
    if args.record:
        record = {
            "benchmark": "plugin_register",
            "command": f"python benchmarks/plugin_register.py --runs {args.runs}",
            "host": platform.node(),
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "load_average": os.getloadavg(),
            "runs": args.runs,
            "rows": rows,
        }
        Path(args.record).write_text(json.dumps(record, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
