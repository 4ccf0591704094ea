"""`prime env …`: create, build, publish, find, install and fetch environments.

The commands are thin: each parses its arguments, calls a helper module (`scaffold`,
`project`, `publish`, `pull`, `status` beside it, `hub_client.install`) or the hub client, and
renders the answer as a rich table or, with `--output json`, as JSON for scripts. Flags and JSON
shapes follow the stock `prime` client where the commands overlap (docs/cli.md has the table).
Expected failures become a one-line `Error: …` and exit status 1 (`prime_cli.errors`).
"""

from __future__ import annotations

import dataclasses
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import click
from pydantic import TypeAdapter
from rich.table import Table

from hub_client import settings as cfg
from hub_client.client import HubClient, HubError, NotFound
from hub_client.install import (
    InstallError,
    check_distinct_packages,
    choose_installer,
    install_environments,
    resolve,
    run_installer,
    target_python,
)
from prime_cli.env.harbor_import import HarborImportError, import_harbor
from prime_cli.env.project import (
    ProjectError,
    build_distributions,
    bumped_version,
    load_project,
    write_version,
)
from prime_cli.env.publish import (
    PushRefused,
    check_can_push,
    push_environment,
    write_push_metadata,
)
from prime_cli.env.pull import PullError, pull_source
from prime_cli.env.scaffold import TEMPLATES, ScaffoldError, create_scaffold
from prime_cli.env.status import (
    installed_environments,
    match_installed,
    uninstall_command,
)
from prime_cli.errors import CliError, expected
from prime_cli.feedback import console_feedback
from prime_cli.messages import output_console, say
from prime_cli.options import echo_json, output_option, page_of, paging_options
from registry_index.resolve import EnvRef, parse_env_ref
from registry_index.schemas.versions import InstallRecord

expected(HubError, ProjectError, PushRefused, InstallError, ScaffoldError, PullError)
expected(HarborImportError)
expected(cfg.ConfigError)

console = output_console()
err_console = output_console(stderr=True)

SORTS = ("name", "created_at", "updated_at", "downloads", "stars")


def _ref(text: str) -> EnvRef:
    try:
        return parse_env_ref(text)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from exc


def _with_version(ref: EnvRef, version: str | None) -> EnvRef:
    """`-v/--version X` (stock) is the same as `OWNER/NAME@X`; both at once must agree."""
    if version is None:
        return ref
    if ref.spec and ref.spec != version:
        raise click.BadParameter(f"{ref} and --version {version} disagree; give one of them")
    return _ref(f"{ref.owner}/{ref.name}@{version}")


def _client() -> HubClient:
    return HubClient.from_settings(cfg.load_settings(), feedback=console_feedback(err_console))


def _size(num: int | None) -> str:
    if num is None:
        return "-"
    value = float(num)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{num} B"


def _date(value: datetime | None) -> str:
    return str(value or "-")[:19].replace("T", " ")


_TIMESTAMP = TypeAdapter(datetime)


def _iso(value: datetime) -> str:
    """A timestamp as the hub writes it (pydantic's JSON form): `--output json` shows the hub's."""
    return str(_TIMESTAMP.dump_python(value, mode="json"))


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
@click.option(
    "--template",
    type=click.Choice(sorted(TEMPLATES)),
    default="single-turn",
    show_default=True,
    help=(
        "single-turn: an arithmetic SingleTurn; mcp: a ToolLoop whose tools an MCP server "
        "serves; openenv: OpenEnv's echo environment (a server this hub drives)."
    ),
)
def init(name: str, parent: Path, description: str | None, template: str) -> None:
    """Create a working environment package NAME (pyproject, module, README)."""
    dest = create_scaffold(name, parent, description, template)
    if dest.name != name:
        say(
            err_console,
            f"[yellow]note:[/] {name!r} is named {dest.name!r}: environment names are "
            "normalised as pip and the hub spell them (lower case, '-' for '_' and '.'); "
            f"`prime env install OWNER/{dest.name}` installs it, its module is "
            f"{dest.name.replace('-', '_')}",
        )
    say(console, f"Created environment [bold]{dest.name}[/] in {dest}")
    for item in sorted(dest.iterdir()):
        console.print(f"  {item.name}")
    module = dest.name.replace("-", "_")
    edit = f"server/{module}_environment.py" if template == "openenv" else f"{module}.py"
    console.print(f"Next: edit {dest / edit}, then `prime env push {dest}`")


@env.group("import")
def import_group() -> None:
    """Package environments of other formats as environments of this hub."""


@import_group.command("harbor")
@click.argument("source", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option(
    "-o",
    "--output",
    "dest",
    type=click.Path(path_type=Path),
    required=True,
    help="The package directory to write; its last part is the environment's name.",
)
@click.option("--description", help="One-line description (pyproject and README).")
def import_harbor_cmd(source: Path, dest: Path, description: str | None) -> None:
    """Package the Harbor tasks in SOURCE (a task directory, or a directory of them) as an
    environment: instruction.md is the prompt, the task's container (built here from
    environment/Dockerfile, never pulled) the sandbox, tests/test.sh the rubric and
    solution/solve.sh the reference policy."""
    dest, tasks = import_harbor(
        source, dest, description=description, say=lambda m: say(err_console, m)
    )
    say(
        console,
        f"Imported {len(tasks)} Harbor task(s) as environment [bold]{dest.name}[/] in {dest}",
    )
    for task in tasks:
        solution = "reference solution" if task.solution_dir else "no solution"
        console.print(f"  {task.name} ({solution})")
    console.print(f"Next: `prime eval validate {dest}`, then `prime env push {dest}`")


@env.command()
@click.argument("path", type=click.Path(file_okay=False, path_type=Path), default=Path("."))
@click.option(
    "--isolation/--no-isolation",
    default=None,
    help="Build in a fresh isolated environment (default: only when the build backend is not "
    "installed here).",
)
def build(path: Path, isolation: bool | None) -> None:
    """Build the wheel and sdist of the environment at PATH into PATH/dist."""
    project = load_project(path)
    with err_console.status(f"Building {project.name} {project.version} …") as status:
        built = build_distributions(
            project,
            project.root / "dist",
            isolated=isolation,
            on_step=lambda step: status.update(f"Building {project.name}: {step} …"),
        )
    console.print(f"Built {project.name} {project.version}:")
    for item in (built.wheel, built.sdist):
        if item is not None:
            say(console, f"  {item}  ({_size(item.stat().st_size)})")


# --------------------------------------------------------------------------- push


@env.command()
@click.argument(
    "path_arg", metavar="[PATH]", required=False, type=click.Path(file_okay=False, path_type=Path)
)
@click.option(
    "-p",
    "--path",
    type=click.Path(file_okay=False, path_type=Path),
    help="Environment directory (same as PATH; default: the current directory).",
)
@click.option(
    "-n", "--name", help="Environment name; must match [project] name (checked, not renamed)."
)
@click.option("-o", "--owner", help="User or organisation to publish under (default: you).")
@click.option(
    "-v",
    "--visibility",
    type=click.Choice(["public", "private"], case_sensitive=False),
    default=None,
    help="For a new environment (asked on a terminal, default private; public when not asked, "
    "as the hub's default, and said so); an existing one keeps its visibility.",
)
@click.option("--auto-bump", is_flag=True, help="Bump the patch version in pyproject.toml first.")
@click.option("--rc", is_flag=True, help="Bump to the next release candidate (…rcN) first.")
@click.option("--post", is_flag=True, help="Bump to the next post-release (….postN) first.")
@click.option(
    "--dry-run",
    is_flag=True,
    help="Check and build everything, validate against the hub's rules, upload nothing.",
)
@output_option
def push(
    path_arg: Path | None,
    path: Path | None,
    name: str | None,
    owner: str | None,
    visibility: str | None,
    auto_bump: bool,
    rc: bool,
    post: bool,
    dry_run: bool,
    output: str,
) -> None:
    """Validate, build and publish the environment at PATH to the hub."""
    if path_arg is not None and path is not None and path_arg != path:
        raise click.UsageError("give the directory once: PATH or --path")
    bumps = [kind for kind, flag in (("patch", auto_bump), ("rc", rc), ("post", post)) if flag]
    original: bytes | None = None  # pyproject.toml before a bump, restored if the push fails
    if len(bumps) > 1:
        raise click.UsageError("--auto-bump, --rc and --post exclude each other")
    settings = cfg.load_settings()
    if not settings.api_key and not dry_run:
        raise CliError(
            "pushing needs a token: run `prime login --url URL --token TOKEN` or set PRIME_API_KEY"
        )
    project = load_project(path_arg or path or Path("."))
    if name is not None and name != project.name:
        raise CliError(
            f"--name {name} differs from [project] name {project.name!r} in "
            f"{project.root / 'pyproject.toml'}; rename it there (the wheel carries that name)"
        )
    with HubClient.from_settings(settings, feedback=console_feedback(err_console)) as client:
        if settings.api_key:
            who = client.whoami()
            owner = owner or settings.owner or who.username
            check_can_push(who, owner, project)
        elif owner is None:
            owner = settings.owner or "OWNER"
        if bumps:
            new_version = bumped_version(project.version, bumps[0])
            if dry_run:  # check the version it would publish; pyproject.toml stays as it is
                err_console.print(f"would bump {project.version} → {new_version} (dry run)")
                project = dataclasses.replace(project, version=new_version)
            else:
                original = (project.root / "pyproject.toml").read_bytes()
                project = write_version(project, new_version)
                err_console.print(f"bumped the version to {project.version} in pyproject.toml")
        chosen: list[str | None] = []

        def ask(slug: str) -> str | None:
            """Who may see a new environment: asked on a terminal, else the hub's default."""
            answer = None
            if output != "json" and sys.stdin.isatty():
                answer = click.prompt(
                    f"{slug} is new: who may read and install it?",
                    type=click.Choice(["private", "public"]),
                    default="private",
                    err=True,
                )
            chosen.append(answer)
            return answer

        try:
            result = push_environment(
                client,
                project,
                owner,
                visibility=visibility.lower() if visibility else None,
                console=err_console,
                dry_run=dry_run,
                new_visibility=ask,
            )
        except BaseException:
            if original is not None:  # a failed push leaves the version as it was
                (project.root / "pyproject.toml").write_bytes(original)
                err_console.print("the push failed; pyproject.toml keeps its previous version")
            raise
    slug = f"{result.owner}/{result.name}"
    web_url = f"{settings.hub_url}/{result.owner}/{result.name}"
    meta = None if dry_run else write_push_metadata(project, result)
    if output == "json":
        echo_json(
            {
                "environment": slug,
                "version": result.version,
                "dry_run": dry_run,
                "created": result.created,
                "environment_id": result.environment_id or None,
                "content_hash": result.content_hash,
                "wheel": result.wheel_filename,
                "wheel_sha256": result.wheel_sha256,
                "source": result.source_filename,
                "url": None if dry_run else web_url,
                "install": f"prime env install {slug}@{result.version}",
            }
        )
        return
    if chosen == [None]:  # a new environment, made public by default without asking
        err_console.print(
            f"{slug} is public (the default for a new environment when not asked): anyone can "
            "read and install it. --visibility private on a new environment's first push keeps "
            f"it to you; the hub's API changes it later (PATCH /api/v1/environmentshub/{slug} "
            '{"visibility": "private"})',
            markup=False,
            highlight=False,
        )
    if dry_run:
        console.print(f"Dry run: [bold]{slug}@{result.version}[/] is ready to push; nothing sent")
    else:
        console.print(
            f"Pushed [bold]{slug}@{result.version}[/] "
            f"({'new environment' if result.created else 'new version'})"
        )
    console.print(f"  wheel   {result.wheel_filename}  sha256 {result.wheel_sha256[:16]}…")
    console.print(f"  source  {result.source_filename}  content hash {result.content_hash[:16]}…")
    if not dry_run:
        say(console, f"  web     {web_url}")
        console.print(f"  install prime env install {slug}@{result.version}")
        say(console, f"  record  {meta}")


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
@click.option(
    "--no-upgrade",
    is_flag=True,
    help="Leave an environment that is already installed (any version) as it is.",
)
@output_option
def install(
    refs: tuple[str, ...],
    python: str | None,
    installer: str,
    prerelease: bool,
    no_upgrade: bool,
    output: str,
) -> None:
    """Install OWNER/NAME[@VERSION] … from the hub into a Python environment.

    Each name is resolved by the hub first (unknown names stop here, they never fall through to
    another index); the exact wheel is downloaded and checked against the hub's sha256, then
    installed as a local file; its dependencies come from your normal package index.
    """
    parsed = [_ref(text) for text in refs]
    interpreter = target_python(python)
    tool = choose_installer(installer)
    skipped: list[str] = []
    if no_upgrade:
        present = installed_environments(interpreter)
        keep = []
        for ref in parsed:
            try:
                match_installed([ref.name], present)
            except InstallError:
                keep.append(ref)
            else:
                skipped.append(f"{ref.owner}/{ref.name}")
        parsed = keep
    for slug in skipped:
        err_console.print(f"{slug} is already installed; left as it is (--no-upgrade)")
    resolved = []
    placed: dict[str, str] = {}
    if parsed:
        with _client() as client:
            with err_console.status(
                f"Resolving {', '.join(map(str, parsed))} on {client.base_url} …"
            ):
                resolved = [resolve(client, ref) for ref in parsed]
            check_distinct_packages(resolved)
            for item in resolved:
                if item.yanked:
                    reason = f": {item.yanked_reason}" if item.yanked_reason else ""
                    err_console.print(
                        f"[yellow]warning:[/] {item.ref.owner}/{item.ref.name} {item.version} "
                        f"is yanked{reason}"
                    )
            say(err_console, f"Installing with {tool} into {interpreter}")
            placed = install_environments(
                client, resolved, interpreter, tool, prerelease=prerelease
            )
    rows = [
        {
            "environment": f"{item.ref.owner}/{item.ref.name}",
            "version": item.version,
            "package": item.package_name,
            "visibility": item.visibility,
            "sha256": item.wheel_sha256,
            "python": placed.get(item.package_name, interpreter),
        }
        for item in resolved
    ]
    if output == "json":
        echo_json({"installed": rows, "skipped": skipped, "installer": tool})
        return
    if not rows:
        return
    table = Table(title="Installed")
    for column in ("environment", "version", "package", "visibility"):
        table.add_column(column)
    for row in rows:
        table.add_row(row["environment"], row["version"], row["package"], row["visibility"])
    console.print(table)


@env.command()
@click.argument("names", nargs=-1, required=True)
@click.option("--python", "python", help="Interpreter to remove from (default: this one).")
@click.option(
    "--with",
    "installer",
    type=click.Choice(["auto", "uv", "pip"]),
    default="auto",
    show_default=True,
)
def uninstall(names: tuple[str, ...], python: str | None, installer: str) -> None:
    """Uninstall environments by NAME, OWNER/NAME or package name."""
    interpreter = target_python(python)
    chosen = match_installed(list(names), installed_environments(interpreter))
    packages = [item.package for item in chosen]
    run_installer(
        uninstall_command(packages, interpreter, choose_installer(installer)),
        on_output=console_feedback(err_console).installer_output,
    )
    for item in chosen:
        console.print(f"Uninstalled {item.package} {item.version}")


@env.command()
@click.argument("ref", required=False)
@click.option("--python", "python", help="Interpreter to inspect (default: this one).")
@output_option
def status(ref: str | None, python: str | None, output: str) -> None:
    """Installed environments, their versions and sources (like `pip list`).

    With OWNER/NAME, the environment's status on the hub instead (as the stock client).
    """
    if ref is not None:
        _hub_status(_ref(ref), output)
        return
    interpreter = target_python(python)
    found = installed_environments(interpreter)
    if output == "json":
        echo_json({"python": interpreter, "environments": [item.as_json() for item in found]})
        return
    if not found:
        say(console, f"No environments installed in {interpreter}; try `prime env install`.")
        return
    table = Table(title=f"Environments installed in {interpreter}")
    for column in ("environment", "package", "version", "source"):
        table.add_column(column, overflow="fold")
    for item in found:
        table.add_row(", ".join(item.environments), item.package, item.version, item.source)
    console.print(table)


def _hub_status(ref: EnvRef, output: str) -> None:
    with _client() as client:
        summary = client.environment(ref.owner, ref.name)
        try:
            latest: InstallRecord | None = client.version(ref.owner, ref.name, None)
        except NotFound:
            latest = None
    data = {
        "name": summary.name,
        "description": summary.description,
        "visibility": summary.visibility.upper(),
        "latest_version": None
        if latest is None
        else latest.model_dump(
            mode="json", include={"semantic_version", "content_hash", "created_at"}
        ),
    }
    if output == "json":
        echo_json(data)
        return
    console.print(f"[bold]{ref.owner}/{data['name']}[/]  {data['visibility']}")
    if data["description"]:
        console.print(f"  {data['description']}")
    if latest is None:
        console.print("  no installable version")
    else:
        console.print(
            f"  latest {latest.semantic_version}  hash "
            f"{(latest.content_hash or '-')[:12]}  {_date(latest.created_at)}"
        )


@env.command()
@click.argument("ref")
@click.option(
    "-t",
    "--target",
    type=click.Path(file_okay=False, path_type=Path),
    help="Directory to extract into (default: ./NAME-VERSION).",
)
@click.option("-v", "--version", help="Version to pull (same as OWNER/NAME@VERSION).")
def pull(ref: str, target: Path | None, version: str | None) -> None:
    """Download and safely extract the source of OWNER/NAME[@VERSION]."""
    env_ref = _with_version(_ref(ref), version)
    with _client() as client:
        dest, got = pull_source(client, env_ref, target)
    say(console, f"Pulled {env_ref.owner}/{env_ref.name}@{got} into {dest}")


# --------------------------------------------------------------------------- read


def _list_envs(
    *,
    search: str | None,
    owner: str | None,
    tags: tuple[str, ...],
    visibility: str | None,
    sort: str | None,
    order: str | None,
    num: int,
    page: int,
    offset: int | None,
    mine: bool,
    starred: bool,
    output: str,
) -> None:
    if starred:
        raise CliError("this hub has no stars; try --sort downloads or --mine")
    if sort == "stars":
        err_console.print("this hub has no stars; sorting by downloads")
        sort = "downloads"
    page = page_of(page, num, offset)
    with _client() as client:
        listing = client.list_environments(
            search=search,
            tags=tags,
            owner=owner,
            visibility=visibility.lower() if visibility else None,
            mine=mine,
            sort=sort,
            order=order.lower() if order else None,
            page=page,
            per_page=num,
        )
    items, total = listing.data, listing.total_count
    if output == "json":
        echo_json(
            {
                # the stock client's shape first (`environments[].environment`, `total`, …)
                "environments": [
                    {
                        "environment": f"{item.owner.name}/{item.name}",
                        "description": item.description,
                        "visibility": item.visibility.upper(),
                        "version": item.latest_version,
                        "stars": 0,
                        "updated_at": _iso(item.updated_at),
                        "tags": item.tags,
                        # ours
                        "owner": item.owner.name,
                        "name": item.name,
                        "downloads": item.downloads,
                        "created_at": _iso(item.created_at),
                    }
                    for item in items
                ],
                "total": total,
                "offset": (page - 1) * num,
                "limit": num,
                "page": page,
                "per_page": num,
            }
        )
        return
    table = Table(title=f"Environments ({len(items)} of {total}, page {page})")
    table.add_column("environment", no_wrap=True)
    table.add_column("latest", no_wrap=True)
    table.add_column("visibility", no_wrap=True)
    table.add_column("downloads", justify="right")
    table.add_column("tags")
    table.add_column("description", ratio=1)
    for item in items:
        table.add_row(
            f"{item.owner.name}/{item.name}",
            item.latest_version or "-",
            item.visibility,
            str(item.downloads),
            ", ".join(item.tags),
            item.description,
        )
    console.print(table)
    if (page - 1) * num + len(items) < total:
        console.print(f"[dim]next page: --page {page + 1}[/]")


def _listing_options(func: Any) -> Any:
    decorators = [
        click.option("--owner", help="Only this owner's environments."),
        click.option("-t", "--tag", "tags", multiple=True, help="Only with this tag (repeatable)."),
        click.option(
            "--visibility", type=click.Choice(["public", "private"], case_sensitive=False)
        ),
        click.option("--sort", type=click.Choice(SORTS), help="stars (stock) sorts by downloads"),
        click.option("--order", type=click.Choice(["asc", "desc"], case_sensitive=False)),
        paging_options(),
        click.option("--mine", is_flag=True, help="Only environments you own."),
        click.option("--starred", is_flag=True, hidden=True),
        output_option,
    ]
    for decorator in reversed(decorators):
        func = decorator(func)
    return func


@env.command("list")
@click.option("-s", "--search", help="Substring of the name or description.")
@_listing_options
def list_cmd(**kwargs: Any) -> None:
    """List the environments you can see."""
    _list_envs(**kwargs)


@env.command()
@click.argument("query")
@_listing_options
def search(query: str, **kwargs: Any) -> None:
    """Search environments by name and description."""
    _list_envs(search=query, **kwargs)


@env.command()
@click.argument("ref")
@click.option("-v", "--version", help="Version to show (same as OWNER/NAME@VERSION).")
@output_option
def info(ref: str, version: str | None, output: str) -> None:
    """Show one environment, or one version with OWNER/NAME@VERSION."""
    env_ref = _with_version(_ref(ref), version)
    with _client() as client:
        summary = client.environment(env_ref.owner, env_ref.name)
        record: InstallRecord | None = None
        try:
            record = client.version(env_ref.owner, env_ref.name, env_ref.spec)
        except NotFound:
            if env_ref.spec:  # an explicit version that does not exist is an error
                raise
    if output == "json":
        echo_json(
            {
                "environment": summary.model_dump(mode="json"),
                "version": record.model_dump(mode="json") if record else None,
            }
        )
        return
    table = Table(show_header=False, title=f"{env_ref.owner}/{summary.name}")
    table.add_column("field", style="bold")
    table.add_column("value", overflow="fold")
    table.add_row("description", summary.description or "-")
    table.add_row("visibility", summary.visibility)
    table.add_row("tags", ", ".join(summary.tags) or "-")
    table.add_row("versions", str(summary.versions_count))
    table.add_row("downloads", str(summary.downloads))
    if record is None:
        table.add_row("version", "none installable (none pushed yet, or all yanked)")
        console.print(table)
        return
    table.add_row("version", record.semantic_version + (" (yanked)" if record.yanked else ""))
    table.add_row("package", record.package_name)
    table.add_row("requires-python", record.requires_python or "-")
    table.add_row("dependencies", ", ".join(record.requires_dist) or "-")
    table.add_row("content hash", record.content_hash or "-")
    table.add_row("wheel", record.wheel_filename or "-")
    table.add_row("index", record.simple_index_url or "-")
    table.add_row(
        "install",
        f"prime env install {env_ref.owner}/{summary.name}@{record.semantic_version}",
    )
    console.print(table)


@env.command()
@click.argument("ref")
@output_option
def versions(ref: str, output: str) -> None:
    """List every version of OWNER/NAME, newest first (yanked ones marked)."""
    env_ref = _ref(ref)
    with _client() as client:
        items = client.versions(env_ref.owner, env_ref.name)
    if output == "json":
        echo_json(
            {
                "environment": f"{env_ref.owner}/{env_ref.name}",
                "versions": [item.model_dump(mode="json") for item in items],
            }
        )
        return
    table = Table(title=f"{env_ref.owner}/{env_ref.name} versions")
    table.add_column("version", no_wrap=True)
    table.add_column("yanked")
    table.add_column("content hash", no_wrap=True)
    table.add_column("downloads", justify="right")
    table.add_column("created", no_wrap=True)
    table.add_column("files", ratio=1, overflow="fold")
    for item in items:
        yanked = "yes" + (f" ({item.yanked_reason})" if item.yanked_reason else "")
        table.add_row(
            item.semantic_version,
            yanked if item.yanked else "",
            (item.content_hash or "-")[:12],
            str(item.downloads),
            _date(item.created_at),
            "\n".join(f.filename for f in item.files),
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
def yank(ref: str, reason: str | None) -> None:
    """Yank OWNER/NAME@VERSION: hidden from new resolutions, still installable by exact pin."""
    env_ref = _exact_version(ref)
    with _client() as client:
        data = client.set_yanked(env_ref.owner, env_ref.name, env_ref.spec or "", True, reason)
    console.print(f"Yanked {env_ref.owner}/{env_ref.name}@{data.semantic_version}")


@env.command()
@click.argument("ref")
def unyank(ref: str) -> None:
    """Undo a yank of OWNER/NAME@VERSION."""
    env_ref = _exact_version(ref)
    with _client() as client:
        data = client.set_yanked(env_ref.owner, env_ref.name, env_ref.spec or "", False)
    console.print(f"Unyanked {env_ref.owner}/{env_ref.name}@{data.semantic_version}")
