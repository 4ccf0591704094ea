"""Source archives are extracted all-or-nothing, and hostile ones not at all."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from prime_cli.env.pull import PullError, extract_archive
from registry_index.validation import UploadLimits


def _archive(path: Path, members: list[tarfile.TarInfo], data: bytes = b"x") -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for member in members:
            if member.isfile():
                member.size = len(data)
                tar.addfile(member, io.BytesIO(data))
            else:
                tar.addfile(member)
    return path


def _member(name: str, kind: bytes = tarfile.REGTYPE, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, link
    return info


def test_extracts_a_normal_archive(tmp_path: Path) -> None:
    archive = _archive(tmp_path / "ok.tar.gz", [_member("pyproject.toml"), _member("pkg/mod.py")])
    dest = extract_archive(archive, tmp_path / "out")
    assert sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*")) == [
        "pkg",
        "pkg/mod.py",
        "pyproject.toml",
    ]


@pytest.mark.parametrize(
    "member",
    [
        _member("../escaped.txt"),
        _member("link", tarfile.SYMTYPE, "../../etc/passwd"),
        _member("dev", tarfile.CHRTYPE),
    ],
    ids=["dotdot", "symlink-out", "device"],
)
def test_hostile_archives_leave_nothing(tmp_path: Path, member: tarfile.TarInfo) -> None:
    work = tmp_path / "work"
    work.mkdir()
    archive = _archive(tmp_path / "bad.tar.gz", [_member("README.md"), member])
    with pytest.raises(PullError, match="unsafe or broken"):
        extract_archive(archive, work / "out")
    assert list(work.iterdir()) == []
    assert not (tmp_path / "escaped.txt").exists()


def test_truncated_archive_is_refused(tmp_path: Path) -> None:
    archive = _archive(tmp_path / "ok.tar.gz", [_member("a.py")])
    archive.write_bytes(archive.read_bytes()[:20])
    with pytest.raises(PullError):
        extract_archive(archive, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_absolute_names_are_refused(tmp_path: Path) -> None:
    archive = _archive(tmp_path / "abs.tar.gz", [_member("/abs/inside.txt")])
    with pytest.raises(PullError, match="absolute path"):
        extract_archive(archive, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_a_bomb_from_a_hostile_hub_writes_nothing(tmp_path: Path) -> None:
    """A ~64 KiB archive that would unpack to 64 MiB: refused while decompressing, before any
    write (the budget is 50x the compressed size, at least 16 MiB)."""
    work = tmp_path / "work"
    work.mkdir()
    archive = tmp_path / "bomb.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        info = tarfile.TarInfo("zeros.bin")
        info.size = 64 * 1024 * 1024
        tar.addfile(info, _Zeros(info.size))
    assert archive.stat().st_size < 1024 * 1024
    with pytest.raises(PullError, match="compression bomb"):
        extract_archive(archive, work / "out")
    assert list(work.iterdir()) == []


def test_too_many_members_are_refused(tmp_path: Path) -> None:
    archive = _archive(tmp_path / "many.tar.gz", [_member(f"f{i}.py") for i in range(50)])
    with pytest.raises(PullError, match="more than 40 files"):
        extract_archive(archive, tmp_path / "out", UploadLimits(max_members=40))
    assert not (tmp_path / "out").exists()


class _Zeros(io.RawIOBase):
    """`size` zero bytes, produced on demand (never held in memory at once)."""

    def __init__(self, size: int) -> None:
        self._left = size

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        count = min(len(buffer), self._left)
        buffer[:count] = bytes(count)
        self._left -= count
        return count
