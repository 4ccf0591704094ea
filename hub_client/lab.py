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
from registry_index.peft_adapter import FILES

MAX_ARCHIVE_BYTES = 4 * 1024**3


def tinker_key(token: str) -> str:
    """The key the Tinker SDK sends for a hub token: `tml-` + the token (kept if already so)."""
    return token if token.startswith("tml-") else f"tml-{token}"


def lab_models(lab_url: str, api_key: str) -> list[str]:
    """The base models of the Lab's `get_server_capabilities`, which also proves the key may
    train there; HubError with the Lab's own words when it may not (401, 403) or is not up."""
    try:
        reply = httpx.get(
            f"{lab_url.rstrip('/')}/api/v1/get_server_capabilities",
            headers={"X-API-Key": tinker_key(api_key)},
            timeout=30,
        )
    except httpx.HTTPError as error:
        raise HubError(f"cannot reach the Lab at {lab_url}: {error}") from None
    if reply.status_code != 200:
        raise HubError(
            f"the Lab at {lab_url} refused the token ({reply.status_code}): {error_detail(reply)}",
            reply.status_code,
        )
    try:
        body = reply.json()
    except ValueError:
        body = None
    models = body.get("supported_models") if isinstance(body, dict) else None
    if not isinstance(models, list):
        raise HubError(
            f"{lab_url} is not a Lab (no supported_models in its capabilities); it is HUB/lab"
        )
    return [str(m.get("model_name")) for m in models if isinstance(m, dict)]


def fetch_adapter(lab_url: str, api_key: str, tinker_path: str) -> dict[str, bytes]:
    """Checkpoint `tinker_path` of the Lab at `lab_url` (what TINKER_BASE_URL names) as the
    PEFT adapter's files by name; HubError saying what went wrong."""
    try:
        reply = httpx.get(
            f"{lab_url.rstrip('/')}/api/v1/checkpoint_archive",
            params={"path": tinker_path},
            headers={"X-API-Key": tinker_key(api_key)},
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
            members = tar.getmembers()
            names = sorted(m.name for m in members)
            if names != sorted(FILES) or not all(m.isfile() for m in members):
                raise HubError(f"the Lab's archive holds {names}, not a PEFT adapter")
            files = {}
            for member in members:
                extracted = tar.extractfile(member)
                assert extracted is not None  # a regular file (checked above)
                files[member.name] = extracted.read()
    except tarfile.TarError as error:
        raise HubError(f"the Lab's archive is damaged: {error}") from None
    return files


def export_adapter(lab_url: str, api_key: str, tinker_path: str, dest: Path) -> Path:
    """Write checkpoint `tinker_path` as a PEFT adapter directory `dest` (absent or empty),
    whole or not at all; HubError saying what went wrong."""
    if dest.exists() and any(dest.iterdir()):
        raise HubError(f"{dest} exists and is not empty; name a new directory.")
    files = fetch_adapter(lab_url, api_key, tinker_path)
    with atomic_directory(dest) as staging:
        for name, data in files.items():
            (staging / name).write_bytes(data)
    return dest
