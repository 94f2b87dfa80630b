"""Run one hostile case (a row of a data file under tests/hostile/cases/) as a real omni-deploy process.

A case builds a scratch folder (files, FIFOs, symlinks, sparse files, deep trees, hostile ONNX
files), runs `python -m omni_deploy ARGS` there under a wall-clock limit and an address-space
limit, optionally signals it, and then checks what every case must hold whatever it tries:

- it ended within its limit (no hang) and was not killed for memory (no unbounded growth);
- exit code as the row says (never 3, the internal-error code), no Python traceback;
- the canary secret (an environment variable with a secret-looking name, and anything the row
  names as its secret) appears nowhere: not on stdout or stderr, not in any file it wrote;
- files the row marks `keep` are byte-for-byte and mode-for-mode what they were, still regular;
- no process it started is alive afterwards (every child inherits a per-case marker variable);
- the row's own expectations: text it must say (a clear message) and must not, checks on stdout.

The row format is documented in tests/hostile/README.md.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import resource
import shutil
import signal
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
# The omni-deploy code the cases run (default: this checkout). Pointing it at another checkout
# runs the same cases against that code, e.g. main before a fix: OMNI_HOSTILE_CODE=/path/to/main.
CODE = Path(os.environ.get("OMNI_HOSTILE_CODE") or ROOT)
CASES = Path(__file__).resolve().parent / "cases"
STANDIN_BIN = ROOT / "tests" / "support" / "standin_bin"
SECRET = "hf_HostileCanary7Q3xZ9"  # HF_TOKEN of every case; must never be printed or written
CASE_MARKER = "OMNI_HOSTILE_CASE"
# Written by the stand-in server itself, which is given the secrets on purpose (the server needs them).
SERVER_FILES = {"standin.json", "standin.json.tmp"}
READ_CAP = 8 * 1024 * 1024  # of each output stream, for the row's text checks
_KNOWN_KEYS = {
    "id", "why", "setup", "prepare", "mutate", "run", "stdin", "env", "unset", "serve_env", "exit",
    "says", "never_says", "limit", "memory_mib", "signal", "parallel", "checks", "absent", "secret",
    "needs", "helpers", "stdout", "cwd",
}  # fmt: skip


@dataclass
class Case:
    group: str  # the data file's stem: the class of hostile input
    row: dict[str, Any]

    @property
    def id(self) -> str:
        return f"{self.group}/{self.row['id']}"


def load_cases() -> list[Case]:
    cases = []
    for path in sorted(CASES.glob("*.yaml")):
        for row in yaml.safe_load(path.read_text(encoding="utf-8")) or []:
            unknown = set(row) - _KNOWN_KEYS
            assert not unknown, f"{path.name}: {row.get('id')}: unknown keys {sorted(unknown)}"
            assert row.get("why"), f"{path.name}: {row.get('id')}: every case says what it tries (why)"
            assert row.get("says") or row.get("checks") or row.get("absent"), (
                f"{path.name}: {row['id']}: a case asserts something beyond the exit code"
            )
            cases.append(Case(path.stem, row))
    ids = [c.id for c in cases]
    assert len(ids) == len(set(ids)), "case ids repeat"
    return cases


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Scratch:
    """The case's folder and the values its strings may name."""

    tmp: Path
    secret: str
    port: int = field(default_factory=free_port)
    port2: int = field(default_factory=free_port)
    written: set[Path] = field(default_factory=set)  # files the setup made (not scanned for secrets)
    kept: dict[Path, tuple[bytes, int, int, int]] = field(default_factory=dict)  # bytes, mode, uid, gid

    def fill(self, text: str) -> str:
        for name, value in (
            ("{tmp}", str(self.tmp)),
            ("{root}", str(ROOT)),
            ("{port2}", str(self.port2)),
            ("{port}", str(self.port)),
            ("{secret}", self.secret),
            ("{python}", sys.executable),
        ):
            text = text.replace(name, value)
        return text

    def word(self, arg: Any) -> str:
        """One command-line word: a string (placeholders filled) or {py: EXPR} for a generated one."""
        if isinstance(arg, dict):
            return self.content(arg).decode("utf-8", "surrogateescape")
        return self.fill(str(arg))

    def path(self, text: Any) -> Path:
        filled = self.word(text)
        return Path(filled) if filled.startswith("/") else self.tmp / filled

    def content(self, entry: dict[str, Any]) -> bytes:
        if "py" in entry:
            value = eval(entry["py"], {"__builtins__": {}, **_HELPERS, "secret": self.secret})
        else:
            value = self.fill(entry.get("text", ""))
        return value.encode("utf-8", "surrogatepass") if isinstance(value, str) else value


def _nest(open_: str, close: str, depth: int, inner: str = "") -> str:
    return open_ * depth + inner + close * depth


def _block(depth: int, leaf: str = "x: 1") -> str:
    return "".join("  " * i + f"k{i}:\n" for i in range(depth)) + "  " * depth + leaf + "\n"


_HELPERS: dict[str, Any] = {
    "nest": _nest, "block": _block, "str": str, "range": range, "len": len, "bytes": bytes,
}  # fmt: skip


def build(scratch: Scratch, entries: list[dict[str, Any]]) -> None:
    for entry in entries:
        _build_one(scratch, entry)


def _build_many(scratch: Scratch, entry: dict[str, Any]) -> None:
    """`count` files in one folder, named by `name` with {i}."""
    folder = scratch.path(entry["many"])
    folder.mkdir(parents=True, exist_ok=True)
    data = scratch.content(entry)
    for i in range(int(entry["count"])):
        (folder / entry.get("name", "f{i}.yaml").replace("{i}", str(i))).write_bytes(data)


def _build_deep(scratch: Scratch, entry: dict[str, Any]) -> None:
    """A folder `depth` levels deep, iteratively (a recursive mkdir is what breaks)."""
    current = scratch.path(entry["deep"])
    current.mkdir(parents=True, exist_ok=True)
    fd = os.open(current, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(int(entry["depth"])):
            os.mkdir("d", dir_fd=fd)
            inner = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = inner
        leaf = os.open(entry.get("leaf", "x.yaml"), os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
        os.write(leaf, scratch.content(entry))
        os.close(leaf)
    finally:
        os.close(fd)


def _mode(path: Path, entry: dict[str, Any]) -> None:
    if "mode" in entry:
        path.chmod(int(str(entry["mode"]), 8))


def _build_file(scratch: Scratch, path: Path, entry: dict[str, Any]) -> None:
    path.write_bytes(scratch.content(entry))
    _mode(path, entry)
    if "owner" in entry:  # another user's file (the case needs root: `needs: root`): uid or uid:gid
        uid, _, gid = str(entry["owner"]).partition(":")
        os.chown(path, int(uid), int(gid or uid))


def _build_symlink(scratch: Scratch, path: Path, entry: dict[str, Any]) -> None:
    os.symlink(scratch.fill(entry["to"]), path)
    if "owner" in entry:  # a link another user planted (the case needs root: `needs: root`)
        os.lchown(path, int(entry["owner"]), int(entry["owner"]))


def _build_fifo(scratch: Scratch, path: Path, entry: dict[str, Any]) -> None:
    os.mkfifo(path)
    _mode(path, entry)


def _build_sparse(scratch: Scratch, path: Path, entry: dict[str, Any]) -> None:
    with open(path, "wb") as handle:
        handle.truncate(int(entry["size"]))


def _build_onnx(scratch: Scratch, path: Path, entry: dict[str, Any]) -> None:
    from tests.hostile.onnx_cases import write_onnx

    write_onnx(path, entry["kind"], scratch)


_BUILDERS: dict[str, Callable[[Scratch, Path, dict[str, Any]], None]] = {
    "file": _build_file,
    "fifo": _build_fifo,
    "symlink": lambda scratch, path, entry: _build_symlink(scratch, path, entry),
    "sparse": _build_sparse,
    "onnx": _build_onnx,
    "copy": lambda scratch, path, entry: path.write_bytes(scratch.path(entry["from"]).read_bytes()),
    "copy_tree": lambda scratch, path, entry: shutil.copytree(scratch.path(entry["from"]), path),
}


def _build_one(scratch: Scratch, entry: dict[str, Any]) -> None:
    if "dir" in entry:
        scratch.path(entry["dir"]).mkdir(parents=True, exist_ok=True)
        return
    if "many" in entry:
        _build_many(scratch, entry)
        return
    if "deep" in entry:
        _build_deep(scratch, entry)
        return
    key = next(k for k in _BUILDERS if k in entry)
    path = scratch.path(entry[key])
    path.parent.mkdir(parents=True, exist_ok=True)
    _BUILDERS[key](scratch, path, entry)
    if key != "symlink":
        scratch.written.add(path)
    if entry.get("keep"):
        info = os.lstat(path)
        content = path.read_bytes() if stat.S_ISREG(info.st_mode) else b""
        scratch.kept[path] = (content, info.st_mode, info.st_uid, info.st_gid)


def remove_tree(root: Path) -> None:
    """Remove a folder tree bottom-up, iteratively: pytest's own clean-up (shutil.rmtree) recurses
    per level and fails on the 1,100-level trees these cases build, for every later session."""
    stack, order = [str(root)], []
    while stack:
        folder = stack.pop()
        order.append(folder)
        with contextlib.suppress(OSError), os.scandir(folder) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
                else:
                    with contextlib.suppress(OSError):
                        os.unlink(entry.path)
    for folder in reversed(order):
        with contextlib.suppress(OSError):
            os.rmdir(folder)


def mutate(scratch: Scratch, entries: list[dict[str, Any]]) -> None:
    """After `prepare`: replace what a glob finds (a corrupt or FIFO cache file, say)."""
    for entry in entries:
        matches = sorted(scratch.tmp.glob(scratch.fill(entry["glob"])))
        assert matches, f"mutate: nothing matches {entry['glob']}"
        for path in matches:
            path.unlink()
            if "fifo" in entry:
                os.mkfifo(path)
            else:
                path.write_bytes(scratch.content(entry))


def environment(scratch: Scratch, row: dict[str, Any], marker: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(CODE)
    env["XDG_CACHE_HOME"] = str(scratch.tmp / "cache")
    env["HOME"] = str(scratch.tmp / "home")
    env["HF_TOKEN"] = SECRET
    env["NO_COLOR"] = "1"
    env.pop("OMNI_DEPLOY_DEBUG", None)
    env[CASE_MARKER] = marker
    if row.get("serve_env"):
        from tests.serve.conftest import fake_dist_info

        site = scratch.tmp / "site"
        if not site.exists():
            fake_dist_info(site, {"vllm": "0.30.0", "vllm-omni": "0.30.0"})
        env["PATH"] = os.pathsep.join((str(STANDIN_BIN), str(Path(sys.executable).parent), env["PATH"]))
        env["PYTHONPATH"] = os.pathsep.join((str(CODE), str(site)))
        env["STANDIN_VLLM_RECORD"] = str(scratch.tmp / "standin.json")
        env.pop("MINICPMO_TOKEN2WAV_TRT", None)
    for name in row.get("unset", []):
        env.pop(name, None)
    for name, value in (row.get("env") or {}).items():
        env[name] = scratch.word(value)  # a string (placeholders filled) or {py: EXPR}
    return env


def _limits(memory_mib: int, remove_cwd: bool = False, close_stdout: bool = False) -> Any:
    def apply() -> None:
        size = memory_mib * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (size, size))
        if close_stdout:  # `stdout: closed`: no fd 1 at all (as a shell's `>&-` leaves it)
            os.close(1)
        if remove_cwd:  # `cwd: {path: ..., removed: true}`: started in a folder deleted under it
            os.rmdir(os.getcwd())

    return apply


def _stdout(spec: str | None, path: Path) -> tuple[Any, Any]:
    """What the case's stdout is: a file (default), closed (`closed`), or a pipe whose reader
    has gone (`broken`); and the file the checks read (empty for the last two)."""
    if spec is None:
        return open(path, "wb"), None
    path.write_bytes(b"")
    if spec == "closed":
        return subprocess.DEVNULL, None
    if spec == "broken":
        read_end, write_end = os.pipe()
        os.close(read_end)
        return write_end, write_end
    raise AssertionError(f"unknown stdout {spec!r}")


@dataclass
class Outcome:
    code: int | None  # None: still running at the limit (then killed)
    out: str
    err: str
    seconds: float
    out_path: Path
    err_path: Path


def _read_capped(path: Path) -> str:
    with open(path, "rb") as handle:
        data = handle.read(READ_CAP)
    return data.decode("utf-8", "replace")


def run(scratch: Scratch, row: dict[str, Any], env: dict[str, str], index: int = 0) -> tuple[Any, Path, Path]:
    argv = [sys.executable, "-m", "omni_deploy", *(scratch.word(a) for a in row["run"])]
    stdin_spec = row.get("stdin")
    if isinstance(stdin_spec, dict):
        stdin_path = scratch.tmp / f".stdin{index}"
        stdin_path.write_bytes(scratch.content(stdin_spec))
    else:
        stdin_path = Path(scratch.fill(stdin_spec)) if stdin_spec else Path(os.devnull)
    out_path, err_path = scratch.tmp / f".stdout{index}", scratch.tmp / f".stderr{index}"
    out, pipe_end = _stdout(row.get("stdout"), out_path)
    cwd_spec = row.get("cwd") or {}
    cwd = scratch.path(cwd_spec["path"]) if cwd_spec else scratch.tmp
    cwd.mkdir(parents=True, exist_ok=True)
    try:
        with open(stdin_path, "rb") as stdin, open(err_path, "wb") as err:
            proc = subprocess.Popen(
                argv,
                cwd=cwd,
                env=env,
                stdin=stdin,
                stdout=out,
                stderr=err,
                start_new_session=True,  # the case's processes are one group we can always kill
                preexec_fn=_limits(
                    int(row.get("memory_mib", 1024)),
                    bool(cwd_spec.get("removed")),
                    row.get("stdout") == "closed",
                ),
            )
    finally:
        if pipe_end is not None:
            os.close(pipe_end)
        elif out is not None and out != subprocess.DEVNULL:
            out.close()
    return proc, out_path, err_path


def wait(proc: Any, out_path: Path, err_path: Path, row: dict[str, Any], started: float) -> Outcome:
    limit = float(row.get("limit", 30))
    deadline = started + limit
    action = row.get("signal")
    if action:
        while time.monotonic() < deadline and proc.poll() is None:
            said = "after" in action and action["after"] in _read_capped(out_path) + _read_capped(err_path)
            if said or ("after_file" in action and (out_path.parent / action["after_file"]).exists()):
                time.sleep(float(action.get("delay", 0)))
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, getattr(signal, f"SIG{action['send']}"))
                break
            time.sleep(0.05)
    try:
        code = proc.wait(timeout=max(0.1, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        code = None
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    return Outcome(
        code, _read_capped(out_path), _read_capped(err_path), time.monotonic() - started, out_path, err_path
    )


def start_helpers(scratch: Scratch, row: dict[str, Any]) -> list[subprocess.Popen[bytes]]:
    """Processes the case needs beside omni-deploy (a proxy that answers everything); they carry
    no case marker and are stopped by the test, whatever happens."""
    helpers = []
    for argv in row.get("helpers") or []:
        helpers.append(
            subprocess.Popen(
                [scratch.fill(str(a)) for a in argv],
                cwd=scratch.tmp,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
        )
    if helpers:
        time.sleep(1.0)  # let them bind
    return helpers


def stop_helpers(helpers: list[subprocess.Popen[bytes]]) -> None:
    for proc in helpers:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def survivors(marker: str) -> list[tuple[int, str]]:
    needle = f"{CASE_MARKER}={marker}".encode()
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            environ = (proc / "environ").read_bytes()
            state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if needle in environ.split(b"\0") and state not in ("Z", "X"):
            with contextlib.suppress(OSError):
                command = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
                found.append((int(proc.name), command.strip()[:160]))
    return found


def wait_for_no_survivors(marker: str, settle: float) -> list[tuple[int, str]]:
    deadline = time.monotonic() + settle
    found = survivors(marker)
    while found and time.monotonic() < deadline:
        time.sleep(0.1)
        found = survivors(marker)
    for pid, _ in found:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    return found


def files_below(root: Path) -> list[Path]:
    """Regular files below `root`, iteratively (cases build trees deeper than the recursion limit)."""
    found, stack = [], [root]
    while stack:
        folder = stack.pop()
        with contextlib.suppress(OSError), os.scandir(folder) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(Path(entry.path))
                elif entry.is_file(follow_symlinks=False):
                    found.append(Path(entry.path))
    return found


def contains(path: Path, needle: bytes, cap: int = 256 * 1024 * 1024) -> bool:
    """Whether `needle` occurs in the file's first `cap` bytes, read in pieces."""
    overlap = len(needle) - 1
    tail = b""
    seen = 0
    with contextlib.suppress(OSError), open(path, "rb") as handle:
        while seen < cap:
            chunk = handle.read(1 << 20)
            if not chunk:
                break
            seen += len(chunk)
            if needle in tail + chunk:
                return True
            tail = chunk[-overlap:] if overlap else b""
    return False


_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _xml(arg: Any, outcome: Outcome) -> str | None:
    from xml.etree import ElementTree

    try:
        ElementTree.fromstring(
            outcome.out.split("\n", 1)[1] if outcome.out.startswith("<?xml") else outcome.out
        )
    except ElementTree.ParseError as exc:
        return f"stdout is not well-formed XML: {exc}"
    if re.search("[\x00-\x08\x0b\x0c\x0e-\x1f]", outcome.out):
        return "stdout holds characters XML 1.0 does not allow"
    return None


def _json(arg: Any, outcome: Outcome) -> str | None:
    try:
        json.loads(outcome.out, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
    except ValueError as exc:
        return f"stdout is not strict JSON: {exc}"
    return None


def _no_control(arg: Any, outcome: Outcome) -> str | None:
    """Nothing a terminal would act on, in either stream."""
    for stream, text in (("stdout", outcome.out), ("stderr", outcome.err)):
        match = _CONTROL.search(text)
        if match:
            start = max(0, match.start() - 40)
            return f"{stream} holds control character {match.group()!r}: {text[start : match.end() + 40]!r}"
    return None


def _no_workflow_commands(arg: Any, outcome: Outcome) -> str | None:
    """No line a GitHub Actions log would run as a command."""
    for stream, text in (("stdout", outcome.out), ("stderr", outcome.err)):
        for line in text.splitlines():
            if line.strip().startswith("::"):
                return f"{stream} has a line GitHub Actions reads as a command: {line[:120]!r}"
    return None


def _workflow_commands(arg: Any, outcome: Outcome) -> str | None:
    """Exactly `arg` command lines, every one ours."""
    lines = [line for line in outcome.out.splitlines() if line.strip().startswith("::")]
    if len(lines) != int(str(arg)):
        return f"expected {arg} workflow command line(s), got {len(lines)}: {lines[:4]}"
    return None


def _yaml_top_keys_exclude(arg: Any, outcome: Outcome) -> str | None:
    """stdout is YAML whose top-level mappings lack these keys."""
    for document in yaml.safe_load_all(outcome.out):
        if isinstance(document, dict):
            bad = set(map(str, document)) & set(arg or [])
            if bad:
                return f"stdout YAML gained top-level key(s) {sorted(bad)}"
    return None


def _file_yaml_top_keys_exclude(arg: Any, outcome: Outcome) -> str | None:
    """A file the case wrote is YAML without these keys."""
    path = outcome.out_path.parent / arg["path"]
    document = yaml.safe_load(path.read_text(encoding="utf-8"))
    bad = set(map(str, document or {})) & set(arg["keys"])
    return f"{arg['path']} gained top-level key(s) {sorted(bad)}" if bad else None


def _configmap_deploy_keys_exclude_evil(arg: Any, outcome: Outcome) -> str | None:
    """k8s: the ConfigMap's deploy file is clean."""
    for document in yaml.safe_load_all(outcome.out):
        if isinstance(document, dict) and document.get("kind") == "ConfigMap":
            loaded = yaml.safe_load((document.get("data") or {}).get("deploy.yaml", ""))
            if isinstance(loaded, dict) and "evil" in loaded:
                return "the ConfigMap's deploy file gained the top-level key 'evil'"
            return None if loaded else "the ConfigMap holds no deploy.yaml"
    return "no ConfigMap in the output"


def _out_max_bytes(arg: Any, outcome: Outcome) -> str | None:
    size = outcome.out_path.stat().st_size + outcome.err_path.stat().st_size
    return None if size <= int(str(arg)) else f"printed {size} bytes (limit {arg})"


def _stdout_lines_exclude_prefix(arg: Any, outcome: Outcome) -> str | None:
    """No line of stdout starts with `arg` (a value's newline forged a line of its own)."""
    lines = outcome.out_path.read_bytes().decode("utf-8", "replace").splitlines()
    forged = [line for line in lines if line.startswith(str(arg))]
    return f"stdout has a line {forged[0]!r}" if forged else None


def _pid_file_dead(arg: Any, outcome: Outcome) -> str | None:
    """The process whose pid a case's detached grandchild wrote (it dropped the marker variable, so
    the survivor search cannot see it) is gone; killed here if not."""
    path = outcome.out_path.parent / str(arg)
    try:
        pid = int(path.read_text().strip())
    except (OSError, ValueError):
        return f"{arg} was not written (the case did not run as meant)"
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None
    if state in ("Z", "X"):
        return None
    with contextlib.suppress(OSError):
        os.kill(pid, signal.SIGKILL)
    return f"pid {pid} of {arg} outlived the case (killed now)"


def _file_is(arg: Any, outcome: Outcome) -> str | None:
    """A file the case wrote: its exact bytes (`text`, UTF-8, or `py`), and owner (uid:gid) and mode."""
    path = outcome.out_path.parent / arg["path"]
    info = os.lstat(path)
    if "owner" in arg and f"{info.st_uid}:{info.st_gid}" != str(arg["owner"]):
        return f"{arg['path']} is owned by {info.st_uid}:{info.st_gid}, not {arg['owner']}"
    if "mode" in arg and stat.S_IMODE(info.st_mode) != int(str(arg["mode"]), 8):
        return f"{arg['path']} has mode {oct(stat.S_IMODE(info.st_mode))}, not {arg['mode']}"
    want = _expected_bytes(arg)
    if want is not None and path.read_bytes() != want:
        return f"{arg['path']} holds {path.read_bytes()[:300]!r}, not {want[:300]!r}"
    return None


def _stdout_is(arg: Any, outcome: Outcome) -> str | None:
    """stdout's exact bytes (`text` as UTF-8, or `py`)."""
    got, want = outcome.out_path.read_bytes(), _expected_bytes(arg)
    return None if got == want else f"stdout is {got[:300]!r}, not {want[:300]!r}"


def _expected_bytes(arg: dict[str, Any]) -> bytes | None:
    if "py" in arg:
        value = eval(arg["py"], {"__builtins__": {}, **_HELPERS})
        return value.encode("utf-8", "surrogatepass") if isinstance(value, str) else bytes(value)
    if "text" in arg:
        return str(arg["text"]).replace("{root}", str(ROOT)).encode("utf-8", "surrogatepass")
    return None


_CHECKS: dict[str, Callable[[Any, Outcome], str | None]] = {
    "file_is": _file_is,
    "pid_file_dead": _pid_file_dead,
    "stdout_lines_exclude_prefix": _stdout_lines_exclude_prefix,
    "stdout_is": _stdout_is,
    "xml": _xml,
    "json": _json,
    "no_control": _no_control,
    "no_workflow_commands": _no_workflow_commands,
    "workflow_commands": _workflow_commands,
    "yaml_top_keys_exclude": _yaml_top_keys_exclude,
    "file_yaml_top_keys_exclude": _file_yaml_top_keys_exclude,
    "configmap_deploy_keys_exclude_evil": _configmap_deploy_keys_exclude_evil,
    "out_max_bytes": _out_max_bytes,
}


def check_stdout(check: str | dict[str, Any], outcome: Outcome) -> str | None:
    """A named check of what the case printed (a row's `checks`); returns what failed, or None."""
    name, arg = (check, None) if isinstance(check, str) else next(iter(check.items()))
    if name not in _CHECKS:
        raise AssertionError(f"unknown check {name}")
    return _CHECKS[name](arg, outcome)
