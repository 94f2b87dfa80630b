"""A stand-in for one vllm server process under the pod's PID 1 script (not vllm): it records that it
started and what signal it got into a directory, and then exits the way it was told.

    standin_server.py DIR NAME [--exit-after S --code N] [--term-delay S]

On SIGTERM it writes DIR/NAME.term, takes --term-delay seconds to shut down (a server draining),
writes DIR/NAME.done and exits 0. With --exit-after it ends by itself with --code.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from pathlib import Path


def mark(path: Path, text: str = "") -> None:
    """Written whole, then renamed: a test that sees the file sees its content."""
    part = path.with_name(path.name + ".part")
    part.write_text(text)
    os.replace(part, path)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("dir", type=Path)
    parser.add_argument("name")
    parser.add_argument("--exit-after", type=float, default=None)
    parser.add_argument("--code", type=int, default=0)
    parser.add_argument("--term-delay", type=float, default=0.0)
    args = parser.parse_args()
    out: Path = args.dir

    def on_term(signum: int, frame: object) -> None:
        mark(out / f"{args.name}.term", str(signum))
        time.sleep(args.term_delay)
        mark(out / f"{args.name}.done")
        sys.exit(0)

    signal.signal(signal.SIGTERM, on_term)
    mark(out / f"{args.name}.up", str(os.getpid()))
    deadline = time.monotonic() + (args.exit_after if args.exit_after is not None else 120)
    while time.monotonic() < deadline:
        time.sleep(0.02)
    return args.code if args.exit_after is not None else 9


if __name__ == "__main__":
    sys.exit(main())
