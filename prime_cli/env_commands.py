"""`prime env …`: create, build, publish, find, install and fetch environments.

The commands are thin: each parses its arguments, calls a helper module (`env_scaffold`,
`env_project`, `env_publish`, `env_install`, `env_pull`) or the hub client, and renders the
answer as a rich table or, with `--output json`, as JSON for scripts. Every expected failure is
turned into a one-line `Error: …` and exit status 1 by `_errors`.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, ParamSpec, TypeVar
from urllib.parse import quote

import click
from rich.console import Console
from rich.table import Table

from prime_cli import config as cfg
from prime_cli.account_commands import fetch_whoami
from prime_cli.env_install import (
    InstallError,
    check_distinct_packages,
    choose_installer,
    fetch_wheel,
    install_command,
    resolve,
    run_installer,
    target_python,
)
from prime_cli.env_project import ProjectError, build_distributions, load_project
from prime_cli.env_publish import PushRefused, push_environment, write_push_metadata
from prime_cli.env_pull import PullError, pull_source
from prime_cli.env_scaffold import ScaffoldError, create_scaffold
from prime_cli.hub_client import HubClient, HubError, NotFound, env_path
from registry_index.resolve import EnvRef, parse_env_ref

console = Console()
err_console = Console(stderr=True)

P = ParamSpec("P")
R = TypeVar("R")

_EXPECTED = (
    HubError,
    ProjectError,
    PushRefused,
    InstallError,
    ScaffoldError,
    PullError,
    cfg.ConfigError,
    OSError,
)

OUTPUT = click.option(
    "--output",
    type=click.Choice(["table", "json"]),
    default="table",
    show_default=True,
    help="table for people, json for scripts",
)


def _errors(func: Callable[P, R]) -> Callable[P, R]:
    """Turn the failures a user can fix into `Error: <one line>` and exit status 1."""

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return func(*args, **kwargs)
        except _EXPECTED as exc:
            raise click.ClickException(str(exc)) from exc

    return wrapper


def _ref(text: str) -> EnvRef:
    try:
        return parse_env_ref(text)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from exc


def _client() -> HubClient:
    return HubClient.from_settings(cfg.load_settings(), console=err_console)


def _echo_json(payload: Any) -> None:
    click.echo(json.dumps(payload, indent=2, sort_keys=False))


def _size(num: int | None) -> str:
    if num is None:
        return "-"
    value = float(num)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{num} B"


def _date(value: Any) -> str:
    return str(value or "-")[:19].replace("T", " ")


# --------------------------------------------------------------------------- init / build


@click.group()
def env() -> None:
    """Create, publish, find and install environments."""


@env.command()
@click.argument("name")
@click.option(
    "--path",
    "parent",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("."),
    show_default=True,
    help="Directory to create the environment in.",
)
@click.option("--description", help="One-line description (pyproject and README).")
@_errors
def init(name: str, parent: Path, description: str | None) -> None:
    """Create a working environment package NAME (pyproject, module, README)."""
    dest = create_scaffold(name, parent, description)
    console.print(f"Created environment [bold]{dest.name}[/] in {dest}")
    for item in sorted(dest.iterdir()):
        console.print(f"  {item.name}")
    console.print(
        f"Next: edit {dest / (dest.name.replace('-', '_') + '.py')}, then `prime env push {dest}`"
    )


@env.command()
@click.argument("path", type=click.Path(file_okay=False, path_type=Path), default=Path("."))
@click.option(
    "--isolation/--no-isolation",
    default=None,
    help="Build in a fresh isolated environment (default: only when the build backend is not "
    "installed here).",
)
@_errors
def build(path: Path, isolation: bool | None) -> None:
    """Build the wheel and sdist of the environment at PATH into PATH/dist."""
    project = load_project(path)
    built = build_distributions(project, project.root / "dist", isolated=isolation)
    console.print(f"Built {project.name} {project.version}:")
    for item in (built.wheel, built.sdist):
        if item is not None:
            console.print(f"  {item}  ({_size(item.stat().st_size)})")


# --------------------------------------------------------------------------- push


@env.command()
@click.argument("path", type=click.Path(file_okay=False, path_type=Path), default=Path("."))
@click.option(
    "--visibility",
    type=click.Choice(["public", "private"], case_sensitive=False),
    default=None,
    help="For a new environment (default public); an existing one keeps its visibility.",
)
@click.option("--owner", help="User or organisation to publish under (default: you).")
@_errors
def push(path: Path, visibility: str | None, owner: str | None) -> None:
    """Validate, build and publish the environment at PATH to the hub."""
    settings = cfg.load_settings()
    if not settings.api_key:
        raise click.ClickException(
            "pushing needs a token: run `prime login --url URL --token TOKEN` or set PRIME_API_KEY"
        )
    project = load_project(path)
    with HubClient.from_settings(settings, console=err_console) as client:
        owner = owner or settings.owner or str(fetch_whoami(client)["username"])
        result = push_environment(
            client,
            project,
            owner,
            visibility=visibility.lower() if visibility else None,
            console=err_console,
        )
    meta = write_push_metadata(project, result)
    slug = f"{result.owner}/{result.name}"
    console.print(
        f"Pushed [bold]{slug}@{result.version}[/] "
        f"({'new environment' if result.created else 'new version'})"
    )
    console.print(f"  wheel   {result.wheel_filename}  sha256 {result.wheel_sha256[:16]}…")
    console.print(f"  source  {result.source_filename}  content hash {result.content_hash[:16]}…")
    console.print(f"  install prime env install {slug}@{result.version}")
    console.print(f"  record  {meta}")


# --------------------------------------------------------------------------- install / pull


@env.command()
@click.argument("refs", nargs=-1, required=True)
@click.option(
    "--python",
    "python",
    help="Interpreter to install into (default: the one running prime).",
)
@click.option(
    "--with",
    "installer",
    type=click.Choice(["auto", "uv", "pip"]),
    default="auto",
    show_default=True,
    help="Installer: uv when present, else pip.",
)
@click.option("--prerelease", is_flag=True, help="Allow pre-release versions of dependencies.")
@OUTPUT
@_errors
def install(
    refs: tuple[str, ...], python: str | None, installer: str, prerelease: bool, output: str
) -> None:
    """Install OWNER/NAME[@VERSION] … from the hub into a Python environment.

    Each name is resolved by the hub first (unknown names stop here, they never fall through to
    another index); the exact wheel is downloaded and checked against the hub's sha256, then
    installed as a local file; its dependencies come from your normal package index.
    """
    parsed = [_ref(text) for text in refs]
    interpreter = target_python(python)
    tool = choose_installer(installer)
    with _client() as client:
        resolved = [resolve(client, ref) for ref in parsed]
        check_distinct_packages(resolved)
        wheels = {env.package_name: fetch_wheel(client, env) for env in resolved}
    for env in resolved:
        if env.yanked:
            reason = f": {env.yanked_reason}" if env.yanked_reason else ""
            err_console.print(
                f"[yellow]warning:[/] {env.ref.owner}/{env.ref.name} {env.version} is yanked{reason}"
            )
    cmd = install_command(wheels, interpreter, tool, prerelease=prerelease)
    err_console.print(f"Installing with {tool} into {interpreter}")
    run_installer(cmd)
    rows = [
        {
            "environment": f"{env.ref.owner}/{env.ref.name}",
            "version": env.version,
            "package": env.package_name,
            "visibility": env.visibility,
            "sha256": env.wheel_sha256,
            "python": interpreter,
        }
        for env in resolved
    ]
    if output == "json":
        _echo_json({"installed": rows, "installer": tool})
        return
    table = Table(title="Installed")
    for column in ("environment", "version", "package", "visibility"):
        table.add_column(column)
    for row in rows:
        table.add_row(row["environment"], row["version"], row["package"], row["visibility"])
    console.print(table)


@env.command()
@click.argument("ref")
@click.option(
    "--target",
    type=click.Path(file_okay=False, path_type=Path),
    help="Directory to extract into (default: ./NAME-VERSION).",
)
@_errors
def pull(ref: str, target: Path | None) -> None:
    """Download and safely extract the source of OWNER/NAME[@VERSION]."""
    env_ref = _ref(ref)
    with _client() as client:
        dest, version = pull_source(client, env_ref, target)
    console.print(f"Pulled {env_ref.owner}/{env_ref.name}@{version} into {dest}")


# --------------------------------------------------------------------------- read


def _list_envs(
    *,
    search: str | None,
    owner: str | None,
    tags: tuple[str, ...],
    visibility: str | None,
    sort: str | None,
    order: str | None,
    page: int,
    per_page: int,
    mine: bool,
    output: str,
) -> None:
    params: dict[str, Any] = {"page": page, "per_page": per_page}
    for key, value in (
        ("search", search),
        ("owner", owner),
        ("visibility", visibility),
        ("sort", sort),
        ("order", order),
    ):
        if value:
            params[key] = value
    if tags:
        params["tag"] = list(tags)
    if mine:
        params["mine"] = "true"
    with _client() as client:
        body = client.request("GET", "/environmentshub/", "list environments", params=params)
    if not isinstance(body, dict) or not isinstance(body.get("data"), list):
        raise HubError(f"list environments: unexpected answer from {client.base_url}")
    items: list[dict[str, Any]] = body.get("data") or []
    if output == "json":
        _echo_json(
            {
                "environments": items,
                "total_count": body.get("total_count", len(items)),
                "page": body.get("page", page),
                "per_page": body.get("per_page", per_page),
            }
        )
        return
    total = body.get("total_count", len(items))
    table = Table(title=f"Environments ({len(items)} of {total}, page {body.get('page', page)})")
    table.add_column("environment", no_wrap=True)
    table.add_column("latest", no_wrap=True)
    table.add_column("visibility", no_wrap=True)
    table.add_column("downloads", justify="right")
    table.add_column("tags")
    table.add_column("description", ratio=1)
    for item in items:
        owner_info = item.get("owner") or {}
        owner_name = owner_info.get("name") if isinstance(owner_info, dict) else owner_info
        table.add_row(
            f"{owner_name}/{item.get('name')}",
            str(item.get("latest_version") or "-"),
            str(item.get("visibility", "-")),
            str(item.get("downloads", 0)),
            ", ".join(item.get("tags") or []),
            str(item.get("description") or ""),
        )
    console.print(table)


def _listing_options(func: Callable[P, R]) -> Callable[P, R]:
    decorators = [
        click.option("--owner", help="Only this owner's environments."),
        click.option("-t", "--tag", "tags", multiple=True, help="Only with this tag (repeatable)."),
        click.option("--visibility", type=click.Choice(["public", "private"])),
        click.option(
            "--sort", type=click.Choice(["name", "created_at", "updated_at", "downloads"])
        ),
        click.option("--order", type=click.Choice(["asc", "desc"])),
        click.option("-p", "--page", type=click.IntRange(min=1), default=1, show_default=True),
        click.option(
            "-n", "--per-page", type=click.IntRange(1, 100), default=20, show_default=True
        ),
        click.option("--mine", is_flag=True, help="Only environments you own."),
        OUTPUT,
    ]
    for decorator in reversed(decorators):
        func = decorator(func)
    return func


@env.command("list")
@click.option("-s", "--search", help="Substring of the name or description.")
@_listing_options
@_errors
def list_cmd(**kwargs: Any) -> None:
    """List the environments you can see."""
    _list_envs(**kwargs)


@env.command()
@click.argument("query")
@_listing_options
@_errors
def search(query: str, **kwargs: Any) -> None:
    """Search environments by name and description."""
    _list_envs(search=query, **kwargs)


@env.command()
@click.argument("ref")
@OUTPUT
@_errors
def info(ref: str, output: str) -> None:
    """Show one environment, or one version with OWNER/NAME@VERSION."""
    env_ref = _ref(ref)
    with _client() as client:
        summary = client.data(
            "GET", env_path(env_ref.owner, env_ref.name), f"info {env_ref.owner}/{env_ref.name}"
        )
        record: dict[str, Any] | None = None
        try:
            record = client.data(
                "GET",
                f"{env_path(env_ref.owner, env_ref.name)}/@{quote(env_ref.spec or 'latest', safe='')}",
                f"info {env_ref}",
            )
        except NotFound:
            if env_ref.spec:  # an explicit version that does not exist is an error
                raise
    if output == "json":
        _echo_json({"environment": summary, "version": record})
        return
    table = Table(show_header=False, title=f"{env_ref.owner}/{summary.get('name')}")
    table.add_column("field", style="bold")
    table.add_column("value", overflow="fold")
    table.add_row("description", str(summary.get("description") or "-"))
    table.add_row("visibility", str(summary.get("visibility")))
    table.add_row("tags", ", ".join(summary.get("tags") or []) or "-")
    table.add_row("versions", str(summary.get("versions_count", "-")))
    table.add_row("downloads", str(summary.get("downloads", 0)))
    if record is None:
        table.add_row("version", "none installable (none pushed yet, or all yanked)")
        console.print(table)
        return
    table.add_row(
        "version",
        str(record.get("semantic_version")) + (" (yanked)" if record.get("yanked") else ""),
    )
    table.add_row("package", str(record.get("package_name")))
    table.add_row("requires-python", str(record.get("requires_python") or "-"))
    table.add_row("dependencies", ", ".join(record.get("requires_dist") or []) or "-")
    table.add_row("content hash", str(record.get("content_hash") or "-"))
    table.add_row("wheel", str(record.get("wheel_filename") or "-"))
    table.add_row("index", str(record.get("simple_index_url") or "-"))
    table.add_row(
        "install",
        f"prime env install {env_ref.owner}/{summary.get('name')}@{record.get('semantic_version')}",
    )
    console.print(table)


@env.command()
@click.argument("ref")
@OUTPUT
@_errors
def versions(ref: str, output: str) -> None:
    """List every version of OWNER/NAME, newest first (yanked ones marked)."""
    env_ref = _ref(ref)
    with _client() as client:
        items: list[dict[str, Any]] = client.data(
            "GET",
            f"{env_path(env_ref.owner, env_ref.name)}/versions",
            f"versions of {env_ref.owner}/{env_ref.name}",
        )
    if output == "json":
        _echo_json({"environment": f"{env_ref.owner}/{env_ref.name}", "versions": items})
        return
    table = Table(title=f"{env_ref.owner}/{env_ref.name} versions")
    table.add_column("version", no_wrap=True)
    table.add_column("yanked")
    table.add_column("content hash", no_wrap=True)
    table.add_column("downloads", justify="right")
    table.add_column("created", no_wrap=True)
    table.add_column("files", ratio=1, overflow="fold")
    for item in items:
        yanked = "yes" + (f" ({item['yanked_reason']})" if item.get("yanked_reason") else "")
        table.add_row(
            str(item.get("semantic_version")),
            yanked if item.get("yanked") else "",
            str(item.get("content_hash") or "-")[:12],
            str(item.get("downloads", 0)),
            _date(item.get("created_at")),
            "\n".join(str(f.get("filename")) for f in item.get("files") or []),
        )
    console.print(table)


# --------------------------------------------------------------------------- yank


def _exact_version(text: str) -> EnvRef:
    env_ref = _ref(text)
    if not env_ref.spec:
        raise click.BadParameter(f"{text!r} needs an exact version: OWNER/NAME@VERSION")
    return env_ref


@env.command()
@click.argument("ref")
@click.option("--reason", help="Why it is yanked (shown to installers).")
@_errors
def yank(ref: str, reason: str | None) -> None:
    """Yank OWNER/NAME@VERSION: hidden from new resolutions, still installable by exact pin."""
    env_ref = _exact_version(ref)
    with _client() as client:
        data = client.data(
            "POST",
            f"{env_path(env_ref.owner, env_ref.name)}/@{quote(env_ref.spec or '', safe='')}/yank",
            f"yank {env_ref}",
            json={"reason": reason},
        )
    console.print(f"Yanked {env_ref.owner}/{env_ref.name}@{data.get('semantic_version')}")


@env.command()
@click.argument("ref")
@_errors
def unyank(ref: str) -> None:
    """Undo a yank of OWNER/NAME@VERSION."""
    env_ref = _exact_version(ref)
    with _client() as client:
        data = client.data(
            "POST",
            f"{env_path(env_ref.owner, env_ref.name)}/@{quote(env_ref.spec or '', safe='')}/unyank",
            f"unyank {env_ref}",
        )
    console.print(f"Unyanked {env_ref.owner}/{env_ref.name}@{data.get('semantic_version')}")
