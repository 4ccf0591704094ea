"""`prime env push`: validate locally, then the hub's resolve → reserve → PUT → finalize flow.

Everything that can be checked before talking to the hub is checked first (pyproject, the built
wheel with the same validation the hub runs, unchanged content, a version that exists with other
content), so a refused push costs no round trips and leaves nothing behind on the hub.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from rich.console import Console

from hub_client.client import HubClient, HubError, NotFound, checked_request
from prime_cli.env.project import (
    EnvProject,
    ProjectError,
    build_distributions,
    check_environment,
    source_archive,
)
from registry_index import scopes as token_scopes
from registry_index.content_hash import file_sha256, iter_tree_files, tree_content_hash
from registry_index.errors import InvalidUpload
from registry_index.files import write_json_atomic
from registry_index.schemas.accounts import WhoAmI
from registry_index.schemas.push import FinalizeResult, PushMetadata, ResolveRequest, UploadRequest
from registry_index.schemas.versions import FileOut, VersionInfo
from registry_index.validation import validate_distribution


class PushRefused(Exception):
    """The push would publish nothing new or collide with an existing version."""


@dataclass(frozen=True)
class PushResult:
    owner: str
    name: str
    version: str
    environment_id: str
    content_hash: str
    wheel_filename: str
    wheel_sha256: str
    source_filename: str
    created: bool
    dry_run: bool = False


def _bump_hint(version: str) -> str:
    parts = version.split(".")
    if parts and parts[-1].isdigit():
        parts[-1] = str(int(parts[-1]) + 1)
        return ".".join(parts)
    return version + ".post1"


def _existing_versions(client: HubClient, owner: str, name: str) -> list[VersionInfo] | None:
    """The environment's versions on the hub; None when there is no such environment yet."""
    try:
        return client.versions(owner, name)
    except NotFound:
        return None


def check_can_push(who: WhoAmI, owner: str, project: EnvProject) -> None:
    """Refuse, before anything is built, a push the hub would answer with 403.

    Mirrors the hub's `Principal.can_upload` from what `whoami` reports (the account, its
    organisations, the token's scopes); the hub still decides, this only fails early.
    """
    username = who.username
    members = {username, *who.organizations}
    scopes = who.token.scopes
    slug = f"{owner}/{project.name}"
    if not who.is_admin and owner not in members:
        raise PushRefused(
            f"{username} cannot publish to {owner!r}: not your account or one of your "
            f"organisations ({', '.join(sorted(members))}); pass --owner with one of them"
        )
    if scopes and not token_scopes.allows(scopes, "write", owner, project.normalized_name):
        raise PushRefused(
            f"this token (scopes: {', '.join(scopes)}) may not publish {slug}; create a token "
            f"with scope 'upload:{owner}' or 'all' (prime hub token create) and run prime login"
        )


def check_not_published(
    versions: list[VersionInfo], project: EnvProject, owner: str, content_hash: str
) -> FileOut | None:
    """Refuse unchanged content, and a version number already used by other content.

    Returns the already-uploaded wheel's file record when this exact version and content were
    pushed but the upload stopped before the source archive: the push then only adds it.
    """
    slug = f"{owner}/{project.name}"
    for info in versions:
        if info.content_hash != content_hash:
            continue
        wheels = [f for f in info.files if f.kind == "wheel"]
        has_source = any(f.kind == "source" for f in info.files)
        if info.semantic_version == project.version and wheels and not has_source:
            return wheels[0]
        raise PushRefused(
            f"nothing to push: {slug} {info.semantic_version} already has exactly this "
            f"content (content hash {content_hash[:12]}…); change the environment and bump "
            "[project] version in pyproject.toml to publish a new version"
        )
    for info in versions:
        if info.semantic_version == project.version:
            raise PushRefused(
                f"{slug} {project.version} is already published with different content and "
                f"versions are immutable; bump [project] version in pyproject.toml "
                f"(e.g. to {_bump_hint(project.version)}) and push again"
            )
    return None


def _upload_flow(
    client: HubClient, env_id: str, kind: Literal["wheel", "source"], path: Path,
    body: UploadRequest,
) -> FinalizeResult:  # fmt: skip
    """Reserve an upload, PUT the bytes, finalize (the wheel's endpoints or the source's).

    An upload URL the hub no longer honours (404: expired; 409: still held by a PUT that a
    hub restart cut off) is replaced by a fresh reservation once; the bytes go up again.
    """
    for fresh in (False, True):
        if kind == "wheel":
            wheel = client.reserve_wheel(env_id, body)
            upload_id, upload_url = wheel.wheel_id, wheel.upload_url
        else:
            source = client.reserve_source(env_id, body)
            upload_id, upload_url = source.version_id, source.upload_url
        try:
            client.upload(upload_url, path, label=f"upload {path.name}")
        except HubError as exc:
            if fresh or exc.status not in (404, 409):
                raise
            client.feedback.warn(f"{exc}; reserving a new upload URL")
            continue
        if kind == "wheel":
            return client.finalize_wheel(env_id, upload_id, path.name)
        return client.finalize_source(env_id, upload_id, path.name)
    raise AssertionError("unreachable: the loop returns or raises")


def write_push_metadata(project: EnvProject, result: PushResult) -> Path:
    """`.prime/.env-metadata.json`, as the stock client writes it, so tools can tell what is live."""
    meta_dir = project.root / ".prime"
    meta_dir.mkdir(exist_ok=True)
    dest = meta_dir / ".env-metadata.json"
    payload = {
        "environment_id": result.environment_id,
        "owner": result.owner,
        "name": result.name,
        "version": result.version,
        "content_hash": result.content_hash,
        "pushed_at": datetime.now(UTC).isoformat().replace("+00:00", "Z"),
        "wheel_sha256": result.wheel_sha256,
    }
    write_json_atomic(dest, payload)
    return dest


def push_environment(
    client: HubClient,
    project: EnvProject,
    owner: str,
    *,
    visibility: str | None,
    console: Console,
    dry_run: bool = False,
    new_visibility: Callable[[str], str | None] = lambda slug: None,
) -> PushResult:
    """Publish `project` to `owner` on the hub; raise ProjectError, PushRefused or HubError.

    With `dry_run` everything up to the upload runs (the local checks, the build, the hub's
    own wheel validation, the version checks against the hub) and nothing is sent. A new
    environment pushed with no `visibility` gets `new_visibility(slug)` (the command asks on a
    terminal; None leaves the hub's default, public, which the command then says).
    """
    check_environment(project)
    files = [project.root / rel for rel in iter_tree_files(project.root)]
    links = [str(path.relative_to(project.root)) for path in files if path.is_symlink()]
    if links:
        raise ProjectError(
            f"symbolic links cannot be published ({', '.join(links[:3])}); "
            "replace them with regular files"
        )
    content_hash = tree_content_hash(project.root)
    existing = _existing_versions(client, owner, project.name)
    uploaded_wheel = check_not_published(existing or [], project, owner, content_hash)
    if existing is None and visibility is None and not dry_run:
        visibility = new_visibility(f"{owner}/{project.name}")

    with tempfile.TemporaryDirectory(prefix="prime-push-") as tmp:
        out = Path(tmp)
        with console.status(f"Building {project.name} {project.version} …") as status:
            built = build_distributions(
                project,
                out / "dist",
                sdist=False,
                on_step=lambda step: status.update(f"Building {project.name}: {step} …"),
            )
        try:
            wheel = validate_distribution(built.wheel, built.wheel.name)
        except InvalidUpload as exc:
            raise ProjectError(f"the built wheel would be refused by the hub: {exc}") from exc
        archive = source_archive(project, files, content_hash, out / "src")
        if dry_run:
            return PushResult(
                owner=owner,
                name=project.name,
                version=project.version,
                environment_id="",
                content_hash=content_hash,
                wheel_filename=built.wheel.name,
                wheel_sha256=wheel.sha256,
                source_filename=archive.name,
                created=False,
                dry_run=True,
            )
        slug = f"{owner}/{project.name}"
        with checked_request(f"push {slug}"):
            request = ResolveRequest(
                name=project.name,
                visibility=visibility,  # type: ignore[arg-type]  # checked by pydantic
                owner_slug=owner,
                description=project.description or None,
                tags=project.tags or None,
            )
            metadata = PushMetadata(
                description=project.description,
                tags=project.tags,
                license=project.license,
                dependencies=project.dependencies,
                python_requires=project.requires_python,
                original_filename=built.wheel.name,
                requires_dist=list(wheel.metadata.requires_dist),
                rubric=project.rubric,
            )
            wheel_body = UploadRequest(
                content_hash=content_hash,
                filename=built.wheel.name,
                sha256=wheel.sha256,
                size=wheel.size,
                semantic_version=project.version,
                metadata=metadata,
            )
            source_body = UploadRequest(
                content_hash=content_hash,
                filename=archive.name,
                sha256=file_sha256(archive),
                size=archive.stat().st_size,
                semantic_version=project.version,
                metadata=metadata.model_copy(update={"original_filename": archive.name}),
            )
        resolved = client.resolve_environment(request)
        env_id = resolved.id
        if uploaded_wheel is None:
            _upload_flow(client, env_id, "wheel", built.wheel, wheel_body)
            wheel_filename, wheel_sha256 = built.wheel.name, wheel.sha256
        else:
            # An earlier push stored the wheel and stopped before the source archive.
            console.print(
                f"The wheel of {project.version} is already on the hub; adding its source."
            )
            wheel_filename, wheel_sha256 = uploaded_wheel.filename, uploaded_wheel.sha256
        _upload_flow(client, env_id, "source", archive, source_body)
    return PushResult(
        owner=resolved.owner.name,
        name=resolved.name,
        version=project.version,
        environment_id=env_id,
        content_hash=content_hash,
        wheel_filename=wheel_filename,
        wheel_sha256=wheel_sha256,
        source_filename=archive.name,
        created=resolved.created,
    )


__all__ = ["HubError", "PushRefused", "PushResult", "push_environment", "write_push_metadata"]
