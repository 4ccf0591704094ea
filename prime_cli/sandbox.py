"""`prime sandbox`: run a command in a sandbox, list and collect sandboxes, build the image.

Thin on purpose: every behaviour lives in the `sandbox` package.
"""

from __future__ import annotations

import sys
from typing import NoReturn

import click

from prime_cli.errors import CliError
from sandbox import SandboxError, SandboxLimits, open_sandbox
from sandbox.factory import BACKENDS

_BACKEND_HELP = (
    "auto: Docker when its image is built, else bubblewrap (local), else an error; "
    "unisolated: no isolation from this machine, only for code you trust."
)


def _fail(message: str) -> NoReturn:
    """The CLI's one error type, with status 2: 1 may be the sandboxed command's own status."""
    raise CliError(message, status=2)


@click.group()
def sandbox() -> None:
    """Isolated sandboxes for running untrusted code (Docker, or local with bubblewrap)."""


@sandbox.command(context_settings={"ignore_unknown_options": True})
@click.option(
    "--backend", type=click.Choice(BACKENDS), default="auto", show_default=True, help=_BACKEND_HELP
)
@click.option(
    "--image", default=None, help="Docker image (default: prime-sandbox/python:bookworm)."
)
@click.option(
    "--timeout",
    type=float,
    default=30.0,
    show_default=True,
    help="Seconds before the command is killed.",
)
@click.option(
    "--memory", "memory_mb", type=int, default=512, show_default=True, help="Memory limit in MB."
)
@click.option(
    "--stdin", "use_stdin", is_flag=True, help="Pass this command's stdin to the sandboxed command."
)
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def run(
    backend: str,
    image: str | None,
    timeout: float,
    memory_mb: int,
    use_stdin: bool,
    command: tuple[str, ...],
) -> None:
    """Run COMMAND in a fresh sandbox and exit with its status: prime sandbox run -- python3 -c 'print(1)'."""
    if timeout <= 0 or memory_mb <= 0:
        _fail("--timeout and --memory must be positive")
    data = sys.stdin.buffer.read() if use_stdin else None
    try:
        with open_sandbox(backend, image=image, limits=SandboxLimits(memory_mb=memory_mb)) as box:
            result = box.exec(list(command), stdin=data, timeout=timeout)
    except (SandboxError, ValueError) as exc:
        _fail(str(exc))
    sys.stdout.buffer.write(result.stdout)
    sys.stderr.buffer.write(result.stderr)
    for name, flagged in (("stdout", result.stdout_truncated), ("stderr", result.stderr_truncated)):
        if flagged:
            click.echo(f"[sandbox] {name} truncated", err=True)
    if result.timed_out:
        click.echo(f"[sandbox] timed out after {timeout:g}s", err=True)
    raise SystemExit(124 if result.timed_out else result.exit_code)


def _rows(backend: str) -> list[dict[str, str]]:
    from sandbox import SandboxUnavailable, list_sandboxes

    try:
        return list_sandboxes(backend)
    except SandboxUnavailable as exc:
        _fail(str(exc))


@sandbox.command(name="ls")
@click.option("--backend", type=click.Choice(BACKENDS), default="auto", show_default=True)
def list_command(backend: str) -> None:
    """List sandboxes on this machine (running, and orphans whose owner is gone)."""
    from rich.table import Table

    from prime_cli.messages import output_console

    rows = _rows(backend)
    table = Table("backend", "id", "owner pid", "status")
    for row in rows:
        table.add_row(row["backend"], row["id"], row["owner_pid"], row["status"])
    output_console().print(table if rows else "no sandboxes")


@sandbox.command()
@click.option("--backend", type=click.Choice(BACKENDS), default="auto", show_default=True)
def gc(backend: str) -> None:
    """Remove sandboxes whose owning process is gone, or whose lifetime (TTL) has passed."""
    from sandbox import SandboxUnavailable, reap_orphans

    try:
        reaped = reap_orphans(backend)
    except SandboxUnavailable as exc:
        _fail(str(exc))
    click.echo(f"removed {reaped} orphaned sandbox{'es' if reaped != 1 else ''}")


@sandbox.command(name="build-image")
@click.option("--tag", default=None, help="Image tag (default: prime-sandbox/python:bookworm).")
@click.option("--force", is_flag=True, help="Rebuild even if the tag exists.")
@click.option(
    "--suite", default="bookworm", show_default=True, help="Debian suite for debootstrap."
)
@click.option("--mirror", default=None, help="Debian mirror URL for debootstrap.")
def build_image_command(tag: str | None, force: bool, suite: str, mirror: str | None) -> None:
    """Build the default sandbox image here: debootstrap + docker import (never a pull)."""
    from sandbox.image import build_image
    from sandbox.limits import DEFAULT_IMAGE

    target = tag or DEFAULT_IMAGE
    try:
        how = build_image(
            target,
            force=force,
            suite=suite,
            mirror=mirror,
            say=lambda message: click.echo(message, err=True),
        )
    except SandboxError as exc:
        _fail(str(exc))
    click.echo(f"{target}: {how}")
