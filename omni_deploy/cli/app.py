"""The `omni-deploy` command line: a thin layer that parses options and calls the core.

Errors are turned into messages and exit codes here and nowhere else (EXIT_CODES, EXIT_HELP):
0 clean, 1 findings or input that cannot be used, 2 usage, 3 internal error, 4 a program we ran
(the server, vllm bench serve) exited with an error, 124 readiness timeout, 130 interrupted.
Command modules are imported lazily so that `validate` and `render` never pay for torch.
"""

from __future__ import annotations

import contextlib
import errno
import importlib
import os
import sys
from typing import Any

import click

from omni_deploy import __version__
from omni_deploy.cli.settings import add_color_option, color_option

# command name -> (module, attribute); each module stays import-light at top level.
COMMANDS: dict[str, tuple[str, str]] = {
    "bench": ("omni_deploy.cli.commands.bench", "bench"),
    "diff": ("omni_deploy.cli.commands.diff", "diff"),
    "explain": ("omni_deploy.cli.commands.explain", "explain"),
    "k8s": ("omni_deploy.cli.commands.k8s", "k8s"),
    "render": ("omni_deploy.cli.commands.render", "render"),
    "rule": ("omni_deploy.cli.commands.rule", "rule"),
    "schema": ("omni_deploy.cli.commands.schema", "schema"),
    "serve": ("omni_deploy.cli.commands.serve", "serve"),
    "validate": ("omni_deploy.cli.commands.validate", "validate"),
    "spk": ("omni_deploy.cli.commands.spk", "spk"),
}

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3
EXIT_PROCESS, EXIT_READY_TIMEOUT, EXIT_INTERRUPTED = 4, 124, 130
BROKEN_PIPE_CODE = 128 + 13  # what a shell reports for a writer killed by SIGPIPE (`yes | head`)

# Every error type -> exit code, matched along the exception's MRO by "module.QualName", so that
# mapping an error of the speaker or bench side imports nothing heavy. Anything else: EXIT_INTERNAL.
EXIT_CODES: dict[str, int] = {
    "omni_deploy.common.errors.ProcessExited": EXIT_PROCESS,
    "omni_deploy.common.errors.ReadinessTimeout": EXIT_READY_TIMEOUT,
    "omni_deploy.common.errors.Interrupted": EXIT_INTERRUPTED,
    "omni_deploy.common.errors.UsageProblem": EXIT_USAGE,
    "omni_deploy.common.patterns.BadPattern": EXIT_USAGE,  # PlanError, K8sOptionError, ProjectSettingsError, ...
    "omni_deploy.common.errors.OmniDeployError": EXIT_FINDINGS,  # ConfigError, RunDirError, PlanError, ...
    "omni_deploy.speaker.onnx_file.SpeakerModelError": EXIT_FINDINGS,
    "omni_deploy.speaker.inputs.AudioError": EXIT_FINDINGS,
    "omni_deploy.bench.results.ResultError": EXIT_FINDINGS,
    "click.exceptions.UsageError": EXIT_USAGE,
    "click.exceptions.ClickException": EXIT_FINDINGS,
    "click.exceptions.Abort": EXIT_INTERRUPTED,
    "builtins.KeyboardInterrupt": EXIT_INTERRUPTED,
}

EXIT_HELP = (
    "Exit codes: 0 clean; 1 findings at error level (or warnings under --strict), a file that cannot "
    "be loaded, or other bad input; 2 usage error; 3 internal error; 4 the server (or vllm bench "
    "serve) exited with an error (its own code is printed, and kept in the run directory's "
    "launch.json); 124 the server was not ready in time; 130 interrupted; 141 stdout was a pipe its "
    "reader closed (`| head`), as for any program SIGPIPE ends."
)
SETTINGS_HELP = (
    "Settings, later wins: the nearest .omni-deploy.yaml or pyproject.toml [tool.omni-deploy] at or "
    "above the working directory (files, exclude, ignore, target-version, strict), then "
    "OMNI_DEPLOY_TARGET_VERSION, OMNI_DEPLOY_STRICT, OMNI_DEPLOY_IGNORE, NO_COLOR and FORCE_COLOR, then "
    "the options (--color before or after the command). Given no FILE, a command takes the project's "
    "deploy files: `files`, else deploy/, else the bundled profile."
)


def exit_code_of(exc: BaseException) -> int:
    for cls in type(exc).__mro__:
        code = EXIT_CODES.get(f"{cls.__module__}.{cls.__qualname__}")
        if code is not None:
            return code
    return EXIT_INTERNAL


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return None
        module, attr = COMMANDS[cmd_name]
        command = getattr(importlib.import_module(module), attr)
        assert isinstance(command, click.Command)
        add_color_option(command)  # --color after the command name works too
        return command

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        name = args[0] if args else ""
        if name and not name.startswith("-") and name not in COMMANDS and not ctx.resilient_parsing:
            import difflib

            close = difflib.get_close_matches(name, list(COMMANDS), n=1, cutoff=0.6)
            hint = f" Did you mean '{close[0]}'?" if close else ""
            ctx.fail(f"No such command '{name}'.{hint}")
        return super().resolve_command(ctx, args)


@click.group(
    cls=LazyGroup,
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog=f"{EXIT_HELP}\n\n{SETTINGS_HELP}",
)
@click.version_option(__version__, prog_name="omni-deploy")
def cli() -> None:
    """Check, explain and launch vllm-omni deploy configs (MiniCPM-o 4.5 speech serving)."""


# Its default resets the mode on every run (tests run many commands in one process).
cli.params.append(color_option(default="auto"))


def main(argv: list[str] | None = None) -> int:
    from omni_deploy.common.redact import scrubbed_output

    closed = _reopen_closed_streams()
    if 1 in closed:
        # `validate x >&-`: nothing can be shown, so nothing may pass as clean; and fd 1, left
        # closed, would be what the next file we open gets (our prints would land in it).
        _say("omni-deploy: error: stdout is closed; run with output to a file or /dev/null")
        return EXIT_USAGE
    from omni_deploy.cli.settings import sanitize_environment

    sanitize_environment()  # COLUMNS of 5,000 digits, a relative XDG_CACHE_HOME: as if unset
    try:
        os.getcwd()
    except OSError as exc:  # a deleted working directory: relative names mean nothing
        _say(f"omni-deploy: error: the working directory is gone ({exc.strerror}); cd to an existing folder")
        return EXIT_FINDINGS

    # Whatever a command prints, the environment's secrets are scrubbed from it (omni_deploy/common/redact.py).
    with scrubbed_output():
        return _main(argv)


def _main(argv: list[str] | None) -> int:
    try:
        result: Any = _invoke(argv)
    except click.exceptions.Exit as exc:
        return int(exc.exit_code)
    except click.UsageError as exc:
        exc.message = _safe(exc.message)  # type: ignore[misc]  # it may quote what was typed
        exc.show()
        return exit_code_of(exc)
    except click.ClickException as exc:
        click.echo(f"omni-deploy: error: {_safe(exc.format_message())}", err=True)
        return exit_code_of(exc)
    except (click.exceptions.Abort, KeyboardInterrupt) as exc:
        click.echo("omni-deploy: interrupted", err=True)
        return exit_code_of(exc)
    except BrokenPipeError:
        # Output piped into `head` and friends: quietly, with the code a shell gives a writer
        # that SIGPIPE ended (141), as `yes | head` does; never 1, never a traceback.
        _quiet_stdout()
        return BROKEN_PIPE_CODE
    except OSError as exc:
        if exc.errno not in _OUTPUT_ERRNOS:
            return _internal(exc)
        # stdout on a full disk (or a dead terminal): say so where we still can, never a traceback.
        with contextlib.suppress(OSError):
            click.echo(f"omni-deploy: error: cannot write output: {exc.strerror}", err=True)
        _quiet_stdout()
        return EXIT_FINDINGS
    except Exception as exc:
        return _internal(exc)
    return int(result) if isinstance(result, int) else EXIT_OK


def _invoke(argv: list[str] | None) -> Any:
    try:
        return cli.main(args=argv, prog_name="omni-deploy", standalone_mode=False)
    except SystemExit:
        # click meets EPIPE on stdout by wrapping the streams (PacifyFlushWrapper) and exiting 1:
        # a broken pipe is the reader's choice, so it ends as the shell's SIGPIPE code instead.
        if type(sys.stdout).__name__.endswith("PacifyFlushWrapper"):
            _quiet_stdout()
            return BROKEN_PIPE_CODE
        raise


def _internal(exc: Exception) -> int:
    code = exit_code_of(exc)
    if code != EXIT_INTERNAL:
        click.echo(f"omni-deploy: error: {_safe(exc)}", err=True)
        return code
    if os.environ.get("OMNI_DEPLOY_DEBUG"):
        raise exc
    click.echo(
        f"omni-deploy: internal error: {type(exc).__name__}: {_safe(exc)}\n"
        "Please report this; set OMNI_DEPLOY_DEBUG=1 for the traceback.",
        err=True,
    )
    return EXIT_INTERNAL


def _safe(message: object) -> str:
    """An error message, which quotes names and values from files, made safe for a terminal."""
    from omni_deploy.common.output.escape import for_terminal

    return for_terminal(message)


_OUTPUT_ERRNOS = {errno.ENOSPC, errno.EIO, errno.EDQUOT, errno.EFBIG}


def _quiet_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush cannot fail again (exit 120)."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())


def _reopen_closed_streams() -> set[int]:
    """Which of fds 0, 1, 2 were closed when we started; each is opened on /dev/null now, so that
    no file we open later becomes our stdin, stdout or stderr, and Python's streams exist."""
    closed = set()
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            closed.add(fd)
    for fd in sorted(closed):
        with contextlib.suppress(OSError):
            null = os.open(os.devnull, os.O_RDWR)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
    if 0 in closed and sys.stdin is None:
        sys.stdin = open(0, encoding="utf-8", closefd=False)  # noqa: SIM115
    if 1 in closed and sys.stdout is None:
        sys.stdout = open(1, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
    if 2 in closed and sys.stderr is None:
        sys.stderr = open(2, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
    return closed


def _say(message: str) -> None:
    with contextlib.suppress(OSError, ValueError, AttributeError):
        click.echo(message, err=True)


def run() -> None:
    code = main()
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        _quiet_stdout()
        code = BROKEN_PIPE_CODE
    except OSError as exc:  # buffered output that only the final flush found no room for
        with contextlib.suppress(OSError):
            click.echo(f"omni-deploy: error: cannot write output: {exc.strerror}", err=True)
        _quiet_stdout()
        code = code or EXIT_FINDINGS
    sys.exit(code)
