"""How fast `omni-deploy validate` answers, cold, against yamllint on the same file.

    python benchmarks/cli_startup.py [--runs 15] [--yamllint PATH] [--record docs/benchmarks/cli-startup.json]

Measures whole processes, in pairs that alternate (omni-deploy, yamllint, omni-deploy, ...), so
that a machine whose speed drifts slows both sides of a pair alike; the ratio is the median of
the pairs' ratios. Targets (issue 23): `omni-deploy validate deploy/turn-bench.yaml` at most 2x
`yamllint deploy/turn-bench.yaml` in the same run, and all of vllm-omni 0.30.0's deploy files in
one call in at most 2 s. yamllint is not a dependency of omni-deploy: install it anywhere
(`pip install yamllint`, e.g. into a throwaway virtualenv) and pass its path with --yamllint, or
have it on PATH. yamllint reads one file against its style rules; omni-deploy also reads the
file's base_config and runs every check, so the ratio compares what a user waits for, not work.

Bytecode is compiled first (`compileall`), as `pip install` does: an editable checkout run with
PYTHONDONTWRITEBYTECODE=1 would otherwise compile every module on every start.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
FILE = "deploy/turn-bench.yaml"
TARGET_RATIO = 2.0
TARGET_ALL_FILES_MS = 2000.0


def _once_ms(argv: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return (time.perf_counter() - start) * 1000


def _paired(ours: list[str], theirs: list[str], runs: int) -> tuple[list[float], list[float]]:
    _once_ms(ours), _once_ms(theirs)  # warm the file cache for both
    a, b = [], []
    for _ in range(runs):
        a.append(_once_ms(ours))
        b.append(_once_ms(theirs))
    return a, b


def _yamllint(given: str | None) -> str | None:
    if given:
        return given
    return shutil.which("yamllint")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--yamllint", help="the yamllint executable (default: the one on PATH)")
    parser.add_argument("--record", help="write the results here as JSON")
    args = parser.parse_args()
    from tests.support import upstream

    compileall.compile_dir(ROOT / "omni_deploy", quiet=1)
    exe = shutil.which("omni-deploy") or str(Path(sys.executable).parent / "omni-deploy")
    ours = [exe, "validate", FILE]
    rows: dict[str, float] = {}
    ratio = None
    linter = _yamllint(args.yamllint)
    if linter is None or not Path(linter).exists():
        print("yamllint not found: `pip install yamllint` (any environment) and pass --yamllint PATH")
        rows[f"omni-deploy validate {FILE}"] = statistics.median(_once_ms(ours) for _ in range(args.runs))
    else:
        a, b = _paired(ours, [linter, FILE], args.runs)
        rows[f"omni-deploy validate {FILE}"] = statistics.median(a)
        rows[f"yamllint {FILE}"] = statistics.median(b)
        ratio = statistics.median(x / y for x, y in zip(a, b, strict=True))
    files = [str(p) for p in upstream.deploy_files()]
    every = [exe, "validate", "--target-version", "0.30.0", *files]
    rows[f"omni-deploy validate, {len(files)} upstream files in one call"] = statistics.median(
        _once_ms(every) for _ in range(max(3, args.runs // 3))
    )
    print(f"{'measurement (median of whole processes)':<60} {'ms':>8}")
    for name, value in rows.items():
        print(f"{name:<60} {value:>8.1f}")
    all_files = rows[f"omni-deploy validate, {len(files)} upstream files in one call"]
    print(f"all upstream files: {all_files:.0f} ms (target {TARGET_ALL_FILES_MS:.0f} ms)")
    if ratio is not None:
        verdict = "met" if ratio <= TARGET_RATIO else "MISSED"
        print(
            f"ratio omni-deploy / yamllint, median of {args.runs} pairs: {ratio:.2f} (target {TARGET_RATIO}: {verdict})"
        )
    if args.record:
        record = {
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "python": platform.python_version(),
            "machine": f"{platform.machine()}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}",
            "command": " ".join(["python", "benchmarks/cli_startup.py", *sys.argv[1:]]),
            "median_ms": rows,
            "ratio_vs_yamllint": ratio,
        }
        Path(args.record).write_text(json.dumps(record, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
