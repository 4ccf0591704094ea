"""The environment page (latest version) and one page per version: README, install commands,
files with sizes and hashes, dependencies, Requires-Python, license, yank reason, the training
recipes the wheel ships (registry_index.recipes), leaderboard.

Both read through the same access rule and service functions as the API, so a page never shows
what the API would hide. The install lines come from `registry_index.install_commands` (the
one home of what we tell people to paste), with this hub's public URL.
"""

from __future__ import annotations

import threading
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from sqlmodel import Session

from hub_server.accounts.models import Owner
from hub_server.core.blobstore import BlobStorage
from hub_server.core.errors import HubError, NotFound
from hub_server.evals import service
from hub_server.evals.leaderboard import leaderboard
from hub_server.http.deps import HubDep, SessionDep, public_base
from hub_server.index import api as index_routes
from hub_server.index.sdk import sdk_wheel
from hub_server.registry import service as registry_service
from hub_server.registry.access import readable_environment
from hub_server.registry.metadata import file_metadata
from hub_server.registry.models import DistFile, Environment
from hub_server.registry.views import summaries, version_infos
from hub_server.web.charts import leaderboard_svg
from hub_server.web.pages import not_found_page, page
from hub_server.web.readme import MetadataCache, VersionMetadata
from hub_server.web.session import WebPrincipalDep
from registry_index.env_args import EnvSignature, read_env_signature
from registry_index.install_commands import install_commands
from registry_index.recipes import Recipe, wheel_recipes
from registry_index.schemas.versions import FileKind, VersionInfo
from registry_index.sdk import SDK_DISTRIBUTION, SDK_OWNER

router = APIRouter(include_in_schema=False)

_metadata = MetadataCache(256)
_facts: dict[str, tuple[EnvSignature | None, list[Recipe]]] = {}
_facts_lock = threading.Lock()
# First path segments that are the API's, the index's or the pages' own, never an owner's.
RESERVED_FIRST_SEGMENTS = frozenset(
    {
        "api", "static", "legacy", "docs", "redoc", "openapi.json", "favicon.ico", "healthz",
        "login", "logout", "settings", "docs-assets", SDK_OWNER,
    }
)  # fmt: skip


def _version_metadata(
    session: Session, store: BlobStorage, wheel: DistFile | None
) -> VersionMetadata | None:
    if wheel is None or wheel.metadata_sha256 is None:
        return None

    def load() -> bytes:
        return file_metadata(session, store, wheel) or b""

    return _metadata.get(wheel.metadata_sha256, load)


def _wheel_facts(
    store: BlobStorage, wheel: DistFile | None
) -> tuple[EnvSignature | None, list[Recipe]]:
    """`load_environment`'s arguments and the training recipes, read from the wheel (never
    run), cached by its sha256."""
    if wheel is None:
        return None, []
    with _facts_lock:
        if wheel.sha256 in _facts:
            return _facts[wheel.sha256]
    with store.open(wheel.blob_key) as handle:
        signature = read_env_signature(handle)
        handle.seek(0)
        facts = signature, wheel_recipes(handle)
    with _facts_lock:
        _facts[wheel.sha256] = facts
        while len(_facts) > 256:
            _facts.pop(next(iter(_facts)))
    return facts


def _commands(base: str, owner: str, name: str, version: VersionInfo | None) -> list[Any]:
    wheel = next((f for f in version.files if f.kind == FileKind.WHEEL), None) if version else None
    sdk = sdk_wheel()
    return install_commands(
        base,
        owner,
        name,
        version.semantic_version if version else None,
        wheel_url=wheel.url if wheel else None,
        sdk_wheel_url=f"{base}/{SDK_OWNER}/files/{SDK_DISTRIBUTION}/{sdk.filename}",
    )


def _render(
    request: Request,
    hub: HubDep,
    session: Session,
    principal: Any,
    owner: str,
    name: str,
    chosen: str | None,
    *,
    board_version: str | None,
    first_party: bool,
    verified_only: bool,
) -> Response:
    try:
        own, env = _readable(session, principal, owner, name)
    except HubError as exc:
        return not_found_page(request, exc.message)
    base = public_base(request, hub)
    (summary,) = summaries(session, [(env, own)])
    versions = version_infos(session, base, own, env)
    latest = next((v for v in versions if v.semantic_version == summary.latest_version), None)
    shown = (
        latest
        if chosen is None
        else next((v for v in versions if v.semantic_version == chosen), None)
    )
    if chosen is not None and shown is None:
        return not_found_page(request, f"{own.name}/{env.name} has no version {chosen!r}.")
    wheel = registry_service.wheel_of(session, shown.id) if shown else None
    signature, recipes = _wheel_facts(hub.store, wheel)
    rows = leaderboard(
        session, env, principal, board_version,
        include_third_party=not first_party, verified_only=verified_only,
    )  # fmt: skip
    return page(
        request,
        "environment.html",
        owner=own.name,
        name=env.name,
        env=summary,
        version=shown,
        is_latest=shown is not None and latest is not None and shown.id == latest.id,
        meta=_version_metadata(session, hub.store, wheel),
        signature=signature,
        recipes=recipes,
        commands=_commands(base, own.name, env.name, shown),
        versions=versions,
        leaderboard=rows,
        leaderboard_chart=leaderboard_svg(rows),
        pass_at_k=service.pass_at_k(session, [row.evaluation_id for row in rows]),
        board_version=board_version or "",
        first_party=first_party,
        verified_only=verified_only,
        runs=service.recent_runs(session, principal, env, limit=10),
    )


def _readable(session: Session, principal: Any, owner: str, name: str) -> tuple[Owner, Environment]:
    if owner in RESERVED_FIRST_SEGMENTS:
        raise NotFound(f"Environment {owner}/{name} not found.")
    return readable_environment(session, principal, owner, name)


BoardVersion = Annotated[str, Query(alias="lb_version", max_length=64)]
FirstParty = Annotated[bool, Query(alias="lb_first_party")]
VerifiedOnly = Annotated[bool, Query(alias="lb_verified")]


@router.get("/{owner}/{name}", response_class=HTMLResponse)
def environment_page(
    owner: str, name: str, request: Request, hub: HubDep, session: SessionDep,
    principal: WebPrincipalDep, board_version: BoardVersion = "", first_party: FirstParty = False,
    verified_only: VerifiedOnly = False,
) -> Response:  # fmt: skip
    if name == "simple":
        return RedirectResponse(f"/{owner}/simple/", status_code=301)
    return _render(
        request, hub, session, principal, owner, name, None,
        board_version=board_version or None, first_party=first_party,
        verified_only=verified_only,
    )  # fmt: skip


@router.get("/{owner}/{name}/v/{version}", response_class=HTMLResponse)
def version_page(
    owner: str, name: str, version: str, request: Request, hub: HubDep, session: SessionDep,
    principal: WebPrincipalDep, first_party: FirstParty = False,
    verified_only: VerifiedOnly = False,
) -> Response:  # fmt: skip
    if name == "files":
        # `/{owner}/files/v/{filename}` is a download from a project named "v"; this router
        # is matched before the index's, so hand the request to the index route.
        return index_routes.download(owner, "v", version, request, hub, session, principal)
    return _render(
        request, hub, session, principal, owner, name, version,
        board_version=version, first_party=first_party, verified_only=verified_only,
    )  # fmt: skip
