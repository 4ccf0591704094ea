"""The CLI's one error type and its one handler.

A failure the user can fix (unreachable hub, bad token, broken pyproject, unknown environment)
must print `Error: <one line that says how to fix it>` and exit 1, never a traceback. Commands
raise `CliError` for their own checks; modules that own other expected exception types register
them with `expected()` when imported, and `HandledGroup.invoke` — the only handler — turns any
of them into a `CliError`. Anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

from typing import Any

import click


class CliError(click.ClickException):
    """A one-line, fixable failure: click prints `Error: …` and exits with `status` (1)."""

    def __init__(self, message: str, status: int = 1) -> None:
        super().__init__(message)
        self.exit_code = status  # type: ignore[misc]  # click reads it per instance


_EXPECTED: list[type[BaseException]] = [OSError]


def expected(*types: type[BaseException]) -> None:
    """Declare exception types whose message is already meant for the user."""
    for kind in types:
        if kind not in _EXPECTED:
            _EXPECTED.append(kind)


class HandledGroup(click.Group):
    """A click group whose commands' expected failures become `CliError`s."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.ClickException:
            raise
        except tuple(_EXPECTED) as exc:
            raise CliError(str(exc) or type(exc).__name__) from exc
