"""A Lab's checkpoint as a PEFT adapter directory on disk (`prime lab export`).

The Lab (docs/lab.md) serves a checkpoint as a tar of `adapter_config.json` and
`adapter_model.safetensors`; this fetches it with the Tinker key (`tml-<hub token>`) and
unpacks it whole or not at all, ready for `prime eval run … --adapter DIR`.
"""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import httpx

from hub_client.client import HubError, NotFound, error_detail
from registry_index.files import atomic_directory

PEFT_FILES = ("adapter_config.json", "adapter_model.safetensors")
MAX_ARCHIVE_BYTES = 4 * 1024**3


def export_adapter(lab_url: str, api_key: str, tinker_path: str, dest: Path) -> Path:
    """Write checkpoint `tinker_path` of the Lab at `lab_url` (what TINKER_BASE_URL names) as
    a PEFT adapter directory `dest` (absent or empty); HubError saying what went wrong."""
    if dest.exists() and any(dest.iterdir()):
        raise HubError(f"{dest} exists and is not empty; name a new directory.")
    key = api_key if api_key.startswith("tml-") else f"tml-{api_key}"
    try:
        reply = httpx.get(
            f"{lab_url.rstrip('/')}/api/v1/checkpoint_archive",
            params={"path": tinker_path},
            headers={"X-API-Key": key},
            timeout=300,
        )
    except httpx.HTTPError as error:
        raise HubError(f"cannot reach the Lab at {lab_url}: {error}") from None
    if reply.status_code == 404:
        raise NotFound(error_detail(reply), 404)
    if reply.status_code != 200:
        raise HubError(f"the Lab refused the export: {error_detail(reply)}", reply.status_code)
    if len(reply.content) > MAX_ARCHIVE_BYTES:
        raise HubError("the Lab sent an archive larger than 4 GiB; nothing was kept")
    try:
        with tarfile.open(fileobj=io.BytesIO(reply.content)) as tar:
            names = sorted(tar.getnames())
            if names != sorted(PEFT_FILES):
                raise HubError(f"the Lab's archive holds {names}, not a PEFT adapter")
            with atomic_directory(dest) as staging:
                tar.extractall(staging, filter="data")
    except tarfile.TarError as error:
        raise HubError(f"the Lab's archive is damaged: {error}") from None
    return dest
