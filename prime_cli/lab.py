"""`prime lab …`: the client side of a hub's Lab (docs/lab.md); training itself is the
`tinker` SDK's, pointed at the Lab with TINKER_BASE_URL and TINKER_API_KEY."""

from __future__ import annotations

from pathlib import Path

import click

from hub_client import settings as cfg
from prime_cli.adapter import (
    client_for,
    publish_options,
    show_pushed,
    target_ref,
    visibility_option,
)
from prime_cli.errors import CliError
from prime_cli.options import output_option
from registry_index.schemas.adapters import LabPublish


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


@lab.command("publish")
@click.argument("tinker_path")
@click.argument("name")
@click.option("--version", help="PEP 440 version (default: the next whole number: 1, 2, …).")
@visibility_option
@output_option
def publish(
    tinker_path: str, name: str, version: str | None, private: bool | None, output: str
) -> None:
    """Publish your Lab checkpoint TINKER_PATH as a new version of the hub adapter
    [OWNER/]NAME: the hub copies it (its PEFT files, not the optimizer state) without it
    passing through here. Uses the hub of `prime login`; the token needs the train scope and
    upload for OWNER (`all` has both)."""
    settings = cfg.load_settings()
    if not settings.api_key:
        raise CliError(
            "publishing needs a token: run `prime login --url URL --token TOKEN` or set "
            "PRIME_API_KEY"
        )
    options = publish_options(version, None, private)
    body = LabPublish(checkpoint=tinker_path, **options.model_dump(exclude_none=True))
    with client_for(settings) as client:
        ref = target_ref(name, client, settings)
        pushed = client.publish_lab_checkpoint(ref.owner, ref.name, body)
        show_pushed(client, pushed, output)
