"""`prime env pull`: fetch an environment's source archive and extract it safely.

The archive comes from the network, so it is treated as hostile: it is downloaded to a temporary
file, checked exactly as the hub checks an upload (`registry_index.validation.
validate_source_archive`: member count, decompressed bytes counted while decompressing, only
regular files and directories with relative names), so a bomb served by a hostile hub is refused
before anything is written, then extracted with tarfile's `data` filter (no absolute paths, no
`..`, no links, no devices, no setuid bits) into a temporary sibling of the target, and only
renamed into place when everything succeeded, so a failed pull leaves nothing behind.
"""

from __future__ import annotations

import tarfile
import tempfile
from pathlib import Path

from hub_client.client import HubClient, HubError
from registry_index.errors import InvalidUpload
from registry_index.files import atomic_directory
from registry_index.resolve import EnvRef
from registry_index.validation import DEFAULT_LIMITS, UploadLimits, validate_source_archive


class PullError(Exception):
    """The pull cannot go ahead (target in the way, hostile or broken archive)."""


def pull_source(client: HubClient, ref: EnvRef, target: Path | None) -> tuple[Path, str]:
    """Extract the source of `ref` into `target` (default ./NAME-VERSION); return it and the version."""
    record = client.version(ref.owner, ref.name, ref.spec, what=f"pull {ref}")
    version, source_url = record.semantic_version, record.source_url
    if not source_url:
        raise HubError(
            f"{ref.owner}/{ref.name} {version} has no source archive on the hub "
            "(it was uploaded with twine or uv publish, which send only distributions)"
        )
    dest = (target or Path(f"{ref.name}-{version}")).resolve()
    _check_target(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".prime-pull-", dir=dest.parent) as tmp:
        archive = client.download(source_url, Path(tmp) / "source.tar.gz")
        extract_archive(archive, dest)
    return dest, version


def _check_target(dest: Path) -> None:
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise PullError(f"{dest} already exists and is not empty; pass --target DIR")


def extract_archive(archive: Path, dest: Path, limits: UploadLimits = DEFAULT_LIMITS) -> Path:
    """Extract a gzip tar into `dest` (absent or empty) all-or-nothing; PullError if hostile."""
    _check_target(dest)
    try:
        validate_source_archive(archive, "source.tar.gz", limits)
    except InvalidUpload as exc:
        raise PullError(
            f"the source archive is unsafe or broken, nothing was extracted: {exc}"
        ) from None
    try:
        with atomic_directory(dest) as staging, tarfile.open(archive, mode="r:gz") as tar:
            tar.extractall(staging, filter="data")
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise PullError(
            f"the source archive is unsafe or broken, nothing was extracted: {exc}"
        ) from exc
    return dest
