"""HTTP probes of a server: GET with a bounded body, the URL to reach a bound address from this
machine, and the models /v1/models lists. Probes of a loopback address never go through a proxy
(http_proxy would answer for a server that is not there).

Stdlib only: serve's Supervisor and bench's server starts both use it.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request

MAX_PROBE_BODY = 1024 * 1024  # bytes of an HTTP answer read


def _loopback(host: str | None) -> bool:
    if not host:
        return False
    if host == "localhost" or host.endswith(".localhost"):
        return True
    import ipaddress

    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def probe_url(url: str, timeout: float = 2.0) -> tuple[int | None, bytes]:
    """(status, body) of a GET; (None, b"") when nothing answered. A loopback address is asked
    directly, never through http_proxy/HTTP_PROXY; the body is read up to MAX_PROBE_BODY."""
    try:
        host = urllib.parse.urlsplit(url).hostname
    except ValueError:
        return None, b""
    opener = _DIRECT if _loopback(host) else urllib.request.build_opener()
    try:
        with opener.open(url, timeout=timeout) as response:
            return response.status, response.read(MAX_PROBE_BODY)
    except urllib.error.HTTPError as exc:
        return exc.code, b""
    except (urllib.error.URLError, OSError, ValueError):
        return None, b""


def local_url(host: str, port: int) -> str:
    """Where to reach a server bound to `host` from this machine."""
    if host in ("", "0.0.0.0"):
        host = "127.0.0.1"
    elif host == "::":
        host = "::1"
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{port}"


def served_models(base_url: str) -> list[str] | None:
    """The model ids /v1/models lists; None when it does not answer with a model list."""
    status, body = probe_url(f"{base_url}/v1/models")
    if status != 200:
        return None
    try:
        data = json.loads(body)
        return [str(m["id"]) for m in data["data"] if isinstance(m, dict) and "id" in m][:100]
    except (ValueError, KeyError, TypeError, RecursionError):
        return None
