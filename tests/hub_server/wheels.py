"""Build real (and deliberately broken) wheels and source archives for the hub tests.

Wheels are assembled with zipfile exactly as the wheel spec describes (dist-info with
METADATA, WHEEL and a RECORD of sha256 hashes), so pip and uv install them; the hostile
variants change one thing each.
"""

from __future__ import annotations

import base64
import hashlib
import io
import tarfile
import zipfile
from pathlib import Path
from typing import Any

import httpx


def _record_hash(data: bytes) -> str:
    digest = hashlib.sha256(data).digest()
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def wheel_bytes(
    name: str,
    version: str,
    *,
    module_source: str = "VALUE = 1\n",
    metadata_name: str | None = None,
    metadata_version: str | None = None,
    requires_python: str | None = ">=3.9",
    extra_members: dict[str, bytes] | None = None,
    summary: str = "A test environment",
    extra_metadata: tuple[str, ...] = (),
    description: str = "",
) -> bytes:
    """A valid pure-Python wheel (or a variant via the keyword arguments)."""
    dist = name.replace("-", "_")
    dist_info = f"{dist}-{version}.dist-info"
    metadata = [
        "Metadata-Version: 2.1",
        f"Name: {metadata_name or name}",
        f"Version: {metadata_version or version}",
        f"Summary: {summary}",
    ]
    if requires_python:
        metadata.append(f"Requires-Python: {requires_python}")
    metadata.extend(extra_metadata)
    members: dict[str, bytes] = {
        f"{dist}/__init__.py": module_source.encode(),
        f"{dist_info}/METADATA": ("\n".join(metadata) + "\n\n" + description).encode(),
        f"{dist_info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    members.update(extra_members or {})
    record_lines = [f"{path},{_record_hash(data)},{len(data)}" for path, data in members.items()]
    record_lines.append(f"{dist_info}/RECORD,,")
    members[f"{dist_info}/RECORD"] = ("\n".join(record_lines) + "\n").encode()
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path, data in members.items():
            # A fixed timestamp: the bytes (and sha256) depend on the arguments alone, so an
            # upload repeated a second later is the identical file, not "other bytes".
            info = zipfile.ZipInfo(path, date_time=(2020, 1, 1, 0, 0, 0))
            info.external_attr = 0o600 << 16  # what writestr(path, …) sets
            archive.writestr(info, data, compress_type=zipfile.ZIP_DEFLATED)
    return buffer.getvalue()


def write_wheel(directory: Path, name: str, version: str, **kwargs: object) -> Path:
    """Write `wheel_bytes(...)` under its standard filename in `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name.replace('-', '_')}-{version}-py3-none-any.whl"
    path.write_bytes(wheel_bytes(name, version, **kwargs))  # type: ignore[arg-type]
    return path


def source_archive_bytes(files: dict[str, bytes]) -> bytes:
    """A gzip tar like the one `prime env push` uploads."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for path, data in sorted(files.items()):
            info = tarfile.TarInfo(path)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def twine_upload_form(
    name: str, version: str, data: bytes
) -> tuple[dict[str, str], dict[str, tuple[str, bytes, str]]]:
    """The form fields and file part of `twine upload` (POST /{owner}/legacy/) for a wheel."""
    fields = {
        ":action": "file_upload",
        "protocol_version": "1",
        "name": name,
        "version": version,
        "filetype": "bdist_wheel",
        "pyversion": "py3",
        "metadata_version": "2.1",
        "sha256_digest": hashlib.sha256(data).hexdigest(),
    }
    filename = f"{name.replace('-', '_')}-{version}-py3-none-any.whl"
    return fields, {"content": (filename, data, "application/octet-stream")}


def twine_upload(url: str, token: str, owner: str, name: str, version: str, **kw: Any) -> None:
    """`twine upload` of a small wheel of `name` (`kw`: wheel_bytes' options) to the hub at
    `url`, which must take it."""
    fields, files = twine_upload_form(name, version, wheel_bytes(name, version, **kw))
    response = httpx.post(
        f"{url}/{owner}/legacy/",
        auth=("__token__", token),
        data=fields,
        files=files,
        timeout=60,
    )
    assert response.status_code == 200, response.text
