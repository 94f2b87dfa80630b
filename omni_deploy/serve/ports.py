"""Is the port free before we launch, and if not, who holds it?

A bind test is the only reliable answer (SO_REUSEADDR as servers set it, so a closed socket in
TIME_WAIT does not count). Who holds it comes from Linux's /proc: the socket inode listening on
the port, then the process whose descriptors include it (only our own user's processes are
visible to us, which is the common case of a forgotten server).
"""

from __future__ import annotations

import contextlib
import errno
import os
import socket
from pathlib import Path

from omni_deploy.common.errors import OmniDeployError
from omni_deploy.common.output.escape import shell_join
from omni_deploy.common.redact import redact_argv

_LISTEN = "0A"


class PortInUse(OmniDeployError):
    """Something already listens on the port the server would bind."""


def _family(host: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in host else socket.AF_INET


def port_is_free(host: str, port: int) -> bool:
    bind_host = host or "0.0.0.0"
    with socket.socket(_family(bind_host), socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((bind_host, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return False
            raise
    return True


def _listening_inodes(port: int) -> set[str]:
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()
                if len(fields) > 9 and fields[3] == _LISTEN and int(fields[1].rsplit(":", 1)[1], 16) == port:
                    inodes.add(fields[9])
    return inodes


def port_holder(port: int) -> str | None:
    """`pid N (command line)` of the process listening on `port`, when /proc tells."""
    inodes = _listening_inodes(port)
    if not inodes:
        return None
    wanted = {f"socket:[{inode}]" for inode in inodes}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            for fd in (proc / "fd").iterdir():
                with contextlib.suppress(OSError):
                    if os.readlink(fd) in wanted:
                        raw = (proc / "cmdline").read_bytes().decode("utf-8", "replace")
                        command = shell_join(redact_argv([a for a in raw.split("\0") if a]))
                        return f"pid {proc.name} ({command[:160]})"
    return None


def check_port_free(host: str, port: int) -> None:
    """Raise PortInUse, naming the holder where /proc tells, when `host:port` cannot be bound."""
    try:
        free = port_is_free(host, port)
    except OSError as exc:
        raise PortInUse(f"cannot bind {host}:{port}: {exc.strerror or exc}") from None
    if free:
        return
    holder = port_holder(port)
    who = f" by {holder}" if holder else " by another process"
    raise PortInUse(
        f"port {port} on {host} is already in use{who}; stop it or choose another --port "
        "(a second server would fail to bind while the first one answers /health)"
    )
