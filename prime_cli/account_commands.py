"""`prime login`, `prime whoami` and `prime config …`: which hub to talk to, and as whom."""

from __future__ import annotations

import json
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from prime_cli import config as cfg
from prime_cli.hub_client import HubClient, HubError

console = Console()


def fail(message: str) -> click.ClickException:
    """A one-line error for click to print as `Error: …` with exit status 1."""
    return click.ClickException(message)


def fetch_whoami(client: HubClient) -> dict[str, Any]:
    """The account behind the client's token (`GET /api/v1/user/whoami`)."""
    data = client.data("GET", "/user/whoami", "whoami")
    if not isinstance(data, dict) or "username" not in data:
        raise HubError(f"whoami: unexpected answer from {client.base_url}; is it a prime hub?")
    return data


@click.command()
@click.option("--url", "url", help="Base URL of the hub (default: the configured one).")
@click.option(
    "--token",
    help="API token (created with `prime hub token create`); prompted for when omitted.",
)
def login(url: str | None, token: str | None) -> None:
    """Check a token against a hub and save both in the settings file."""
    try:
        hub_url = cfg.normalize_hub_url(url) if url else cfg.load_settings().hub_url
    except cfg.ConfigError as exc:
        raise fail(str(exc)) from exc
    if token is None:
        token = click.prompt("API token", hide_input=True).strip()
    if not token:
        raise fail("the token is empty; pass --token or paste it when prompted")
    try:
        with HubClient(hub_url, token) as client:
            who = fetch_whoami(client)
    except HubError as exc:
        raise fail(f"login failed, nothing saved: {exc}") from exc
    try:
        values = cfg.load_file()
        values.update(hub_url=hub_url, api_key=token)
        path = cfg.save_file(values)
    except (cfg.ConfigError, OSError) as exc:
        raise fail(f"cannot save the settings: {exc}") from exc
    console.print(f"Logged in to [bold]{hub_url}[/] as [bold]{who['username']}[/]; saved to {path}")


@click.command()
@click.option("--output", type=click.Choice(["table", "json"]), default="table", show_default=True)
def whoami(output: str) -> None:
    """Show the account behind the configured token."""
    try:
        settings = cfg.load_settings()
    except cfg.ConfigError as exc:
        raise fail(str(exc)) from exc
    if not settings.api_key:
        raise fail("not logged in: run `prime login --url URL --token TOKEN` or set PRIME_API_KEY")
    try:
        with HubClient.from_settings(settings) as client:
            who = fetch_whoami(client)
    except HubError as exc:
        raise fail(str(exc)) from exc
    if output == "json":
        click.echo(json.dumps({"hub_url": settings.hub_url, **who}, indent=2))
        return
    table = Table(show_header=False, box=None)
    table.add_row("hub", settings.hub_url)
    table.add_row("user", str(who["username"]))
    table.add_row("admin", "yes" if who.get("is_admin") else "no")
    table.add_row("organizations", ", ".join(who.get("organizations") or []) or "-")
    token_info = who.get("token") or {}
    if token_info:
        table.add_row(
            "token", f"{token_info.get('name')} ({', '.join(token_info.get('scopes', []))})"
        )
    console.print(table)


@click.group()
def config() -> None:
    """Show and change the settings in ~/.config/prime/config.toml."""


@config.command("show")
@click.option("--output", type=click.Choice(["table", "json"]), default="table", show_default=True)
def config_show(output: str) -> None:
    """Show the effective settings and where each comes from (the token is masked)."""
    try:
        settings = cfg.load_settings()
    except cfg.ConfigError as exc:
        raise fail(str(exc)) from exc
    rows = {
        "hub_url": settings.hub_url,
        "api_key": cfg.mask_token(settings.api_key),
        "owner": settings.owner or "(not set)",
    }
    if output == "json":
        payload = {
            "file": str(cfg.config_path()),
            "settings": {
                k: {"value": v, "source": settings.sources.get(k)} for k, v in rows.items()
            },
        }
        click.echo(json.dumps(payload, indent=2))
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
    try:
        path = cfg.set_value(key, value)
    except (cfg.ConfigError, OSError) as exc:
        raise fail(str(exc)) from exc
    shown = cfg.mask_token(value) if key == "api_key" else value
    console.print(f"{key} = {shown} (saved to {path})")


@config.command("unset")
@click.argument("key", type=click.Choice(sorted(cfg.KEYS)))
def config_unset(key: str) -> None:
    """Remove one setting from the file."""
    try:
        path = cfg.unset_value(key)
    except (cfg.ConfigError, OSError) as exc:
        raise fail(str(exc)) from exc
    console.print(f"{key} removed from {path}")
