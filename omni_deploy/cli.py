"""The `omni-deploy` command line: a thin layer that parses options and calls the core.

Errors are turned into messages and exit codes here and nowhere else:
0 clean, 1 findings or a config that cannot be loaded, 2 usage, 3 internal error, 130 interrupted.
Command modules are imported lazily so that `validate` and `render` never pay for torch.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any

import click

from omni_deploy import __version__
from omni_deploy.errors import OmniDeployError

# command name -> (module, attribute); each module stays import-light at top level.
COMMANDS: dict[str, tuple[str, str]] = {
    "bench": ("omni_deploy.commands.bench", "bench"),
    "explain": ("omni_deploy.commands.explain", "explain"),
    "render": ("omni_deploy.commands.render", "render"),
    "schema": ("omni_deploy.commands.schema", "schema"),
    "serve": ("omni_deploy.commands.serve", "serve"),
    "validate": ("omni_deploy.commands.validate", "validate"),
    "spk": ("omni_deploy.commands.spk", "spk"),
}

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE, EXIT_INTERNAL, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return None
        module, attr = COMMANDS[cmd_name]
        command = getattr(importlib.import_module(module), attr)
        assert isinstance(command, click.Command)
        return command


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="omni-deploy")
def cli() -> None:
    """Check, explain and launch vllm-omni deploy configs (MiniCPM-o 4.5 speech serving)."""


def main(argv: list[str] | None = None) -> int:
    try:
        result: Any = cli.main(args=argv, prog_name="omni-deploy", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("omni-deploy: interrupted", err=True)
        return EXIT_INTERRUPTED
    except click.exceptions.Exit as exc:
        return int(exc.exit_code)
    except click.UsageError as exc:
        exc.show()
        return int(exc.exit_code)
    except click.ClickException as exc:
        click.echo(f"omni-deploy: error: {exc.format_message()}", err=True)
        return int(exc.exit_code)
    except OmniDeployError as exc:
        click.echo(f"omni-deploy: error: {exc}", err=True)
        return EXIT_FINDINGS
    except KeyboardInterrupt:
        click.echo("omni-deploy: interrupted", err=True)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # Output piped into `head` and friends: not an error of ours.
        sys.stderr.close()
        return EXIT_OK
    except Exception as exc:
        if os.environ.get("OMNI_DEPLOY_DEBUG"):
            raise
        click.echo(
            f"omni-deploy: internal error: {type(exc).__name__}: {exc}\n"
            "Please report this; set OMNI_DEPLOY_DEBUG=1 for the traceback.",
            err=True,
        )
        return EXIT_INTERNAL
    return int(result) if isinstance(result, int) else EXIT_OK


def run() -> None:
    sys.exit(main())
