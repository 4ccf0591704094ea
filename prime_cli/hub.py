"""`prime hub …`: run and administer a self-hosted hub (no running server needed for admin).

The commands are thin: settings come from `--data-dir` or `PRIME_HUB_*` variables, and the
work is done by `hub_server.admin` / `hub_server.app`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

if TYPE_CHECKING:
    from fastapi import FastAPI
    from sqlalchemy.engine import Engine

    from hub_server.core.settings import HubSettings

T = TypeVar("T")

_DATA_DIR = click.option(
    "--data-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Hub data directory (default: $PRIME_HUB_DATA_DIR or ~/.local/share/prime-hub).",
)


def _settings(data_dir: Path | None) -> HubSettings:
    from pydantic import ValidationError

    from hub_server.core.settings import HubSettings

    try:
        return HubSettings.from_env(data_dir)
    except ValidationError as exc:
        problems = "; ".join(f"{e['loc'][0]}: {e['msg']}" for e in exc.errors())
        raise click.ClickException(f"Invalid PRIME_HUB_* setting: {problems}") from None


def _engine(data_dir: Path | None) -> Engine:
    from hub_server.admin import open_database

    settings = _settings(data_dir)
    try:
        return open_database(settings)
    except Exception as exc:  # noqa: BLE001 - any database/setting problem is a usage error here
        raise click.ClickException(f"Cannot open the hub database: {exc}") from None


def _admin_call(func: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    from hub_server.admin import AdminError

    try:
        return func(*args, **kwargs)
    except AdminError as exc:
        raise click.ClickException(str(exc)) from None


@click.group()
def hub() -> None:
    """Run and administer a self-hosted Environments Hub."""


@hub.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface to listen on.")
@click.option("--port", default=8000, show_default=True, type=click.IntRange(1, 65535))
@_DATA_DIR
@click.option("--workers", default=1, show_default=True, type=click.IntRange(1, 64))
@click.option(
    "--with-builtins",
    is_flag=True,
    help="Once the server answers, publish the built-in environments under owner `prime`.",
)
@click.option(
    "--forwarded-allow-ips",
    envvar="PRIME_HUB_FORWARDED_ALLOW_IPS",
    default=None,
    help="Proxies (comma-separated IPs, or '*') whose X-Forwarded-For is believed for the "
    "client address (rate limits, logs). Default: none, the socket's peer is the client.",
)
@click.option(
    "--lab",
    is_flag=True,
    help="Also serve the Lab at /lab: the Tinker API for LoRA training by `train`-scoped "
    "tokens (TINKER_BASE_URL=http://HOST:PORT/lab; docs/lab.md). Needs prime-envhub[lab].",
)
@click.option(
    "--lab-model",
    default="local/smollm2-135m",
    show_default=True,
    help="The Lab's base model: local/<name> or a Hugging Face model directory.",
)
@click.option(
    "--lab-engine",
    type=click.Choice(["torch", "vllm"]),
    default="torch",
    show_default=True,
    help="What samples for the Lab: the torch engine that trains, or a vLLM server beside it "
    "(multi-LoRA; `prime engine install vllm`); training is the torch engine's either way.",
)
@click.option(
    "--lab-max-lora-rank",
    type=click.IntRange(1, 256),
    default=32,
    show_default=True,
    help="With --lab-engine vllm: the largest LoRA rank the Lab admits (vLLM's "
    "--max-lora-rank; its CPU LoRA kernels compute at this rank whatever an adapter's).",
)
def serve(
    host: str,
    port: int,
    data_dir: Path | None,
    workers: int,
    with_builtins: bool,
    forwarded_allow_ips: str | None,
    lab: bool,
    lab_model: str,
    lab_engine: str,
    lab_max_lora_rank: int,
) -> None:
    """Start the hub server (uvicorn)."""
    import uvicorn

    from hub_server.core.blobstore import BlobStore
    from hub_server.http.http_protocol import ReasonPhraseH11Protocol

    settings = _settings(data_dir)
    os.environ["PRIME_HUB_DATA_DIR"] = str(settings.data_dir)
    _engine(settings.data_dir).dispose()  # migrate once, before workers start
    try:
        BlobStore(settings.resolved_storage_url, settings.s3_endpoint_url).exists("sha256")
    except Exception as exc:  # noqa: BLE001 - report any storage problem before serving
        raise click.ClickException(
            f"Cannot open the blob store {settings.resolved_storage_url}: {exc}"
        ) from None
    factory = "hub_server.app:create_app"
    if lab:
        if workers != 1:
            raise click.UsageError("--lab holds its models in memory: run it with --workers 1.")
        try:
            import tinker  # noqa: F401

            import trainer_bridge.lab.engine  # noqa: F401
        except ImportError as exc:
            raise click.ClickException(
                f"--lab needs the Lab's packages ({exc.name}): pip install 'prime-envhub[lab]'"
            ) from None
        if lab_engine == "vllm":
            from engines.install import EngineError, find_vllm

            try:
                find_vllm()
            except EngineError as exc:
                raise click.ClickException(f"--lab-engine vllm: {exc}") from None
        os.environ[LAB_MODEL_ENV] = lab_model
        os.environ[LAB_ENGINE_ENV] = lab_engine
        os.environ[LAB_MAX_LORA_RANK_ENV] = str(lab_max_lora_rank)
        factory = "prime_cli.hub:create_lab_hub"
    click.echo(f"Hub data in {settings.data_dir}; listening on http://{host}:{port}/")
    if lab:
        click.echo(
            f"Lab ({lab_model}, sampling by {lab_engine}) at http://{host}:{port}/lab "
            "(TINKER_BASE_URL)"
        )
    if with_builtins:
        _seed_when_up(f"http://{_client_host(host)}:{port}", settings.data_dir)
    uvicorn.run(
        factory,
        factory=True,
        host=host,
        port=port,
        workers=workers,
        http=ReasonPhraseH11Protocol,  # type: ignore[arg-type]
        log_level="info",
        # uvicorn trusts X-Forwarded-For from 127.0.0.1 by default: any local client could
        # then pick its own address for the rate limits. Only named proxies are believed.
        proxy_headers=bool(forwarded_allow_ips),
        forwarded_allow_ips=forwarded_allow_ips or "",
    )


LAB_MODEL_ENV = "PRIME_HUB_LAB_MODEL"
LAB_ENGINE_ENV = "PRIME_HUB_LAB_ENGINE"
LAB_MAX_LORA_RANK_ENV = "PRIME_HUB_LAB_MAX_LORA_RANK"


def create_lab_hub() -> FastAPI:
    """uvicorn's factory for `prime hub serve --lab`: the hub with its Lab's engine, the torch
    engine or the torch engine with a vLLM server sampling (built here: the hub never imports
    torch or the trainer). uvicorn calls it on its main thread, which the vLLM server's
    lifetime follows."""
    from hub_server.app import create_app

    model = os.environ.get(LAB_MODEL_ENV, "local/smollm2-135m")
    if os.environ.get(LAB_ENGINE_ENV) == "vllm":
        import time

        from engines.serving import log_dir
        from trainer_bridge.lab.vllm_engine import start_vllm_lab

        log = log_dir() / f"{time.strftime('%Y%m%d-%H%M%S')}-lab.log"
        rank = int(os.environ.get(LAB_MAX_LORA_RANK_ENV, "32"))
        return create_app(lab=start_vllm_lab(model, max_lora_rank=rank, log=log, say=click.echo))
    from trainer_bridge.lab.engine import TorchLabEngine

    return create_app(lab=TorchLabEngine(model))


@hub.group()
def user() -> None:
    """Manage users."""


@user.command("add")
@click.argument("name")
@click.option("--admin", is_flag=True, help="Make the user a server administrator.")
@click.option("--token-name", default="default", show_default=True, help="Name of the first token.")
@_DATA_DIR
def user_add(name: str, admin: bool, token_name: str, data_dir: Path | None) -> None:
    """Create user NAME (and namespace NAME/); prints a new token as the last line."""
    from hub_server.admin import create_token, create_user

    engine = _engine(data_dir)
    created = _admin_call(create_user, engine, name, admin=admin)
    secret, _row = _admin_call(create_token, engine, created.username, token_name, ["all"])
    role = "admin" if admin else "user"
    click.echo(f"Created {role} {name!r} with namespace {name}/ and token {token_name!r}:")
    click.echo(secret)


@user.command("disable")
@click.argument("name")
@click.option("--enable", is_flag=True, help="Re-enable a disabled user instead.")
@_DATA_DIR
def user_disable(name: str, enable: bool, data_dir: Path | None) -> None:
    """Disable user NAME: their tokens stop working at once, on every route."""
    from hub_server.admin import disable_user

    _admin_call(disable_user, _engine(data_dir), name, disabled=not enable)
    click.echo(f"{'Enabled' if enable else 'Disabled'} user {name!r}.")


@user.command("delete")
@click.argument("name")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@_DATA_DIR
def user_delete(name: str, yes: bool, data_dir: Path | None) -> None:
    """Delete user NAME: tokens revoked, memberships removed; files and runs stay."""
    from hub_server.admin import delete_user

    if not yes:
        click.confirm(f"Delete user {name!r} for good?", abort=True)
    _admin_call(delete_user, _engine(data_dir), name)
    click.echo(f"Deleted user {name!r}; the name stays reserved.")


@hub.group()
def org() -> None:
    """Manage organisations."""


@org.command("add")
@click.argument("name")
@click.option("--member", "members", multiple=True, help="A member's user name (repeatable).")
@_DATA_DIR
def org_add(name: str, members: tuple[str, ...], data_dir: Path | None) -> None:
    """Create organisation NAME (namespace NAME/) with its members."""
    from hub_server.admin import create_org

    _admin_call(create_org, _engine(data_dir), name, list(members))
    listed = ", ".join(members) or "no members yet"
    click.echo(f"Created organisation {name!r} ({listed}).")


@org.command("add-member")
@click.argument("name")
@click.argument("users", nargs=-1, required=True)
@_DATA_DIR
def org_add_member(name: str, users: tuple[str, ...], data_dir: Path | None) -> None:
    """Add USERS to organisation NAME."""
    from hub_server.admin import add_members

    _admin_call(add_members, _engine(data_dir), name, list(users))
    click.echo(f"Added {', '.join(users)} to {name!r}.")


@org.command("remove-member")
@click.argument("name")
@click.argument("member")
@_DATA_DIR
def org_remove_member(name: str, member: str, data_dir: Path | None) -> None:
    """Remove MEMBER from organisation NAME (effective at once)."""
    from hub_server.admin import remove_member

    _admin_call(remove_member, _engine(data_dir), name, member)
    click.echo(f"Removed {member} from {name!r}.")


@hub.group()
def token() -> None:
    """Manage API tokens."""


@token.command("create")
@click.argument("username")
@click.option("--name", "token_name", default="cli", show_default=True, help="Token label.")
@click.option(
    "--scope",
    "scopes",
    multiple=True,
    help="all | read | train | upload:OWNER | upload:OWNER/NAME (repeatable; default all).",
)
@_DATA_DIR
def token_create(
    username: str, token_name: str, scopes: tuple[str, ...], data_dir: Path | None
) -> None:
    """Create a token for USERNAME; prints the token as the last line (shown only once)."""
    from hub_server.admin import create_token

    secret, row = _admin_call(create_token, _engine(data_dir), username, token_name, list(scopes))
    click.echo(f"Token {token_name!r} for {username} with scopes: {row.scopes}")
    click.echo(secret)


@token.command("list")
@click.argument("username")
@_DATA_DIR
def token_list(username: str, data_dir: Path | None) -> None:
    """List USERNAME's tokens: id, name, scopes, created, last used (never the secret)."""
    from hub_server.admin import list_tokens

    def when(value: object) -> str:
        return f"{value:%Y-%m-%d %H:%M}" if value is not None else "-"

    rows = _admin_call(list_tokens, _engine(data_dir), username)
    click.echo("id\tname\tscopes\tcreated\tlast used\trevoked")
    for row in rows:
        click.echo(
            f"{row.id}\t{row.name}\t{row.scopes}\t{when(row.created_at)}\t"
            f"{when(row.last_used_at)}\t{when(row.revoked_at)}"
        )


@token.command("revoke")
@click.argument("secret", required=False)
@click.option("--id", "token_id", help="The token's id (from `prime hub token list`).")
@_DATA_DIR
def token_revoke(secret: str | None, token_id: str | None, data_dir: Path | None) -> None:
    """Revoke a token by its SECRET or by --id."""
    from hub_server.admin import revoke_token, revoke_token_id

    if (secret is None) == (token_id is None):
        raise click.UsageError("Give either the token SECRET or --id ID.")
    engine = _engine(data_dir)
    if token_id is not None:
        _admin_call(revoke_token_id, engine, token_id)
    else:
        _admin_call(revoke_token, engine, secret)
    click.echo("Token revoked.")


@hub.command()
@click.option(
    "--url",
    default=None,
    help="The running hub (default: the one `prime` is configured for: PRIME_HUB_URL, "
    "PRIME_API_BASE_URL, PRIME_BASE_URL or `prime login`, else http://127.0.0.1:8000).",
)
@_DATA_DIR
def seed(url: str | None, data_dir: Path | None) -> None:
    """Publish the built-in environments under owner `prime` (the hub serves their SDK itself).

    Talks to the running hub at URL over its upload endpoint, with a short-lived token of user
    `prime` made in the hub's database (DATA_DIR); safe to run again.
    """
    if url is None:
        from hub_client.settings import ConfigError, load_settings  # the client's own settings

        try:
            url = load_settings().hub_url
        except ConfigError as exc:
            raise click.ClickException(str(exc)) from exc
    uploaded = _seed(url, _settings(data_dir).data_dir)
    click.echo(f"Seeded {url}/prime/: {len(uploaded)} new file(s)")
    for name in uploaded:
        click.echo(f"  {name}")


def _seed(url: str, data_dir: Path) -> list[str]:
    """Build and upload the built-ins as user `prime`; the token is revoked afterwards."""
    try:
        from builtin_envs.publish import OWNER, PublishError, publish_builtins
    except ModuleNotFoundError:
        raise click.ClickException(
            "Seeding needs a source checkout of prime-envhub (builtin_envs/ beside prime_cli/); "
            "run it from the repository."
        ) from None
    from hub_server.admin import create_token, ensure_user, revoke_token

    engine = _engine(data_dir)
    _admin_call(ensure_user, engine, OWNER)
    secret, _row = _admin_call(create_token, engine, OWNER, "seed", [f"upload:{OWNER}"])
    try:
        return publish_builtins(url, secret, on_step=lambda line: click.echo(line, err=True))
    except PublishError as exc:
        raise click.ClickException(f"Publishing the built-in environments failed: {exc}") from None
    finally:
        revoke_token(engine, secret)


def _client_host(host: str) -> str:
    """The address a local client uses to reach a server bound to `host`."""
    return {"0.0.0.0": "127.0.0.1", "::": "[::1]"}.get(host, host)


def _seed_when_up(url: str, data_dir: Path) -> None:
    """Seed from a background thread once the server (started next, in this process) answers."""
    import threading
    import time

    import httpx

    def run() -> None:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        else:
            click.echo("--with-builtins: the hub did not come up; nothing was published", err=True)
            return
        try:
            uploaded = _seed(url, data_dir)
        except click.ClickException as exc:
            click.echo(f"--with-builtins: {exc.format_message()}", err=True)
            return
        click.echo(f"--with-builtins: published {len(uploaded)} new file(s) under {url}/prime/")

    threading.Thread(target=run, name="seed-builtins", daemon=True).start()


def local_viewer(runs: list[dict[str, Any]]) -> Any:
    """The hub's run and compare pages over runs read from this machine (`prime eval view`):
    each dict is a `hub_server.web.local_view.LocalRun`'s fields. hub_server loads here."""
    from hub_server.web.local_view import LocalRun, viewer_app

    return viewer_app([LocalRun(**run) for run in runs])
