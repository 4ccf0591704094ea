"""`prime lab …`: the client side of a hub's Lab (docs/lab.md); training itself is the
`tinker` SDK's, pointed at the Lab with TINKER_BASE_URL and TINKER_API_KEY."""

from __future__ import annotations

from pathlib import Path

import click

from prime_cli.errors import CliError


@click.group()
def lab() -> None:
    """Use a hub's Lab (LoRA training through the Tinker API)."""


@lab.command("export")
@click.argument("tinker_path")
@click.argument("dest", type=click.Path(file_okay=False, path_type=Path))
@click.option(
    "--lab",
    "lab_url",
    envvar="TINKER_BASE_URL",
    required=True,
    help="The Lab's URL, HUB/lab (default: $TINKER_BASE_URL).",
)
@click.option(
    "--key",
    envvar="TINKER_API_KEY",
    required=True,
    help="A train-scoped hub token, `tml-` prefixed or not (default: $TINKER_API_KEY).",
)
def export(tinker_path: str, dest: Path, lab_url: str, key: str) -> None:
    """Write checkpoint TINKER_PATH (tinker://MODEL/weights/NAME or …/sampler_weights/NAME)
    as a PEFT adapter directory DEST, for `prime eval run ENV -m BASE --adapter DEST`."""
    from hub_client.client import HubError
    from hub_client.lab import export_adapter

    try:
        export_adapter(lab_url, key, tinker_path, dest)
    except HubError as error:
        raise CliError(str(error)) from None
    click.echo(f"Adapter written to {dest}")
