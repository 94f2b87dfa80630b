"""What a pod's container runs: its vllm processes under a PID 1 that stops them, and the probe of a
pod that serves no HTTP.

One process is `exec`ed: vllm is PID 1 and gets the kubelet's SIGTERM itself. Several (the stages
of one node) run under a bash script as PID 1. The kernel delivers to PID 1 only the signals it
has a handler for, so without a trap the kubelet's SIGTERM does nothing and the servers are killed
after the grace period. The script traps TERM and INT, forwards TERM to every server, and waits for
all of them; when one server ends on its own, the others are stopped the same way, so a node's
stages live and die together. The exit status is the first server's (143 after a SIGTERM).

Kubernetes expands `$(VAR)` in a container's command (the master address); nothing here may
contain another `$(` or a `$$`, which Kubernetes would change.
"""

from __future__ import annotations

import shlex

STOP = 'kill -TERM "${pids[@]}" 2>/dev/null'


def supervisor_script(processes: list[list[str]]) -> str:
    if len(processes) == 1:
        return "exec " + shlex.join(processes[0])
    lines = ["pids=()", f"trap '{STOP}' TERM INT"]
    for argv in processes:
        lines += [shlex.join(argv) + " &", 'pids+=("$!")']
    lines += [
        "wait -n",  # the first server to end, or a trapped signal
        "status=$?",
        STOP,
        "until wait; do :; done",  # `wait` returns above 128 when a signal interrupts it
        'exit "$status"',
    ]
    return "\n".join(lines)


def container_command(processes: list[list[str]]) -> list[str]:
    return processes[0] if len(processes) == 1 else ["bash", "-c", supervisor_script(processes)]


# A headless stage serves no HTTP; it counts as up when its master answers /health, which vllm-omni
# does only once every stage has registered. No proxy: http_proxy in the pod must not carry it.
PROBE_CODE = """\
import os, sys, urllib.request
url = "http://%s:%s/health" % (os.path.expandvars(sys.argv[1]), sys.argv[2])
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
try:
    opener.open(url, timeout=float(sys.argv[3])).close()
except Exception as error:
    sys.exit("%s: %s" % (url, error))
"""


def master_health_command(master: str, port: int, timeout_s: int) -> list[str]:
    """An exec probe: exit 0 when the master at `master` ($VAR expanded in the pod) is healthy."""
    return ["python3", "-c", PROBE_CODE, master, str(port), str(timeout_s)]
