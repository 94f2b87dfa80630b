"""How fast `omni-deploy validate` answers, cold, against the targets of the validate issue.

    python benchmarks/cli_startup.py [--runs 15] [--record docs/benchmarks/cli-startup.json]

Measures, each as the median of --runs fresh processes: `omni-deploy validate deploy/turn-bench.yaml`
(target: at most 250 ms), all 110 vllm-omni 0.30.0 deploy files in one call (target: at most
2 s), and `check-jsonschema --schemafile schemas/deploy.schema.json deploy/turn-bench.yaml` in the
same run, for the ratio. check-jsonschema checks the schema only (no base_config, no semantic
checks), so the ratio compares start-up and parsing, not work done.
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _median_ms(argv: list[str], runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--record", help="write the results here as JSON")
    args = parser.parse_args()
    from tests.support import upstream

    exe = shutil.which("omni-deploy") or str(Path(sys.executable).parent / "omni-deploy")
    files = [str(p) for p in upstream.deploy_files()]
    rows = {
        "validate turn-bench.yaml (cold)": (
            _median_ms([exe, "validate", "deploy/turn-bench.yaml"], args.runs),
            250.0,
        ),
        f"validate {len(files)} upstream files, one call": (
            _median_ms([exe, "validate", "--target-version", "0.30.0", *files], max(3, args.runs // 3)),
            2000.0,
        ),
    }
    checker = shutil.which("check-jsonschema") or str(Path(sys.executable).parent / "check-jsonschema")
    if Path(checker).exists():
        rows["check-jsonschema turn-bench.yaml (schema only)"] = (
            _median_ms(
                [checker, "--schemafile", "schemas/deploy.schema.json", "deploy/turn-bench.yaml"], args.runs
            ),
            float("nan"),
        )
    print(f"{'measurement':<52} {'median ms':>10} {'target ms':>10}")
    for name, (value, target) in rows.items():
        mark = "" if target != target else ("  met" if value <= target else "  MISSED")
        print(f"{name:<52} {value:>10.1f} {target:>10.0f}{mark}")
    ours = rows["validate turn-bench.yaml (cold)"][0]
    theirs = rows.get("check-jsonschema turn-bench.yaml (schema only)", (float("nan"),))[0]
    print(f"ratio omni-deploy / check-jsonschema on the same file: {ours / theirs:.2f}")
    if args.record:
        record = {
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "python": platform.python_version(),
            "machine": f"{platform.machine()}, {__import__('os').cpu_count()} cores",
            "command": " ".join(["python", "benchmarks/cli_startup.py", *sys.argv[1:]]),
            "median_ms": {name: value for name, (value, _) in rows.items()},
            "ratio_vs_check_jsonschema": ours / theirs,
        }
        Path(args.record).write_text(json.dumps(record, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
