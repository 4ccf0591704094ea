"""Source archives are extracted all-or-nothing, and hostile ones not at all."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from prime_cli.env_pull import PullError, extract_archive


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


def test_absolute_names_stay_inside(tmp_path: Path) -> None:
    archive = _archive(tmp_path / "abs.tar.gz", [_member("/abs/inside.txt")])
    dest = extract_archive(archive, tmp_path / "out")
    assert (dest / "abs" / "inside.txt").is_file()
