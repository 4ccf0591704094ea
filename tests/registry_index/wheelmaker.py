"""Builders for real (and deliberately hostile) wheels and sdists, written with zipfile/tarfile.

Valid archives are byte-for-byte what a build backend produces in structure (dist-info with
WHEEL, METADATA and a RECORD that hashes every file), so validation sees real inputs; the
hostile variants change exactly one thing.
"""

from __future__ import annotations

import base64
import hashlib
import io
import struct
import tarfile
import zipfile
import zlib
from pathlib import Path


def metadata_text(name: str, version: str, requires_python: str | None = ">=3.9") -> str:
    lines = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}", "Summary: demo env"]
    if requires_python:
        lines.append(f"Requires-Python: {requires_python}")
    return "\n".join(lines) + "\n\nA demo environment.\n"


def _record_line(path: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def wheel_members(
    name: str = "demo_env",
    version: str = "1.0.0",
    *,
    meta_name: str | None = None,
    meta_version: str | None = None,
    extra: dict[str, bytes] | None = None,
    skip: frozenset[str] = frozenset(),
) -> dict[str, bytes]:
    """Members of a valid pure-Python wheel, RECORD last (as build backends write it)."""
    dist_info = f"{name}-{version}.dist-info"
    members: dict[str, bytes] = {
        f"{name}/__init__.py": b"def load_environment():\n    return 'ok'\n",
        f"{dist_info}/METADATA": metadata_text(meta_name or name, meta_version or version).encode(),
        f"{dist_info}/WHEEL": (
            b"Wheel-Version: 1.0\nGenerator: wheelmaker\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        ),
    }
    members.update(extra or {})
    record = "\n".join(_record_line(p, d) for p, d in members.items())
    members[f"{dist_info}/RECORD"] = (record + f"\n{dist_info}/RECORD,,\n").encode()
    return {path: data for path, data in members.items() if path.rsplit("/", 1)[-1] not in skip}


def write_zip(
    path: Path, members: dict[str, bytes], compression: int = zipfile.ZIP_DEFLATED
) -> Path:
    with zipfile.ZipFile(path, "w", compression=compression) as archive:
        for member, data in members.items():
            archive.writestr(member, data)
    return path


def make_wheel(directory: Path, name: str = "demo_env", version: str = "1.0.0") -> Path:
    """Write a valid wheel `name-version-py3-none-any.whl` into `directory`."""
    return write_zip(directory / f"{name}-{version}-py3-none-any.whl", wheel_members(name, version))


def make_sdist(
    directory: Path,
    name: str = "demo_env",
    version: str = "1.0.0",
    *,
    extra: list[tarfile.TarInfo] | None = None,
    pkg_info: bool = True,
) -> Path:
    """Write a `.tar.gz` sdist with one top directory holding PKG-INFO and a module."""
    top = f"{name}-{version}"
    path = directory / f"{top}.tar.gz"
    files = {f"{top}/{name}/__init__.py": b"x = 1\n"}
    if pkg_info:
        files[f"{top}/PKG-INFO"] = metadata_text(name, version).encode()
    with tarfile.open(path, "w:gz") as archive:
        for member, data in files.items():
            info = tarfile.TarInfo(member)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
        for info in extra or []:
            archive.addfile(info, io.BytesIO(b"") if info.isreg() else None)
    return path


def raw_zip(entries: list[tuple[bytes, bytes]]) -> bytes:
    """A stored-only zip assembled byte by byte, for names `zipfile` refuses to write."""
    body, directory = bytearray(), bytearray()
    for name, data in entries:
        crc = zlib.crc32(data)
        offset = len(body)
        body += struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, 0, 0, 0x21, crc, len(data),
                            len(data), len(name), 0) + name + data  # fmt: skip
        directory += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, 0, 0, 0x21, crc,
                                 len(data), len(data), len(name), 0, 0, 0, 0, 0, offset) + name  # fmt: skip
    end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(entries), len(entries), len(directory),
                      len(body), 0)  # fmt: skip
    return bytes(body + directory + end)
