"""LoRA adapters on the hub, from the client's side: push a PEFT adapter directory (checked
first by the rules the hub applies, `registry_index.peft_adapter`), pull a version into a
directory, whole or not at all, each file's sha256 checked against the hub's answer, and the
verified cache that `prime eval run --adapter OWNER/NAME[@VERSION]` loads from.

The cache (`$XDG_CACHE_HOME/prime/adapters/OWNER/NAME/VERSION-DIGEST`) is keyed by the
version's file digests as well as its name: a hub reset that reuses the name is a new
directory, and a cached copy whose bytes no longer match (a disk error, a hand edit) is
fetched again.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

from hub_client.client import HubClient, HubError
from registry_index.content_hash import file_sha256
from registry_index.errors import InvalidUpload
from registry_index.files import atomic_directory
from registry_index.peft_adapter import (
    CONFIG,
    FILES,
    WEIGHTS,
    AdapterConfig,
    check_weights,
    read_config,
)
from registry_index.resolve import EnvRef, parse_env_ref
from registry_index.schemas.adapters import AdapterVersionInfo, PublishOptions
from registry_index.user_dirs import cache_home


def parse_adapter_ref(text: str) -> EnvRef:
    """`OWNER/NAME[@VERSION-or-specifier]`; InvalidEnvRef saying how to write it."""
    return parse_env_ref(text, noun="adapter")


def check_adapter_files(directory: Path) -> AdapterConfig:
    """The config of the PEFT LoRA adapter in `directory`, checked as the hub checks a push;
    InvalidUpload saying what is wrong."""
    missing = [name for name in FILES if not (directory / name).is_file()]
    if missing:
        raise InvalidUpload(
            f"{directory} is not a PEFT adapter directory: it lacks {' and '.join(missing)} "
            "(write one with `prime train export`, `prime lab export` or peft's save_pretrained)."
        )
    config = read_config((directory / CONFIG).read_bytes())
    weights = directory / WEIGHTS
    with weights.open("rb") as handle:
        check_weights(handle, weights.stat().st_size)
    return config


def push_adapter(
    client: HubClient, directory: Path, ref: EnvRef, options: PublishOptions
) -> AdapterVersionInfo:
    """Push the adapter in `directory` as a new version of `ref` (owner/name)."""
    config = check_adapter_files(directory)
    if options.base_model is None and config.base_model is None:
        raise InvalidUpload(
            f"{directory / CONFIG} names no base model (base_model_name_or_path); say which "
            "model the adapter is for with --base-model."
        )
    files = {name: directory / name for name in FILES}
    return client.push_adapter(ref.owner, ref.name, files, options)


def pull_adapter(client: HubClient, ref: EnvRef, dest: Path) -> AdapterVersionInfo:
    """Write the version `ref` selects as a PEFT adapter directory `dest` (absent or empty),
    whole or not at all."""
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise HubError(f"{dest} exists and is not an empty directory; name a new one.")
    version = client.adapter_version(ref.owner, ref.name, ref.spec)
    with atomic_directory(dest) as staging:
        _download(client, version, staging)
    return version


def cached_adapter(client: HubClient, ref: EnvRef) -> tuple[Path, AdapterVersionInfo]:
    """The directory of the version `ref` selects in the local cache, downloaded and checked
    when it is not there (or no longer matches its digests)."""
    version = client.adapter_version(ref.owner, ref.name, ref.spec)
    digest = hashlib.sha256("".join(sorted(f.sha256 for f in version.files)).encode())
    where = cache_home() / "adapters" / version.owner / version.name
    dest = where / f"{version.version}-{digest.hexdigest()[:16]}"
    if _intact(dest, version):
        return dest, version
    shutil.rmtree(dest, ignore_errors=True)
    try:
        with atomic_directory(dest) as staging:
            _download(client, version, staging)
    except OSError:
        if not _intact(dest, version):  # else another process cached it meanwhile
            raise
    return dest, version


def _download(client: HubClient, version: AdapterVersionInfo, directory: Path) -> None:
    """Each file of `version` into `directory`, its size and sha256 checked."""
    names = sorted(file.filename for file in version.files)
    if names != sorted(FILES):
        raise HubError(
            f"{version.owner}/{version.name}@{version.version} lists the files {names}, not a "
            "PEFT adapter's; nothing was kept."
        )
    for file in version.files:
        label = f"download {version.name}/{file.filename}"
        client.download(
            file.url,
            directory / file.filename,
            sha256=file.sha256,
            label=label,
            max_bytes=file.size,
        )


def _intact(directory: Path, version: AdapterVersionInfo) -> bool:
    """True when `directory` holds exactly `version`'s files, byte for byte."""
    return bool(version.files) and all(
        (directory / file.filename).is_file()
        and (directory / file.filename).stat().st_size == file.size
        and file_sha256(directory / file.filename) == file.sha256
        for file in version.files
    )
