"""Turning rows into API objects (shared by the REST routers and the web pages)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from packaging.version import InvalidVersion
from packaging.version import Version as PkgVersion
from sqlmodel import Session, col, select

from hub_server.accounts.models import Owner
from hub_server.registry.models import DistFile, Environment, EnvironmentTag, Version
from registry_index.resolve import latest_version
from registry_index.rubric_spec import RubricSpec
from registry_index.schemas.environments import EnvironmentSummary, OwnerOut
from registry_index.schemas.versions import FileKind, FileOut, VersionInfo


def sort_key(version: Version) -> PkgVersion:
    try:
        return PkgVersion(version.version)
    except InvalidVersion:
        return PkgVersion("0")


def file_url(base_url: str, owner: Owner, env: Environment, file: DistFile, version: str) -> str:
    """Where a file is downloaded; source archives go through the API (auth-aware)."""
    if file.kind == FileKind.SOURCE:
        env_path = f"/api/v1/environmentshub/{owner.name}/{env.normalized_name}"
        return f"{base_url}{env_path}/@{version}/source"
    return f"{base_url}/{owner.name}/files/{env.normalized_name}/{file.filename}"


def version_infos(
    session: Session, base_url: str, owner: Owner, env: Environment
) -> list[VersionInfo]:
    """All versions of `env`, newest first, each with its files."""
    versions = session.exec(select(Version).where(Version.environment_id == env.id)).all()
    files = session.exec(select(DistFile).where(DistFile.environment_id == env.id)).all()
    by_version: dict[str, list[DistFile]] = defaultdict(list)
    for file in files:
        by_version[file.version_id].append(file)
    ordered = sorted(versions, key=sort_key, reverse=True)
    return [version_info(base_url, owner, env, v, by_version[v.id]) for v in ordered]


def version_info(
    base_url: str, owner: Owner, env: Environment, version: Version, files: Sequence[DistFile]
) -> VersionInfo:
    outs = [
        FileOut(
            filename=f.filename,
            kind=f.kind,
            sha256=f.sha256,
            size=f.size,
            url=file_url(base_url, owner, env, f, version.version),
            uploaded_at=f.uploaded_at,
            downloads=f.downloads,
        )
        for f in sorted(files, key=lambda f: (f.kind, f.filename))
    ]
    return VersionInfo(
        id=version.id,
        semantic_version=version.version,
        content_hash=version.content_hash,
        yanked=version.yanked,
        yanked_reason=version.yanked_reason,
        requires_python=version.requires_python,
        created_at=version.created_at,
        downloads=sum(f.downloads for f in files),
        files=outs,
        rubric=declared_rubric(version),
    )


def declared_rubric(version: Version) -> RubricSpec | None:
    """The version's declared rubric (None when it declares none, or its row cannot be read)."""
    if version.rubric_json is None:
        return None
    try:
        return RubricSpec.model_validate_json(version.rubric_json)
    except ValueError:
        return None


def latest_versions(session: Session, env_ids: Sequence[str]) -> dict[str, str]:
    """The version "latest" installs, per environment (`registry_index.resolve.latest_version`:
    no pre-release while a final release exists, nothing yanked); absent when none is."""
    if not env_ids:
        return {}
    rows = session.exec(select(Version).where(col(Version.environment_id).in_(env_ids))).all()
    by_env: dict[str, list[Version]] = defaultdict(list)
    for row in rows:
        by_env[row.environment_id].append(row)
    latest: dict[str, str] = {}
    for env_id, versions in by_env.items():
        chosen = latest_version([(sort_key(v), v.yanked) for v in versions])
        if chosen is not None:
            latest[env_id] = next(v.version for v in versions if sort_key(v) == chosen)
    return latest


def tags_of(session: Session, env_ids: Sequence[str]) -> dict[str, list[str]]:
    if not env_ids:
        return {}
    rows = session.exec(
        select(EnvironmentTag).where(col(EnvironmentTag.environment_id).in_(env_ids))
    ).all()
    result: dict[str, list[str]] = defaultdict(list)
    for row in rows:
        result[row.environment_id].append(row.tag)
    return {key: sorted(value) for key, value in result.items()}


def summaries(
    session: Session, pairs: Sequence[tuple[Environment, Owner]]
) -> list[EnvironmentSummary]:
    ids = [env.id for env, _ in pairs]
    latest = latest_versions(session, ids)
    tags = tags_of(session, ids)
    return [
        EnvironmentSummary(
            id=env.id,
            owner=OwnerOut(name=owner.name, kind=owner.kind),
            name=env.name,
            description=env.description,
            tags=tags.get(env.id, []),
            visibility=env.visibility,
            latest_version=latest.get(env.id),
            created_at=env.created_at,
            updated_at=env.updated_at,
            downloads=env.downloads,
        )
        for env, owner in pairs
    ]
