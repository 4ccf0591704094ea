"""`--program-on-host`: agent programs (prime_env's Program harness) run as plain subprocesses
of this machine instead of in sandboxes, for programs that need the host (its network, its
tools) and that you trust. Explicit, because a program's code then sees everything you can."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, TypeVar

import click

from prime_env.harnesses.program import ON_HOST_VAR

F = TypeVar("F", bound=Callable[..., Any])


def _set(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    if value:
        os.environ[ON_HOST_VAR] = (
            "1"  # read by every Program of the run, in this process and its children
        )


def program_on_host_option(command: F) -> F:
    return click.option(
        "--program-on-host",
        is_flag=True,
        expose_value=False,
        callback=_set,
        help="run agent programs (Program harnesses) on this machine, not in sandboxes",
    )(command)
