"""`prime login`, `prime logout`, `prime whoami` and `prime config …`: which hub, and as whom."""

from __future__ import annotations

import click
from rich.table import Table

from hub_client import settings as cfg
from hub_client.client import HubClient, HubError
from prime_cli.errors import CliError, expected
from prime_cli.feedback import console_feedback
from prime_cli.messages import output_console, say
from prime_cli.options import echo_json, output_option

expected(HubError, cfg.ConfigError)

console = output_console()


@click.command()
@click.option("--url", "url", help="Base URL of the hub (default: the configured one).")
@click.option(
    "--token",
    help="API token (created with `prime hub token create`); prompted for when omitted.",
)
def login(url: str | None, token: str | None) -> None:
    """Check a token against a hub and save both in the settings file."""
    hub_url = cfg.normalize_hub_url(url) if url else cfg.load_settings().hub_url
    if token is None:
        token = click.prompt("API token", hide_input=True).strip()
    if not token:
        raise CliError("the token is empty; pass --token or paste it when prompted")
    try:
        with HubClient(
            hub_url, token, feedback=console_feedback(output_console(stderr=True))
        ) as client:
            who = client.whoami()
    except HubError as exc:
        raise CliError(f"login failed, nothing saved: {exc}") from exc
    values = cfg.load_file()
    values.update(hub_url=hub_url, api_key=token)
    path = cfg.save_file(values)
    say(console, f"Logged in to [bold]{hub_url}[/] as [bold]{who.username}[/]; saved to {path}")


@click.command()
def logout() -> None:
    """Forget the saved token (the hub URL and other settings stay)."""
    path = cfg.clear_credentials()
    if path is None:
        say(console, f"No token saved in {cfg.config_path()}; nothing to do.")
    else:
        say(console, f"Logged out: the token was removed from {path}")
    if cfg.load_settings().api_key:
        console.print("[yellow]PRIME_API_KEY is still set in this shell; unset it too.[/]")


@click.command()
@output_option
def whoami(output: str) -> None:
    """Show the account behind the configured token."""
    settings = cfg.load_settings()
    if not settings.api_key:
        raise CliError(
            "not logged in: run `prime login --url URL --token TOKEN` or set PRIME_API_KEY"
        )
    with HubClient.from_settings(settings) as client:
        who = client.whoami()
    if output == "json":
        echo_json({"hub_url": settings.hub_url, **who.model_dump(mode="json")})
        return
    table = Table(show_header=False, box=None)
    table.add_row("hub", settings.hub_url)
    table.add_row("user", who.username)
    table.add_row("admin", "yes" if who.is_admin else "no")
    table.add_row("organizations", ", ".join(who.organizations) or "-")
    table.add_row("token", f"{who.token.name} ({', '.join(who.token.scopes)})")
    console.print(table)


@click.group()
def config() -> None:
    """Show and change the settings in ~/.config/prime/config.toml."""


@config.command("show")
@output_option
def config_show(output: str) -> None:
    """Show the effective settings and where each comes from (the token is masked)."""
    settings = cfg.load_settings()
    rows = {
        "hub_url": settings.hub_url,
        "api_key": cfg.mask_token(settings.api_key),
        "owner": settings.owner or "(not set)",
    }
    if output == "json":
        echo_json(
            {
                "file": str(cfg.config_path()),
                "settings": {
                    k: {"value": v, "source": settings.sources.get(k)} for k, v in rows.items()
                },
            }
        )
        return
    table = Table(title=f"prime settings ({cfg.config_path()})")
    table.add_column("key")
    table.add_column("value")
    table.add_column("source")
    for key, value in rows.items():
        table.add_row(key, value, settings.sources.get(key, "-"))
    console.print(table)


@config.command("set")
@click.argument("key", type=click.Choice(sorted(cfg.KEYS)))
@click.argument("value")
def config_set(key: str, value: str) -> None:
    """Store one setting (hub_url, api_key or owner)."""
    path = cfg.set_value(key, value)
    shown = cfg.mask_token(value) if key == "api_key" else value
    say(console, f"{key} = {shown} (saved to {path})")


@config.command("set-base-url")
@click.argument("url")
def config_set_base_url(url: str) -> None:
    """Store the hub URL (the stock client's name for `config set hub_url`)."""
    path = cfg.set_value("hub_url", url)
    say(console, f"hub_url = {cfg.load_file()['hub_url']} (saved to {path})")


@config.command("set-api-key")
@click.argument("key")
def config_set_api_key(key: str) -> None:
    """Store the API token (the stock client's name for `config set api_key`)."""
    path = cfg.set_value("api_key", key)
    say(console, f"api_key = {cfg.mask_token(key)} (saved to {path})")


@config.command("unset")
@click.argument("key", type=click.Choice(sorted(cfg.KEYS)))
def config_unset(key: str) -> None:
    """Remove one setting from the file."""
    path = cfg.unset_value(key)
    say(console, f"{key} removed from {path}")


config.add_command(config_show, "view")  # the stock client's name
