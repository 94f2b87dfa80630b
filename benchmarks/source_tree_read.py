"""How long `validate --vllm-omni-source TREE` spends reading a vllm-omni source tree, first and later.

    python benchmarks/source_tree_read.py [--tree .cache/vllm_omni-0.32.0rc1] [--runs 3]
                                          [--record docs/benchmarks/source-tree-read.json]

Targets (issue 39): the first read of a tree (nothing cached under ~/.cache/omni-deploy) at most
20 s on 2 cores; later runs at most 2 s of reading for the tree's 141 bundled files. Each figure is
a whole process: `read` reads the tree's knowledge once (keys, facts, stage schema) in a fresh
interpreter, cold (an empty cache folder) or warm (the cache the cold run wrote); `validate` runs
the CLI on the tree's own deploy/ folder with --vllm-omni-source against the same CLI with the
committed knowledge of that release, so their difference is what reading the tree costs.
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
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET_FIRST_S = 20.0
TARGET_LATER_S = 2.0
READ = "from pathlib import Path; import sys; from omni_deploy.knowledge.target import installed_reads; "
READ += "installed_reads('main', Path(sys.argv[1]))"


def _seconds(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tree", type=Path, default=ROOT / ".cache" / "vllm_omni-0.32.0rc1")
    parser.add_argument("--release", default="0.32.0rc1", help="the release whose knowledge is committed")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--record", help="write the results here as JSON")
    args = parser.parse_args()
    tree = args.tree.resolve()
    files = sorted((tree / "vllm_omni" / "deploy").glob("*.yaml"))
    rows: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as home:
        env = {**os.environ, "XDG_CACHE_HOME": home, "PYTHONPATH": str(ROOT)}
        cold = []
        for _ in range(args.runs):
            for cached in Path(home).glob("omni-deploy/*"):
                cached.unlink()
            cold.append(_seconds([sys.executable, "-c", READ, str(tree)], env))
        rows["read the tree, first time (cold cache)"] = statistics.median(cold)
        rows["read the tree, later (warm cache)"] = statistics.median(
            _seconds([sys.executable, "-c", READ, str(tree)], env) for _ in range(args.runs)
        )
        cli = [sys.executable, "-m", "omni_deploy", "validate", "--exit-zero", "-q"]
        rows[f"validate {len(files)} files, --vllm-omni-source (warm)"] = statistics.median(
            _seconds(
                [*cli, "--target-version", "main", "--vllm-omni-source", str(tree), *map(str, files)], env
            )
            for _ in range(args.runs)
        )
        rows[f"validate {len(files)} files, --target-version {args.release} (committed)"] = statistics.median(
            _seconds([*cli, "--target-version", args.release, *map(str, files)], env)
            for _ in range(args.runs)
        )
    names = list(rows)
    overhead = rows[names[2]] - rows[names[3]]
    width = max(map(len, names)) + 2
    print(f"{'what':<{width}}seconds")
    for name, value in rows.items():
        print(f"{name:<{width}}{value:.2f}")
    print(f"{'reading overhead of the 141-file run':<{width}}{overhead:.2f}")
    print(f"targets: first read <= {TARGET_FIRST_S:.0f} s, later reading <= {TARGET_LATER_S:.0f} s")
    if args.record:
        record = {
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "python": platform.python_version(),
            "machine": f"{platform.machine()}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}",
            "command": "python " + " ".join(sys.argv),
            "tree": str(tree),
            "median_s": rows,
            "reading_overhead_s": overhead,
        }
        Path(args.record).write_text(json.dumps(record, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
