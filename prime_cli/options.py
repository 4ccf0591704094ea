"""Option decorators shared by several commands, defined once so they read the same everywhere."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])

output_option = click.option(
    "--output",
    type=click.Choice(["table", "json"], case_sensitive=False),
    default="table",
    show_default=True,
    help="table for people, json for scripts",
)


def paging_options(default_size: int = 20) -> Callable[[F], F]:
    """`-n/--num` (alias `--per-page`, `--limit`), `-p/--page` and `--offset`, as the stock CLI."""

    def decorate(func: F) -> F:
        for decorator in reversed(
            [
                click.option(
                    "-n",
                    "--num",
                    "--per-page",
                    "--limit",
                    "num",
                    type=click.IntRange(1, 100),
                    default=default_size,
                    show_default=True,
                    help="items per page",
                ),
                click.option(
                    "-p", "--page", type=click.IntRange(min=1), default=1, show_default=True
                ),
                click.option(
                    "--offset",
                    type=click.IntRange(min=0),
                    default=None,
                    help="items to skip (instead of --page)",
                ),
            ]
        ):
            func = decorator(func)
        return func

    return decorate


def page_of(page: int, num: int, offset: int | None) -> int:
    """The page that holds item `offset` (the hub pages; the stock client offsets)."""
    return page if offset is None else offset // num + 1


def echo_json(payload: Any) -> None:
    """JSON for scripts on stdout (progress and warnings go to stderr)."""
    click.echo(json.dumps(payload, indent=2, default=str))


def json_object(text: str | None, what: str) -> dict[str, Any]:
    """The JSON object an option holds (`-a/--env-args`, `-S/--sampling-args`); {} when not
    given, a usage error saying what is wrong when it is not an object."""
    if text is None:
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise click.BadParameter(
            f"{what} is not valid JSON ({exc.msg} at column {exc.colno}); "
            f"""example: '{{"key": 1}}'"""
        ) from None
    if not isinstance(value, dict):
        raise click.BadParameter(f"{what} must be a JSON object, got {type(value).__name__}")
    return value
