"""Byte-level zip framing checks (warehouse `utils/zipfiles.py`, "archive confusion").

Python's `zipfile` is lenient: it finds the last end-of-central-directory record, silently skips
data prepended to the archive, and ignores bytes no directory entry points at. Another unpacker
can then see different files than the index validated. So every byte of the upload must be
accounted for: local entries laid end to end from offset 0 exactly as the central directory
describes them, then the central directory, then one end record with no comment or trailing
data. Anything else is refused before `zipfile` ever opens the file.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import IO

from registry_index.errors import InvalidUpload

_LOCAL = struct.Struct("<IHHHHHIIIHH")
_CENTRAL = struct.Struct("<IHHHHHHIIIHHHHHII")
_EOCD = struct.Struct("<IHHHHIIH")
_ZIP64_LOCATOR = struct.Struct("<IIQI")
_ZIP64_EOCD = struct.Struct("<IQHHIIQQQQ")
_LOCAL_SIG, _CENTRAL_SIG, _EOCD_SIG = 0x04034B50, 0x02014B50, 0x06054B50
_ZIP64_LOCATOR_SIG, _ZIP64_EOCD_SIG = 0x07064B50, 0x06064B50
_ZIP64_EXTRA = 0x0001
_FLAG_DATA_DESCRIPTOR = 0x08
_FLAG_UTF8 = 0x800
_MAX16, _MAX32 = 0xFFFF, 0xFFFFFFFF


@dataclass(frozen=True)
class _Entry:
    name: bytes
    flags: int
    method: int
    crc: int
    compressed: int
    offset: int


def _refuse(reason: str) -> InvalidUpload:
    return InvalidUpload(
        f"The wheel is not a well-formed zip archive: {reason}. Rebuild it with a "
        "standard build backend (python -m build) and upload the file as built."
    )


def _read_at(handle: IO[bytes], offset: int, length: int) -> bytes:
    handle.seek(offset)
    data = handle.read(length)
    if len(data) != length:
        raise _refuse("it is truncated")
    return data


def _end_records(handle: IO[bytes], size: int) -> tuple[int, int, int]:
    """(entry count, central directory offset, central directory end) from the end records."""
    if size < _EOCD.size:
        raise _refuse("it is too short to be a zip file (truncated?)")
    eocd_pos = size - _EOCD.size
    sig, disk, cd_disk, _here, total, cd_size, cd_offset, comment = _EOCD.unpack(
        _read_at(handle, eocd_pos, _EOCD.size)
    )
    if sig != _EOCD_SIG:
        tail = _read_at(handle, max(0, size - 65_557), min(size, 65_557))
        if tail.rfind(struct.pack("<I", _EOCD_SIG)) >= 0:
            raise _refuse("it has a comment or trailing data after the end of the archive")
        raise _refuse("its end-of-archive record is missing (the file is truncated)")
    if comment != 0:
        raise _refuse("it has an archive comment")
    if disk != 0 or cd_disk != 0:
        raise _refuse("it is a multi-disk archive")
    if total != _MAX16 and _MAX32 not in (cd_size, cd_offset):
        if cd_offset + cd_size != eocd_pos:
            raise _refuse(
                "its central directory is not where the end record says (data prepended to "
                "the archive, or a second archive concatenated to it)"
            )
        return total, cd_offset, eocd_pos
    locator_pos = eocd_pos - _ZIP64_LOCATOR.size
    if locator_pos < 0:
        raise _refuse("its zip64 locator is missing")
    lsig, _disk, z64_pos, _disks = _ZIP64_LOCATOR.unpack(
        _read_at(handle, locator_pos, _ZIP64_LOCATOR.size)
    )
    if lsig != _ZIP64_LOCATOR_SIG or z64_pos + _ZIP64_EOCD.size > locator_pos:
        raise _refuse("its zip64 end records are malformed")
    zsig, rec_size, _made, _need, _d, _cd, _here64, total64, cd_size64, cd_offset64 = (
        _ZIP64_EOCD.unpack(_read_at(handle, z64_pos, _ZIP64_EOCD.size))
    )
    if zsig != _ZIP64_EOCD_SIG or z64_pos + 12 + rec_size != locator_pos:
        raise _refuse("its zip64 end record is malformed or followed by hidden data")
    if cd_offset64 + cd_size64 != z64_pos:
        raise _refuse("its central directory is not where the end record says")
    return total64, cd_offset64, z64_pos


def _zip64_values(extra: bytes, usize: int, csize: int, offset: int) -> tuple[int, int, int]:
    """Replace 0xFFFFFFFF placeholders with the zip64 extra field's values, in spec order."""
    pos = 0
    seen: set[int] = set()
    values = {"u": usize, "c": csize, "o": offset}
    while pos + 4 <= len(extra):
        field_id, length = struct.unpack_from("<HH", extra, pos)
        if field_id in seen:
            raise _refuse("a member has duplicate extra fields")
        seen.add(field_id)
        body = extra[pos + 4 : pos + 4 + length]
        if len(body) != length:
            raise _refuse("a member has a malformed extra field")
        if field_id == _ZIP64_EXTRA:
            cursor = 0
            for key in ("u", "c", "o"):
                if values[key] == _MAX32:
                    if cursor + 8 > len(body):
                        raise _refuse("a member's zip64 extra field is short")
                    values[key] = struct.unpack_from("<Q", body, cursor)[0]
                    cursor += 8
        pos += 4 + length
    if pos != len(extra):
        raise _refuse("a member has a malformed extra field")
    return values["u"], values["c"], values["o"]


def _central_entries(handle: IO[bytes], total: int, cd_offset: int, cd_end: int) -> list[_Entry]:
    directory = _read_at(handle, cd_offset, cd_end - cd_offset)
    entries: list[_Entry] = []
    pos = 0
    while pos < len(directory):
        if pos + _CENTRAL.size > len(directory):
            raise _refuse("its central directory is truncated")
        fields = _CENTRAL.unpack_from(directory, pos)
        sig, flags, method, crc, csize, usize = fields[0], *fields[3:5], *fields[7:10]
        name_len, extra_len, comment_len, disk, offset = *fields[10:14], fields[16]
        if sig != _CENTRAL_SIG:
            raise _refuse("its central directory is corrupt")
        if disk not in (0, _MAX16):
            raise _refuse("a member lives on another disk")
        start = pos + _CENTRAL.size
        name = directory[start : start + name_len]
        extra = directory[start + name_len : start + name_len + extra_len]
        pos = start + name_len + extra_len + comment_len
        if pos > len(directory):
            raise _refuse("its central directory is truncated")
        _usize, csize, offset = _zip64_values(extra, usize, csize, offset)
        entries.append(_Entry(name, flags, method, crc, csize, offset))
    if len(entries) != total:
        raise _refuse(
            f"its end record counts {total} members but the central directory holds {len(entries)}"
        )
    return entries


def _check_name_encoding(entry: _Entry) -> None:
    try:
        entry.name.decode("utf-8" if entry.flags & _FLAG_UTF8 else "ascii")
    except UnicodeDecodeError:
        raise _refuse(
            f"the member name {entry.name!r} is not valid UTF-8 or is not marked as UTF-8"
        ) from None


def check_zip_framing(handle: IO[bytes], size: int) -> None:
    """Raise `InvalidUpload` unless the zip's bytes are exactly: entries, directory, end record."""
    total, cd_offset, cd_end = _end_records(handle, size)
    if cd_offset > cd_end:
        raise _refuse("its central directory offset points past its end")
    entries = _central_entries(handle, total, cd_offset, cd_end)
    expected = 0
    for entry in sorted(entries, key=lambda e: e.offset):
        _check_name_encoding(entry)
        if entry.offset != expected:
            raise _refuse(
                "it contains bytes that no directory entry accounts for (data prepended to the "
                "archive, a second archive concatenated to it, or hidden between members)"
            )
        (sig, _need, flags, method, _t, _d, crc, csize, _usize, name_len, extra_len) = (
            _LOCAL.unpack(_read_at(handle, entry.offset, _LOCAL.size))
        )
        if sig != _LOCAL_SIG:
            raise _refuse(f"the local header of {entry.name!r} is missing")
        name = _read_at(handle, entry.offset + _LOCAL.size, name_len)
        if name != entry.name:
            raise _refuse(
                f"the member is called {name!r} in its local header but {entry.name!r} in the "
                "central directory"
            )
        if flags & _FLAG_DATA_DESCRIPTOR or entry.flags & _FLAG_DATA_DESCRIPTOR:
            raise _refuse(f"the member {entry.name!r} uses a data descriptor")
        if (
            method != entry.method
            or crc != entry.crc
            or (csize != _MAX32 and csize != entry.compressed)
        ):
            raise _refuse(
                f"the local header of {entry.name!r} disagrees with the central directory"
            )
        expected = entry.offset + _LOCAL.size + name_len + extra_len + entry.compressed
    if expected != cd_offset:
        raise _refuse(
            "it contains bytes between the last member and the central directory (a second "
            "archive or hidden data)"
        )
