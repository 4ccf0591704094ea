"""The environment SDK every hub serves, at `/_sdk/simple/prime-envhub-sdk/`, with no seeding.

Every environment depends on `prime-envhub-sdk`, which is not on PyPI. So that installing an
environment works from any hub, fresh or not, the hub serves the wheel of the very SDK it runs
with under the reserved owner `_sdk` (not a valid account name, so no one can own that index;
uploads under the SDK's name are refused everywhere).

The wheel is packed from the installed SDK distribution itself: its METADATA as installed, and
the files of its top-level packages (`top_level.txt`) as this process imports them, whether the
SDK was installed from a wheel or is an editable checkout. Packing is deterministic (sorted
members, fixed timestamps), so every worker and every restart on the same code serves the same
bytes and sha256. It happens once per process, on the first request, and is kept in memory
(a few hundred KiB).
"""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata
import importlib.util
import io
import zipfile
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from pathlib import Path

from hub_server.core.errors import HubError
from registry_index.metadata import parse_core_metadata
from registry_index.names import normalize
from registry_index.sdk import SDK_DISTRIBUTION
from registry_index.simple import Format, ProjectFile, render_index_page, render_project_page

# Zip entries carry this timestamp (the earliest zip allows) so the bytes depend on content only.
_EPOCH = (1980, 1, 1, 0, 0, 0)
_WHEEL_FILE = (
    b"Wheel-Version: 1.0\nGenerator: prime-envhub hub_server.index.sdk\n"
    b"Root-Is-Purelib: true\nTag: py3-none-any\n"
)
# dist-info files copied from the installed distribution when present (the rest are the
# installer's own records: RECORD, INSTALLER, REQUESTED, direct_url.json, ...).
_COPIED_DIST_INFO = ("METADATA", "top_level.txt", "entry_points.txt")


class SdkUnavailable(HubError):
    """The SDK distribution is not installed in the hub's environment (a broken deployment)."""

    status = 503


@dataclass(frozen=True)
class SdkWheel:
    """The packed SDK wheel and what the simple index says about it."""

    filename: str
    data: bytes
    sha256: str
    metadata: bytes
    metadata_sha256: str
    requires_python: str | None
    version: str
    packed_at: datetime


def _record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"sha256={digest}"


def _package_files(package: str) -> list[tuple[str, Path]]:
    """(archive path, file) for every file of one top-level package or module, sorted."""
    spec = importlib.util.find_spec(package)
    if spec is None:
        raise SdkUnavailable(f"The SDK package {package!r} cannot be imported on this hub.")
    if spec.submodule_search_locations:
        root = Path(next(iter(spec.submodule_search_locations)))
        files = sorted(
            path
            for path in root.rglob("*")
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc"
        )
        return [(f"{package}/{path.relative_to(root).as_posix()}", path) for path in files]
    if spec.origin is None:
        raise SdkUnavailable(f"The SDK module {package!r} has no file on this hub.")
    origin = Path(spec.origin)
    return [(origin.name, origin)]


def pack_sdk_wheel() -> SdkWheel:
    """Pack the installed `prime-envhub-sdk` into a wheel (deterministic bytes)."""
    # The installed dist-info (METADATA), not a build's `*.egg-info` (PKG-INFO) that a source
    # checkout on sys.path (the current directory) may also show.
    dist = next(
        (
            d
            for d in importlib.metadata.distributions(name=SDK_DISTRIBUTION)
            if d.read_text("METADATA")
        ),
        None,
    )
    if dist is None:
        raise SdkUnavailable(
            f"{SDK_DISTRIBUTION} is not installed in the hub's Python; install it beside "
            "prime-envhub (scripts/setup.sh does)."
        )
    metadata = (dist.read_text("METADATA") or "").encode()
    meta = parse_core_metadata(metadata, f"{SDK_DISTRIBUTION} METADATA")
    name, version = normalize(meta.name).replace("-", "_"), str(meta.version)
    dist_info = f"{name}-{version}.dist-info"
    members: list[tuple[str, bytes]] = []
    packages = (dist.read_text("top_level.txt") or "").split()
    for package in sorted(packages):
        members += [(arcname, path.read_bytes()) for arcname, path in _package_files(package)]
    for filename in _COPIED_DIST_INFO:
        text = dist.read_text(filename)
        if text is not None:
            members.append((f"{dist_info}/{filename}", text.encode()))
    members.append((f"{dist_info}/WHEEL", _WHEEL_FILE))
    record = "".join(f"{arc},{_record_hash(data)},{len(data)}\n" for arc, data in members)
    members.append((f"{dist_info}/RECORD", (record + f"{dist_info}/RECORD,,\n").encode()))
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for arcname, data in members:
            info = zipfile.ZipInfo(arcname, date_time=_EPOCH)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            archive.writestr(info, data)
    data = buffer.getvalue()
    return SdkWheel(
        filename=f"{name}-{version}-py3-none-any.whl",
        data=data,
        sha256=hashlib.sha256(data).hexdigest(),
        metadata=metadata,
        metadata_sha256=hashlib.sha256(metadata).hexdigest(),
        requires_python=meta.requires_python,
        version=version,
        packed_at=datetime.now(UTC),
    )


@cache
def sdk_wheel() -> SdkWheel:
    """The SDK wheel of this process (packed on first use, then kept)."""
    return pack_sdk_wheel()


def sdk_index_page(fmt: Format) -> str:
    """The `_sdk` owner's project list: the SDK alone."""
    return render_index_page([SDK_DISTRIBUTION], fmt)


def sdk_project_page(fmt: Format, files: str = "../../files") -> str:
    """The SDK's project page: the one wheel this hub runs with. `files` is the SDK's files
    directory relative to the page (the default: from `/_sdk/simple/prime-envhub-sdk/`)."""
    wheel = sdk_wheel()
    entry = ProjectFile(
        filename=wheel.filename,
        url=f"{files}/{SDK_DISTRIBUTION}/{wheel.filename}",
        sha256=wheel.sha256,
        size=len(wheel.data),
        upload_time=wheel.packed_at,
        requires_python=wheel.requires_python,
        core_metadata_sha256=wheel.metadata_sha256,
    )
    return render_project_page(SDK_DISTRIBUTION, [entry], fmt, [wheel.version])
