"""`prime adapter …`: LoRA adapters on the hub (push, pull, list, info, edit), over
`hub_client.adapters`. An adapter is a PEFT directory (`prime train export`, `prime lab
export`, peft's save_pretrained); `prime eval run ENV -m BASE --adapter OWNER/NAME[@VERSION]`
runs a pushed one. New adapters are private unless pushed with `--public`."""

from __future__ import annotations

from pathlib import Path

import click
from rich.table import Table

from hub_client import settings as cfg
from hub_client.adapters import cached_adapter, parse_adapter_ref, pull_adapter, push_adapter
from hub_client.client import HubClient, HubError
from prime_cli.errors import CliError, expected
from prime_cli.feedback import console_feedback
from prime_cli.messages import output_console, say
from prime_cli.options import echo_json, output_option, page_of, paging_options
from registry_index.errors import InvalidUpload
from registry_index.resolve import EnvRef, parse_env_id
from registry_index.schemas.adapters import AdapterPatch, AdapterVersionInfo, PublishOptions
from registry_index.schemas.environments import Visibility

expected(HubError, InvalidUpload, cfg.ConfigError)

console = output_console()
err_console = output_console(stderr=True)

visibility_option = click.option(
    "--private/--public",
    "private",
    default=None,
    help="Who may read a new adapter: its owner's people (the default), or everyone. An "
    "existing adapter keeps its own (`prime adapter edit`).",
)


def client_for(settings: cfg.Settings | None = None) -> HubClient:
    return HubClient.from_settings(settings, feedback=console_feedback(err_console))


def _ref(text: str) -> EnvRef:
    try:
        return parse_adapter_ref(text)
    except ValueError as error:
        raise click.BadParameter(str(error)) from None


def target_ref(text: str, client: HubClient, settings: cfg.Settings) -> EnvRef:
    """`[OWNER/]NAME` to push to: the owner defaults to the `owner` setting, else the
    token's user; a version (`@…`) is refused: it is `--version`."""
    try:
        owner, name, spec = parse_env_id(text, noun="adapter")
    except ValueError as error:
        raise click.BadParameter(str(error)) from None
    if spec is not None:
        raise click.BadParameter(f"{text}: give the version with --version, not '@'")
    return _ref(f"{owner or settings.owner or client.whoami().username}/{name}")


def publish_options(
    version: str | None, base_model: str | None, private: bool | None
) -> PublishOptions:
    visibility = None if private is None else Visibility.PRIVATE if private else Visibility.PUBLIC
    try:
        return PublishOptions(version=version, base_model=base_model, visibility=visibility)
    except ValueError as error:
        raise click.BadParameter(str(error).splitlines()[-1]) from None


def show_pushed(client: HubClient, pushed: AdapterVersionInfo, output: str) -> None:
    """The pushed version, with the adapter's visibility (a push never changes it)."""
    summary = client.adapter(pushed.owner, pushed.name)
    if output == "json":
        echo_json({**pushed.model_dump(mode="json"), "visibility": summary.visibility})
        return
    say(
        console,
        f"Pushed [bold]{pushed.owner}/{pushed.name}@{pushed.version}[/] ({summary.visibility}; "
        f"base {pushed.base_model}, rank {pushed.rank}, {pushed.size} bytes)",
    )
    say(
        console,
        f"Use it: prime eval run ENV -m {pushed.base_model} --adapter "
        f"{pushed.owner}/{pushed.name}@{pushed.version}",
    )


def adapter_directory(text: str, models: tuple[str, ...]) -> Path:
    """`--adapter TEXT` of `prime eval run`: a PEFT directory, else OWNER/NAME[@VERSION] on the
    hub, downloaded into the verified cache (a note on stderr when its base model is none of
    `models`)."""
    from prime_env.clients.model_paths import check_adapter_dir, looks_like_path

    path = Path(text).expanduser()
    if path.is_dir() or looks_like_path(text):
        return check_adapter_dir(path)
    try:
        ref = parse_adapter_ref(text)
    except ValueError:
        raise CliError(
            f"--adapter {text}: no such directory, and not OWNER/NAME[@VERSION] of an adapter "
            "on the hub"
        ) from None
    with client_for() as client:
        directory, version = cached_adapter(client, ref)
    say(
        err_console,
        f"adapter {version.owner}/{version.name}@{version.version} from the hub "
        f"(base {version.base_model}), verified, in {directory}",
    )
    if version.base_model not in models:
        say(
            err_console,
            f"[yellow]note:[/] the adapter was trained on {version.base_model}; it runs here "
            f"on {', '.join(models)}",
        )
    return directory


@click.group()
def adapter() -> None:
    """Publish, find and fetch LoRA adapters on the hub."""


@adapter.command()
@click.argument("directory", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.argument("name")
@click.option("--version", help="PEP 440 version (default: the next whole number: 1, 2, …).")
@click.option(
    "--base-model", help="The model it adapts (default: adapter_config.json's base model)."
)
@visibility_option
@output_option
def push(
    directory: Path,
    name: str,
    version: str | None,
    base_model: str | None,
    private: bool | None,
    output: str,
) -> None:
    """Push the PEFT adapter in DIRECTORY as a new version of [OWNER/]NAME."""
    settings = cfg.load_settings()
    if not settings.api_key:
        raise CliError(
            "pushing needs a token: run `prime login --url URL --token TOKEN` or set PRIME_API_KEY"
        )
    options = publish_options(version, base_model, private)
    with client_for(settings) as client:
        pushed = push_adapter(client, directory, target_ref(name, client, settings), options)
        show_pushed(client, pushed, output)


@adapter.command()
@click.argument("ref")
@click.argument("dest", required=False, type=click.Path(file_okay=False, path_type=Path))
@output_option
def pull(ref: str, dest: Path | None, output: str) -> None:
    """Download OWNER/NAME[@VERSION] as a PEFT adapter directory DEST (default ./NAME-VERSION)."""
    adapter_ref = _ref(ref)
    with client_for() as client:
        if dest is None:
            chosen = client.adapter_version(adapter_ref.owner, adapter_ref.name, adapter_ref.spec)
            dest = Path(f"{chosen.name}-{chosen.version}")
            adapter_ref = _ref(f"{chosen.owner}/{chosen.name}@{chosen.version}")
        got = pull_adapter(client, adapter_ref, dest)
    if output == "json":
        echo_json({**got.model_dump(mode="json"), "directory": str(dest.resolve())})
        return
    say(console, f"Pulled {got.owner}/{got.name}@{got.version} (base {got.base_model}) into {dest}")


@adapter.command("list")
@click.argument("owner", required=False)
@paging_options()
@output_option
def list_cmd(owner: str | None, num: int, page: int, offset: int | None, output: str) -> None:
    """The adapters you may read (of OWNER when given), last changed first."""
    page = page_of(page, num, offset)
    with client_for() as client:
        listing = client.list_adapters(owner, page=page, per_page=num)
    if output == "json":
        echo_json(listing.model_dump(mode="json"))
        return
    table = Table(title=f"Adapters ({len(listing.data)} of {listing.total_count}, page {page})")
    for column in ("adapter", "latest", "visibility", "base model", "description"):
        table.add_column(column, no_wrap=column != "description")
    for item in listing.data:
        table.add_row(
            f"{item.owner.name}/{item.name}",
            item.latest_version or "-",
            item.visibility,
            item.base_model or "-",
            item.description,
        )
    console.print(table)
    if (page - 1) * num + len(listing.data) < listing.total_count:
        console.print(f"[dim]next page: --page {page + 1}[/]")


@adapter.command()
@click.argument("ref")
@output_option
def info(ref: str, output: str) -> None:
    """An adapter and its versions (newest first)."""
    adapter_ref = _ref(ref)
    with client_for() as client:
        summary = client.adapter(adapter_ref.owner, adapter_ref.name)
        versions = client.adapter_versions(adapter_ref.owner, adapter_ref.name)
    if output == "json":
        echo_json(
            {
                "adapter": summary.model_dump(mode="json"),
                "versions": [v.model_dump(mode="json") for v in versions],
            }
        )
        return
    say(console, f"[bold]{summary.owner.name}/{summary.name}[/] ({summary.visibility})")
    if summary.description:
        say(console, summary.description)
    table = Table()
    for column in ("version", "base model", "rank", "alpha", "bytes", "pushed by", "created"):
        table.add_column(column, no_wrap=True)
    for v in versions:
        table.add_row(
            v.version,
            v.base_model or "-",
            str(v.rank),
            "-" if v.lora_alpha is None else f"{v.lora_alpha:g}",
            str(v.size),
            v.uploaded_by or "-",
            str(v.created_at)[:19],
        )
    console.print(table)


@adapter.command()
@click.argument("ref")
@click.option("--private/--public", "private", default=None, help="Change who may read it.")
@click.option("--description", help="A new one-line description.")
@output_option
def edit(ref: str, private: bool | None, description: str | None, output: str) -> None:
    """Change the visibility or description of OWNER/NAME."""
    if private is None and description is None:
        raise click.UsageError("nothing to change: give --private, --public or --description")
    adapter_ref = _ref(ref)
    visibility = None if private is None else Visibility.PRIVATE if private else Visibility.PUBLIC
    with client_for() as client:
        changed = client.update_adapter(
            adapter_ref.owner,
            adapter_ref.name,
            AdapterPatch(visibility=visibility, description=description),
        )
    if output == "json":
        echo_json(changed.model_dump(mode="json"))
        return
    say(console, f"{changed.owner.name}/{changed.name} is {changed.visibility}")
