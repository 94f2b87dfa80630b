"""Exceptions of the core. The CLI maps them to messages and exit codes in one place."""

from __future__ import annotations

from dataclasses import dataclass

from omni_deploy.common.codes import Code, lookup


@dataclass(frozen=True)
class Location:
    """A 1-based position in a file; line and column are 0 when unknown."""

    file: str
    line: int = 0
    column: int = 0

    def __str__(self) -> str:
        if self.line:
            return f"{self.file}:{self.line}:{self.column}"
        return self.file


class OmniDeployError(Exception):
    """Base class of every error the tool reports to the user without a traceback."""


class UsageProblem(OmniDeployError):
    """What the command line (or the settings) asks for cannot be done as asked: exit 2, like
    Click's own usage errors. Checked before any work is done."""


class ConfigError(OmniDeployError):
    """A deploy file cannot be loaded, chained or merged."""

    def __init__(
        self,
        message: str,
        location: Location | None = None,
        *,
        code: Code | str,
        hint: str | None = None,
        path: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.location = location
        # A plain id is looked up so that an undeclared code fails at once (KeyError in tests).
        self.code = (lookup(code) if isinstance(code, str) else code).id
        self.hint = hint
        self.path = path

    def __str__(self) -> str:
        where = f"{self.location}: " if self.location else ""
        hint = f" (hint: {self.hint})" if self.hint else ""
        return f"{where}{self.message}{hint}"


class ProcessExited(OmniDeployError):
    """A program omni-deploy ran (the server, `vllm bench serve`) exited with an error of its own."""

    def __init__(self, program: str, returncode: int) -> None:
        super().__init__(f"{program} exited with code {returncode}")
        self.program = program
        self.returncode = returncode


class Interrupted(OmniDeployError):
    """A signal asked us to stop (forwarded to the server, which then exited)."""


class ReadinessTimeout(OmniDeployError):
    """A server did not answer /health in time."""


class NoAccelerator(UsageProblem):
    """`--platform auto` on a host with no accelerator: the platform must be named."""
