"""Reading and managing environments: details, versions, install records, yank, metadata edits.

Every operation on `owner/name` goes through `access.readable_environment`, so a private
environment is a 404 for anyone who may not read it; edits also need `access.require_upload`.
Version selection is `registry_index.resolve.select_version`, the rule `prime env install`
and an eval push's `@spec` share.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from sqlalchemy import func
from sqlmodel import Session, select

from hub_server.accounts.auth import Principal
from hub_server.core.errors import BadRequest, NotFound
from hub_server.registry.access import readable_environment, require_upload
from hub_server.registry.models import DistFile, Environment, EnvironmentTag, Version
from hub_server.registry.publishing import bump_serials
from hub_server.registry.views import file_url, sort_key, summaries, version_info, version_infos
from registry_index import resolve
from registry_index.schemas.environments import (
    EnvironmentDetail,
    EnvironmentPatch,
    EnvironmentSummary,
)
from registry_index.schemas.versions import FileKind, InstallRecord, VersionInfo


def select_version(env: Environment, spec: str | None) -> Version:
    """The version `spec` selects (None or "latest": the latest; an exact version, which may
    be yanked; or a specifier set such as `>=1.0`): 404 when none fits, 400 for a bad spec."""
    versions = env.versions
    wanted = None if spec in (None, "", "latest") else spec
    try:
        chosen = resolve.select_version([(sort_key(v), v.yanked) for v in versions], wanted)
    except LookupError:
        raise NotFound(_no_version(env, wanted, versions)) from None
    except ValueError as exc:
        raise BadRequest(str(exc)) from None
    return next(v for v in versions if sort_key(v) == chosen)


def _no_version(env: Environment, spec: str | None, versions: list[Version]) -> str:
    slug = f"{env.owner.name}/{env.name}"
    if not versions:
        return f"Environment {slug} has no published version yet; push one with `prime env push`."
    ordered = sorted(versions, key=sort_key)
    known = ", ".join(v.version for v in ordered)
    yanked = [v.version for v in ordered if v.yanked]
    if yanked:
        known += f" (yanked: {', '.join(yanked)})"
    wanted = f"no version {spec!r}" if spec else "no version that is not yanked"
    return f"Environment {slug} has {wanted}; known versions: {known}."


def environment_detail(
    session: Session, principal: Principal | None, owner_name: str, name: str
) -> EnvironmentDetail:
    owner, env = readable_environment(session, principal, owner_name, name)
    summary = summaries(session, [(env, owner)])[0]
    count = session.exec(select(func.count()).where(Version.environment_id == env.id)).one()
    return EnvironmentDetail(**summary.model_dump(), versions_count=count)


def set_tags(session: Session, env: Environment, tags: Iterable[str]) -> None:
    """Replace the environment's tags (a row each)."""
    for row in session.exec(select(EnvironmentTag).where(EnvironmentTag.environment_id == env.id)):
        session.delete(row)
    session.flush()
    for tag in sorted(set(tags)):
        session.add(EnvironmentTag(environment_id=env.id, tag=tag))


def update_environment(
    session: Session, principal: Principal | None, owner_name: str, name: str,
    patch: EnvironmentPatch,
) -> EnvironmentSummary:  # fmt: skip
    """Change the description, visibility or tags of an environment one may publish to."""
    owner, env = readable_environment(session, principal, owner_name, name)
    require_upload(principal, owner, env)
    if patch.description is not None:
        env.description = patch.description
    if patch.visibility is not None:
        env.visibility = patch.visibility
    session.add(env)
    if patch.tags is not None:
        set_tags(session, env, patch.tags)
    bump_serials(session, env)
    session.commit()
    session.refresh(env)
    return summaries(session, [(env, owner)])[0]


def list_versions(
    session: Session, principal: Principal | None, owner_name: str, name: str, base_url: str
) -> list[VersionInfo]:
    owner, env = readable_environment(session, principal, owner_name, name)
    return version_infos(session, base_url, owner, env)


def install_record(
    session: Session, principal: Principal | None, owner_name: str, name: str, ref: str,
    base_url: str,
) -> InstallRecord:  # fmt: skip
    """What to install for `owner/name@ref` (`latest`, a version, or a specifier)."""
    owner, env = readable_environment(session, principal, owner_name, name)
    version = select_version(env, ref)
    files = version.files
    wheels = sorted((f for f in files if f.kind == FileKind.WHEEL), key=lambda f: f.filename)
    wheel = wheels[0] if wheels else None
    source = next((f for f in files if f.kind == FileKind.SOURCE), None)
    requires = json.loads(version.requires_dist)
    index_url = f"{base_url}/{owner.name}/simple/"
    source_link = file_url(base_url, owner, env, source, version.version) if source else None
    return InstallRecord(
        id=env.id,
        owner=owner.name,
        name=env.name,
        package_name=env.normalized_name,
        semantic_version=version.version,
        version_id=version.id,
        content_hash=version.content_hash,
        visibility=env.visibility,
        yanked=version.yanked,
        yanked_reason=version.yanked_reason,
        requires_python=version.requires_python,
        requires_dist=requires,
        simple_index_url=index_url,
        install_index_url=index_url,
        wheel_url=file_url(base_url, owner, env, wheel, version.version) if wheel else None,
        wheel_sha256=wheel.sha256 if wheel else None,
        wheel_filename=wheel.filename if wheel else None,
        source_url=source_link,
        package_url=source_link,
        url_dependencies=[r for r in requires if " @ " in r.split(";")[0]],
        created_at=version.created_at,
    )


def source_archive(
    session: Session, principal: Principal | None, owner_name: str, name: str, ref: str
) -> DistFile:
    """The `prime env push` source archive of the version `ref` selects."""
    owner, env = readable_environment(session, principal, owner_name, name)
    version = select_version(env, ref)
    source = next((f for f in version.files if f.kind == FileKind.SOURCE), None)
    if source is None:
        raise NotFound(
            f"{owner.name}/{env.name}@{version.version} has no source archive (it was uploaded "
            "with twine, not `prime env push`); install the wheel instead."
        )
    return source


def set_yanked(
    session: Session, principal: Principal | None, owner_name: str, name: str, ref: str,
    reason: str | None, yanked: bool, base_url: str,
) -> VersionInfo:  # fmt: skip
    """Yank (or unyank) one exact version: it stays installable only by an exact pin."""
    owner, env = readable_environment(session, principal, owner_name, name)
    require_upload(principal, owner, env)
    versions = env.versions
    version = next((v for v in versions if v.version == ref or str(sort_key(v)) == ref), None)
    if version is None:
        known = ", ".join(v.version for v in sorted(versions, key=sort_key)) or "none"
        raise NotFound(f"{owner.name}/{env.name} has no version {ref!r} (versions: {known}).")
    version.yanked = yanked
    version.yanked_reason = reason if yanked else None
    session.add(version)
    bump_serials(session, env)
    session.commit()
    return version_info(base_url, owner, env, version, version.files)


def wheel_of(session: Session, version_id: str) -> DistFile | None:
    """A wheel of the version with this id (its page shows the wheel's README and arguments)."""
    return session.exec(
        select(DistFile).where(DistFile.version_id == version_id, DistFile.kind == FileKind.WHEEL)
    ).first()
