"""Option types every command shares, so that one word means one thing everywhere.

`--platform` takes a platform name (cuda, rocm, npu, xpu, musa) in any case, plus the special
words a command can honour: `all` (validate, explain: every platform), `none` (render, diff: no
platform section applied, exactly what vllm-omni's resolve_deploy_yaml returns), `auto` (serve:
the accelerator of this host).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from omni_deploy.common.numbers import SECONDS_LIMIT, parse_count, parse_real
from omni_deploy.config.stage_schema import PLATFORMS
from omni_deploy.integrations.speaker_rules import BACKENDS, Backend

T = TypeVar("T")

SPECIAL_PLATFORMS = {
    "all": "every platform",
    "none": "no platform section applied",
    "auto": "this host's accelerator",
}


def did_you_mean(word: str, choices: list[str] | tuple[str, ...]) -> str:
    import difflib  # only for a wrong value: start-up stays light

    close = difflib.get_close_matches(word.lower(), [c.lower() for c in choices], n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


class _Words(click.ParamType):
    """A value from a few words, any case, completed by the shell from them."""

    choices: tuple[str, ...] = ()

    def get_metavar(self, param: click.Parameter, ctx: click.Context | None = None) -> str:
        return "[" + "|".join(self.choices) + "]"

    def shell_complete(
        self, ctx: click.Context, param: click.Parameter, incomplete: str
    ) -> list[click.shell_completion.CompletionItem]:
        from click.shell_completion import CompletionItem

        return [CompletionItem(c) for c in self.choices if c.startswith(incomplete.lower())]


class PlatformType(_Words):
    """A platform name, case-insensitive, plus the special words this command takes."""

    name = "platform"

    def __init__(self, *special: str) -> None:
        unknown = set(special) - set(SPECIAL_PLATFORMS)
        assert not unknown, unknown
        self.choices = (*special, *PLATFORMS)

    def _newer(self, text: str, known: str, param: click.Parameter | None, ctx: click.Context | None) -> str:
        """A version after the knowledge (0.32.0 after 0.32.0rc1): only its own code can judge it,
        so it is taken where that code is installed, and otherwise refused with the ways to give it
        (no other release's rules stand in for it silently)."""
        from omni_deploy.common.bundled import installed_version
        from omni_deploy.knowledge.versions import RELEASES

        if installed_version("vllm-omni") == text:
            return text
        self.fail(
            f"vllm-omni {text} is not known yet (omni-deploy knows {known}): install it and use "
            "--target-version installed, or name its source tree with --vllm-omni-source DIR and "
            f"--target-version main; its keys are then read from its code, and {RELEASES[-1]}'s "
            "typed-config rules used only where its code is the same. Once it is on the package "
            f"index: python -m omni_deploy.knowledge.generate --add {text}",
            param,
            ctx,
        )

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        text = str(value).strip().lower()
        if text in self.choices:
            return text
        if text in SPECIAL_PLATFORMS:
            self.fail(
                f"{value!r} ({SPECIAL_PLATFORMS[text]}) does not apply to this command; "
                f"choose from {', '.join(self.choices)}",
                param,
                ctx,
            )
        self.fail(
            f"{value!r} is not a platform; choose from {', '.join(self.choices)}"
            + did_you_mean(text, self.choices),
            param,
            ctx,
        )


class PipelineType(click.ParamType):
    """A pipeline name of vllm-omni's registry (any case), with a suggestion for a near miss."""

    name = "pipeline"

    def shell_complete(
        self, ctx: click.Context, param: click.Parameter, incomplete: str
    ) -> list[click.shell_completion.CompletionItem]:
        from click.shell_completion import CompletionItem

        from omni_deploy.knowledge.pipelines import REGISTERED

        return [CompletionItem(n) for n in sorted(REGISTERED) if n.lower().startswith(incomplete.lower())]

    def _newer(self, text: str, known: str, param: click.Parameter | None, ctx: click.Context | None) -> str:
        """A version after the knowledge (0.32.0 after 0.32.0rc1): only its own code can judge it,
        so it is taken where that code is installed, and otherwise refused with the ways to give it
        (no other release's rules stand in for it silently)."""
        from omni_deploy.common.bundled import installed_version
        from omni_deploy.knowledge.versions import RELEASES

        if installed_version("vllm-omni") == text:
            return text
        self.fail(
            f"vllm-omni {text} is not known yet (omni-deploy knows {known}): install it and use "
            "--target-version installed, or name its source tree with --vllm-omni-source DIR and "
            f"--target-version main; its keys are then read from its code, and {RELEASES[-1]}'s "
            "typed-config rules used only where its code is the same. Once it is on the package "
            f"index: python -m omni_deploy.knowledge.generate --add {text}",
            param,
            ctx,
        )

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        from omni_deploy.knowledge.pipelines import REGISTERED

        text = str(value).strip()
        by_lower = {n.lower(): n for n in REGISTERED}
        if text.lower() in by_lower:
            return by_lower[text.lower()]
        self.fail(
            f"{value!r} is not a pipeline of vllm-omni's registry" + did_you_mean(text, sorted(REGISTERED)),
            param,
            ctx,
        )


class TargetVersionType(click.ParamType):
    """A vllm-omni version: a release omni-deploy has read (pre-releases included, exactly), the
    installed one (a newer version included: its code is read), `installed`, or `main`."""

    name = "version"

    def get_metavar(self, param: click.Parameter, ctx: click.Context | None = None) -> str:
        return "VERSION|installed|main"

    def _newer(self, text: str, known: str, param: click.Parameter | None, ctx: click.Context | None) -> str:
        """A version after the knowledge (0.32.0 after 0.32.0rc1): only its own code can judge it,
        so it is taken where that code is installed, and otherwise refused with the ways to give it
        (no other release's rules stand in for it silently)."""
        from omni_deploy.common.bundled import installed_version
        from omni_deploy.knowledge.versions import RELEASES

        if installed_version("vllm-omni") == text:
            return text
        self.fail(
            f"vllm-omni {text} is not known yet (omni-deploy knows {known}): install it and use "
            "--target-version installed, or name its source tree with --vllm-omni-source DIR and "
            f"--target-version main; its keys are then read from its code, and {RELEASES[-1]}'s "
            "typed-config rules used only where its code is the same. Once it is on the package "
            f"index: python -m omni_deploy.knowledge.generate --add {text}",
            param,
            ctx,
        )

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        from packaging.version import InvalidVersion, Version

        from omni_deploy.common.bundled import installed_version, installed_version_problem
        from omni_deploy.common.numbers import version_problem
        from omni_deploy.knowledge.versions import MAIN, RELEASES

        text = str(value).strip()
        problem = version_problem(text)
        if problem is not None:
            self.fail(f"{text[:40]!r}...: {problem}", param, ctx)
        if text.lower() == MAIN:
            return MAIN
        if text.lower() == "installed":
            found = installed_version("vllm-omni")
            if found is None:
                problem = installed_version_problem("vllm-omni")
                if problem is not None:
                    self.fail(f"'installed': the installed vllm-omni's metadata gives {problem}", param, ctx)
                self.fail("'installed': vllm-omni is not installed in this environment", param, ctx)
            return found
        known = ", ".join(RELEASES)
        try:
            version = Version(text)
        except InvalidVersion:
            self.fail(
                f"{value!r} is not a version; use a release ({known}), 'installed' or 'main'", param, ctx
            )
        for release in RELEASES:
            if Version(release) == version:
                return release
        if version > Version(RELEASES[-1]):
            return self._newer(text, known, param, ctx)
        self.fail(
            f"{value!r} is not a vllm-omni release omni-deploy knows ({known}); "
            "use 'installed' for the one in this environment or 'main' for newer code",
            param,
            ctx,
        )


def output_option(formats: tuple[str, ...], help: str) -> Any:
    """`-o/--output FORMAT` as every reporting command spells it; the first format is the default."""
    return click.option(
        "-o",
        "--output",
        "fmt",
        type=click.Choice(formats),
        default=formats[0],
        show_default=True,
        help=help,
    )


def backend_choice(name: str) -> Backend | None:
    """A --spk-backend value: "auto" -> None (what the deploy file says), else the backend named."""
    for backend in BACKENDS:
        if backend == name:
            return backend
    if name == "auto":
        return None
    raise ValueError(f"unknown speaker backend {name!r}; one of auto, {', '.join(BACKENDS)}")


class DeviceType(_Words):
    """A torch device for the speaker tools: auto, cpu, cuda or cuda:N (checked before torch loads)."""

    name = "device"
    choices = ("auto", "cpu", "cuda")

    def get_metavar(self, param: click.Parameter, ctx: click.Context | None = None) -> str:
        return "[auto|cpu|cuda|cuda:N]"

    def _newer(self, text: str, known: str, param: click.Parameter | None, ctx: click.Context | None) -> str:
        """A version after the knowledge (0.32.0 after 0.32.0rc1): only its own code can judge it,
        so it is taken where that code is installed, and otherwise refused with the ways to give it
        (no other release's rules stand in for it silently)."""
        from omni_deploy.common.bundled import installed_version
        from omni_deploy.knowledge.versions import RELEASES

        if installed_version("vllm-omni") == text:
            return text
        self.fail(
            f"vllm-omni {text} is not known yet (omni-deploy knows {known}): install it and use "
            "--target-version installed, or name its source tree with --vllm-omni-source DIR and "
            f"--target-version main; its keys are then read from its code, and {RELEASES[-1]}'s "
            "typed-config rules used only where its code is the same. Once it is on the package "
            f"index: python -m omni_deploy.knowledge.generate --add {text}",
            param,
            ctx,
        )

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        text = str(value).strip().lower()
        index = text.removeprefix("cuda:")
        if text in self.choices or (text.startswith("cuda:") and index.isdigit() and len(index) <= 3):
            return text
        self.fail(
            f"{value!r} is not a device; use auto, cpu, cuda or cuda:N" + did_you_mean(text, self.choices),
            param,
            ctx,
        )


# --- numbers: omni_deploy/common/numbers.py parses them (ASCII digits, finite, in range) -------------


class Count(click.ParamType):
    """A whole number in ASCII digits within [low, high]."""

    name = "integer"

    def __init__(self, low: int = 0, high: int | None = None) -> None:
        self.low, self.high = low, high

    def get_metavar(self, param: click.Parameter, ctx: click.Context | None = None) -> str:
        return "INTEGER" if self.high is None else f"INTEGER RANGE {self.low}-{self.high}"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int) and not isinstance(value, bool):
            value = str(value)
        try:
            return parse_count(value, self.low, self.high)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


class Real(click.ParamType):
    """A finite decimal number in its range: NaN, infinity and negative values refused."""

    name = "number"

    def __init__(self, low: float = 0.0, high: float | None = None, low_open: bool = False) -> None:
        self.low, self.high, self.low_open = low, high, low_open

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            value = repr(value)
        try:
            return parse_real(value, self.low, self.high, self.low_open)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


PORT = Count(1, 65535)


def seconds(low_open: bool = False) -> Real:
    """Seconds to wait: finite, not negative (more than 0 with `low_open`), at most a week."""
    return Real(0.0, SECONDS_LIMIT, low_open)


def number_list(value: str, parse: Callable[[str], T], what: str, option: str) -> tuple[T, ...]:
    """`1,4,8` -> its numbers, each through `parse` (parse_count or parse_real with a range)."""
    try:
        out = tuple(parse(v) for v in value.split(",") if v.strip())
    except ValueError as exc:
        raise click.BadParameter(f"expected comma-separated {what}: {exc}", param_hint=option) from None
    if not out:
        raise click.BadParameter(f"give at least one of the {what}", param_hint=option)
    return out
