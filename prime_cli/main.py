"""Entry point of the `prime` command.

Subcommands live in their own modules and are imported only when used, so that
`prime env install` does not pay for importing FastAPI, torch or the docker SDK.
"""

from __future__ import annotations

import importlib

import click

from prime_cli.errors import HandledGroup

# command name -> "module:attribute"; each module owns one layer of the CLI.
_COMMANDS: dict[str, str] = {
    "adapter": "prime_cli.adapter:adapter",
    "login": "prime_cli.account:login",
    "logout": "prime_cli.account:logout",
    "whoami": "prime_cli.account:whoami",
    "config": "prime_cli.account:config",
    "env": "prime_cli.env.commands:env",
    "engine": "prime_cli.engine:engine",
    "eval": "prime_cli.eval.commands:eval_group",
    "hub": "prime_cli.hub:hub",
    "lab": "prime_cli.lab:lab",
    "sandbox": "prime_cli.sandbox:sandbox",
    "train": "prime_cli.train:train",
}


class LazyGroup(HandledGroup):
    """A click group that imports each subcommand's module on first use.

    It is also the CLI's one error handler (`prime_cli.errors`): every command runs inside it.
    """

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(_COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = _COMMANDS.get(cmd_name)
        if target is None:
            return None
        module_name, attr = target.split(":")
        command = getattr(importlib.import_module(module_name), attr)
        assert isinstance(command, click.Command)
        return command


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="prime-envhub", prog_name="prime")
def cli() -> None:
    """Build, share, evaluate and train on LLM environments."""


if __name__ == "__main__":
    cli()
