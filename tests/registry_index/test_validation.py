"""Upload validation against real and hostile archives: every refusal is an InvalidUpload
whose message says what is wrong and how to fix it."""

from __future__ import annotations

import io
import shutil
import subprocess
import sys
import tarfile
import warnings
import zipfile
from pathlib import Path

import pytest

from registry_index.errors import InvalidUpload
from registry_index.validation import (
    DEFAULT_LIMITS,
    UploadLimits,
    validate_distribution,
    validate_source_archive,
)
from registry_index.zipframing import check_zip_framing
from tests.registry_index.wheelmaker import (
    make_sdist,
    make_wheel,
    metadata_text,
    raw_zip,
    wheel_members,
    write_zip,
)

WHEEL = "demo_env-1.0.0-py3-none-any.whl"


def refused(path: Path, filename: str | None = None, limits: UploadLimits = DEFAULT_LIMITS) -> str:
    """The refusal of the file at `path`; the same bytes held in memory (how the hub checks a
    small upload) are refused with the same message."""
    with pytest.raises(InvalidUpload) as info:
        validate_distribution(path, filename or path.name, limits)
    message = str(info.value)
    assert message[0].isupper() or message.startswith("'"), message
    assert message.rstrip().endswith("."), message
    with pytest.raises(InvalidUpload) as in_memory:
        validate_distribution(path.read_bytes(), filename or path.name, limits)
    assert str(in_memory.value) == message
    return message


def test_valid_wheel_reports_hashes_and_metadata(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path)
    result = validate_distribution(wheel, wheel.name)
    assert result.filename.name == "demo-env"
    assert str(result.metadata.version) == "1.0.0"
    assert result.metadata.requires_python == ">=3.9"
    assert result.size == wheel.stat().st_size
    assert len(result.sha256) == 64 and len(result.blake2_256) == 64
    assert result.metadata_sha256 is not None


def test_bytes_in_memory_validate_like_the_same_file(tmp_path: Path) -> None:
    for dist in (make_wheel(tmp_path), make_sdist(tmp_path)):
        assert validate_distribution(dist.read_bytes(), dist.name) == validate_distribution(
            dist, dist.name
        )


def test_wheel_and_sdist_built_by_build_backend_pass(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    (project / "src" / "hello_env").mkdir(parents=True)
    (project / "src" / "hello_env" / "__init__.py").write_text("def load_environment():\n    ...\n")
    (project / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n'
        '[project]\nname = "Hello.Env"\nversion = "0.3.0"\nrequires-python = ">=3.10"\n'
        'dependencies = ["packaging>=24"]\n'
    )
    subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(tmp_path / "dist"),
         str(project)],
        check=True, capture_output=True,
    )  # fmt: skip
    built = sorted((tmp_path / "dist").iterdir())
    assert {p.suffix for p in built} == {".whl", ".gz"}
    for dist in built:
        result = validate_distribution(dist, dist.name)
        assert result.metadata.name == "Hello.Env"
        assert result.metadata.requires_dist == ["packaging>=24"]


# --- filenames ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("filename", "fragment"),
    [
        ("../" + WHEEL, "path separator"),
        ("..\\" + WHEEL, "path separator"),
        ("demo_env-1.0.0-py3-none-any\x00.whl", "control characters"),
        ("demo_env-1.0.0-py3-none-any\n.whl", "control characters"),
        ("demo_env-1.0.0+local-py3-none-any.whl", "local version"),
        ("demo_env-1.0.0-py3-none-evil_os.whl", "unsupported platform tag"),
        ("demo_env-1.0.0-py3-none-linux_x86_64.whl", "unsupported platform tag"),
        ("demo_env-1.0.0-!!-none-any.whl", "Invalid wheel filename"),
        ("demo_env-1.0.0.zip", "only wheels"),
        ("demo_env.whl", "Invalid wheel filename"),
    ],
)
def test_bad_filenames_refused(tmp_path: Path, filename: str, fragment: str) -> None:
    wheel = make_wheel(tmp_path)
    assert fragment in refused(wheel, filename)


def test_name_mismatch_with_metadata(tmp_path: Path) -> None:
    wheel = write_zip(tmp_path / WHEEL, wheel_members(meta_name="other-env"))
    message = refused(wheel)
    assert "'demo-env'" in message and "'other-env'" in message and "rebuild" in message


def test_version_mismatch_with_metadata(tmp_path: Path) -> None:
    wheel = write_zip(tmp_path / WHEEL, wheel_members(meta_version="2.0.0"))
    assert "says version 1.0.0 but its metadata says 2.0.0" in refused(wheel)


def test_renamed_wheel_refused(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path)
    renamed = wheel.with_name("demo_env-1.0.1-py3-none-any.whl")
    wheel.rename(renamed)
    assert "does not match its filename" in refused(renamed)


# --- zip framing ---------------------------------------------------------------------------


def test_truncated_zip(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path)
    data = wheel.read_bytes()
    wheel.write_bytes(data[: len(data) // 2])
    assert "truncated" in refused(wheel)


def test_doubled_zip(tmp_path: Path) -> None:
    first = make_wheel(tmp_path)
    first = first.rename(tmp_path / "first.whl")
    other = write_zip(tmp_path / "other.zip", wheel_members(extra={"demo_env/evil.py": b"pwn"}))
    doubled = tmp_path / WHEEL
    doubled.write_bytes(first.read_bytes() + other.read_bytes())
    assert "second archive" in refused(doubled)


def test_prepended_data(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path)
    wheel.write_bytes(b"#!/bin/sh\necho hi\n" + wheel.read_bytes())
    assert "prepended" in refused(wheel)


def test_trailing_data(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path)
    wheel.write_bytes(wheel.read_bytes() + b"junk")
    assert "trailing data" in refused(wheel)


def test_archive_comment(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path)
    with zipfile.ZipFile(wheel, "a") as archive:
        archive.comment = b"hello"
    assert "comment" in refused(wheel)


def test_data_descriptor_refused(tmp_path: Path) -> None:
    buffer = io.BytesIO()

    class Unseekable(io.RawIOBase):
        def writable(self) -> bool:
            return True

        def write(self, data: bytes) -> int:  # type: ignore[override]
            return buffer.write(data)

    with zipfile.ZipFile(Unseekable(), "w", zipfile.ZIP_DEFLATED) as archive:
        for member, data in wheel_members().items():
            archive.writestr(member, data)
    wheel = tmp_path / WHEEL
    wheel.write_bytes(buffer.getvalue())
    assert "data descriptor" in refused(wheel)


def test_local_header_name_differs_from_directory(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path)
    data = bytearray(wheel.read_bytes())
    position = data.index(b"demo_env/__init__.py")  # first occurrence: the local header
    data[position : position + 8] = b"evil_env"
    wheel.write_bytes(bytes(data))
    assert "local header" in refused(wheel)


# --- members -----------------------------------------------------------------------------


def test_duplicate_members(tmp_path: Path) -> None:
    members = wheel_members()
    wheel = tmp_path / WHEEL
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with zipfile.ZipFile(wheel, "w") as archive:
            for member, data in members.items():
                archive.writestr(member, data)
            archive.writestr("demo_env/__init__.py", b"import os; os.system('evil')\n")
    assert "twice" in refused(wheel)


@pytest.mark.parametrize(
    ("member", "fragment"),
    [
        ("../evil.py", "path traversal"),
        ("demo_env/../../evil.py", "path traversal"),
        ("/etc/evil.py", "absolute path"),
        ("C:/evil.py", "absolute path"),
        ("demo_env\\evil.py", "backslash"),
        ("demo_env/ev\x1bil.py", "control characters"),
    ],
)
def test_hostile_member_names(tmp_path: Path, member: str, fragment: str) -> None:
    wheel = write_zip(tmp_path / WHEEL, wheel_members(extra={member: b"x"}))
    assert fragment in refused(wheel)


def test_empty_member_name(tmp_path: Path) -> None:
    wheel = tmp_path / WHEEL
    wheel.write_bytes(
        raw_zip([(b"", b"x"), *((n.encode(), d) for n, d in wheel_members().items())])
    )
    assert "empty name" in refused(wheel)


def test_unsupported_compression(tmp_path: Path) -> None:
    wheel = write_zip(tmp_path / WHEEL, wheel_members(), compression=zipfile.ZIP_BZIP2)
    assert "unsupported compression method" in refused(wheel)


@pytest.mark.parametrize("missing", ["RECORD", "WHEEL", "METADATA"])
def test_missing_dist_info_files(tmp_path: Path, missing: str) -> None:
    wheel = write_zip(tmp_path / WHEEL, wheel_members(skip=frozenset({missing})))
    assert f"missing demo_env-1.0.0.dist-info/{missing}" in refused(wheel)


def test_two_dist_info_directories(tmp_path: Path) -> None:
    extra = {"other-2.0.dist-info/METADATA": metadata_text("other", "2.0").encode()}
    wheel = write_zip(tmp_path / WHEEL, wheel_members(extra=extra))
    assert "exactly one top-level .dist-info" in refused(wheel)


def test_record_hash_mismatch(tmp_path: Path) -> None:
    members = wheel_members()
    members["demo_env/__init__.py"] = b"import os\nos.system('tampered')\n"
    wheel = write_zip(tmp_path / WHEEL, members)
    assert "modified after it was built" in refused(wheel)


def test_file_missing_from_record(tmp_path: Path) -> None:
    members = wheel_members()
    members["demo_env/sneaky.py"] = b"print('hi')\n"
    wheel = write_zip(tmp_path / WHEEL, members)
    assert "not listed in" in refused(wheel)


def test_bad_wheel_version(tmp_path: Path) -> None:
    newer = {"demo_env-1.0.0.dist-info/WHEEL": b"Wheel-Version: 2.0\nTag: py3-none-any\n"}
    wheel = write_zip(tmp_path / WHEEL, wheel_members(extra=newer))
    assert "declares Wheel-Version '2.0'" in refused(wheel)


def test_invalid_core_metadata(tmp_path: Path) -> None:
    bad = b"Metadata-Version: 2.1\nName: demo_env\nVersion: 1.0.0\nRequires-Python: >>3\n"
    wheel = write_zip(
        tmp_path / WHEEL, wheel_members(extra={"demo_env-1.0.0.dist-info/METADATA": bad})
    )
    assert "'>>3' is invalid for 'requires-python'" in refused(wheel)


# --- sizes and bombs ---------------------------------------------------------------------


def test_oversized_file(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path)
    with wheel.open("r+b") as handle:  # sparse: cheap on disk
        handle.truncate(101 * 1024 * 1024)
    assert "larger than the 100.0 MiB limit" in refused(wheel)


def test_empty_file(tmp_path: Path) -> None:
    wheel = tmp_path / WHEEL
    wheel.write_bytes(b"")
    assert "is empty" in refused(wheel)


def test_zip_bomb_by_ratio(tmp_path: Path) -> None:
    zeros = bytes(64 * 1024 * 1024)
    wheel = write_zip(tmp_path / WHEEL, wheel_members(extra={"demo_env/data.bin": zeros}))
    assert wheel.stat().st_size < 1024 * 1024
    assert "zip bomb" in refused(wheel)


def test_zip_bomb_total_uncompressed_limit(tmp_path: Path) -> None:
    data = {f"demo_env/d{i}.txt": bytes(range(256)) * 4096 for i in range(4)}
    wheel = write_zip(tmp_path / WHEEL, wheel_members(extra=data))
    limits = UploadLimits(max_uncompressed_size=2 * 1024 * 1024)
    assert "unpacks to more than 2.0 MiB" in refused(wheel, limits=limits)


def test_lying_size_header(tmp_path: Path) -> None:
    """A directory that understates a member's size must not let the real bytes through."""
    payload = b"A" * 100_000
    wheel = write_zip(tmp_path / WHEEL, wheel_members(extra={"demo_env/data.txt": payload}))
    data = bytearray(wheel.read_bytes())
    size_field = (100_000).to_bytes(4, "little")
    small = (10).to_bytes(4, "little")
    count = data.count(size_field)
    assert count == 2  # local header and central directory
    wheel.write_bytes(bytes(data).replace(size_field, small))
    message = refused(wheel)
    assert "corrupt" in message or "zip bomb" in message


def test_too_many_members(tmp_path: Path) -> None:
    extra = {f"demo_env/m{i}.py": b"" for i in range(20)}
    wheel = write_zip(tmp_path / WHEEL, wheel_members(extra=extra))
    assert "members, more than the 10 allowed" in refused(
        wheel, limits=UploadLimits(max_members=10)
    )


# --- sdists ------------------------------------------------------------------------------


def _link(name: str, target: str, kind: bytes = tarfile.SYMTYPE) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = target
    return info


def test_valid_sdist(tmp_path: Path) -> None:
    inside = _link("demo_env-1.0.0/alias.py", "demo_env/__init__.py")
    sdist = make_sdist(tmp_path, extra=[inside])
    result = validate_distribution(sdist, sdist.name)
    assert result.filename.kind == "sdist" and result.metadata_sha256 is None


@pytest.mark.parametrize(
    ("member", "fragment"),
    [
        (_link("demo_env-1.0.0/evil", "../../etc/passwd"), "points outside"),
        (_link("demo_env-1.0.0/evil", "/etc/passwd"), "points outside"),
        (_link("demo_env-1.0.0/evil", "../other/x", tarfile.LNKTYPE), "points outside"),
        (tarfile.TarInfo("demo_env-1.0.0/../../evil.py"), "path traversal"),
        (tarfile.TarInfo("/tmp/evil.py"), "absolute path"),
        (tarfile.TarInfo("other-dir/evil.py"), "outside the top-level directory"),
        (_link("demo_env-1.0.0/dev", "", tarfile.CHRTYPE), "device"),
    ],
)
def test_hostile_sdist_members(tmp_path: Path, member: tarfile.TarInfo, fragment: str) -> None:
    sdist = make_sdist(tmp_path, extra=[member])
    assert fragment in refused(sdist)


def test_sdist_without_pkg_info(tmp_path: Path) -> None:
    sdist = make_sdist(tmp_path, pkg_info=False)
    assert "has no demo_env-1.0.0/PKG-INFO" in refused(sdist)


def test_sdist_renamed(tmp_path: Path) -> None:
    sdist = make_sdist(tmp_path)
    renamed = sdist.with_name("other_env-1.0.0.tar.gz")
    shutil.move(sdist, renamed)
    assert "outside the top-level directory" in refused(renamed)


def test_sdist_gzip_bomb(tmp_path: Path) -> None:
    bomb = tarfile.TarInfo("demo_env-1.0.0/zeros.bin")
    bomb.size = 64 * 1024 * 1024
    sdist = tmp_path / "demo_env-1.0.0.tar.gz"
    with tarfile.open(sdist, "w:gz") as archive:
        archive.addfile(bomb, io.BytesIO(bytes(bomb.size)))
    assert sdist.stat().st_size < 1024 * 1024
    assert "compression bomb" in refused(sdist)


def test_sdist_not_gzip(tmp_path: Path) -> None:
    sdist = tmp_path / "demo_env-1.0.0.tar.gz"
    sdist.write_bytes(b"definitely not gzip")
    assert "not a valid .tar.gz" in refused(sdist)


def test_entry_points_are_parsed(tmp_path: Path) -> None:
    good = b"[prime.environments]\ndemo-env = demo_env:load_environment\n"
    ok = write_zip(
        tmp_path / WHEEL, wheel_members(extra={"demo_env-1.0.0.dist-info/entry_points.txt": good})
    )
    validate_distribution(ok, ok.name)
    bad = b"demo-env = demo_env:load_environment\n"  # no section header
    wheel = write_zip(
        tmp_path / WHEEL, wheel_members(extra={"demo_env-1.0.0.dist-info/entry_points.txt": bad})
    )
    assert "entry_points.txt cannot be parsed" in refused(wheel)


def test_duplicate_after_path_normalisation(tmp_path: Path) -> None:
    wheel = write_zip(tmp_path / WHEEL, wheel_members(extra={"demo_env//__init__.py": b"evil"}))
    assert "twice" in refused(wheel)


def test_zip64_member_headers_are_accepted(tmp_path: Path) -> None:
    wheel = tmp_path / WHEEL
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as archive:
        for member, data in wheel_members().items():
            with archive.open(member, "w", force_zip64=True) as stream:
                stream.write(data)
    assert validate_distribution(wheel, wheel.name).metadata.name == "demo_env"


def test_zip64_end_records_framing(tmp_path: Path) -> None:
    """65,536 entries force zip64 end records; their framing is checked like the classic one."""
    big = tmp_path / "big.zip"
    with zipfile.ZipFile(big, "w") as archive:
        for index in range(65_536):
            archive.writestr(f"f{index}", b"")
    with big.open("rb") as handle:
        check_zip_framing(handle, big.stat().st_size)
    junk = tmp_path / "junk.zip"
    junk.write_bytes(b"prefix" + big.read_bytes())
    with (
        junk.open("rb") as handle,
        pytest.raises(InvalidUpload, match="zip64 end record is malformed"),
    ):
        check_zip_framing(handle, junk.stat().st_size)


def test_validation_extracts_nothing(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path)
    sdist = make_sdist(tmp_path)
    before = sorted(tmp_path.rglob("*"))
    validate_distribution(wheel, wheel.name)
    validate_distribution(sdist, sdist.name)
    assert sorted(tmp_path.rglob("*")) == before


# --- direct URL dependencies (refused, as PyPI does) -----------------------------------------


def _wheel_requiring(tmp_path: Path, *requirements: str) -> Path:
    meta = metadata_text("demo_env", "1.0.0").replace(
        "Summary: demo env\n",
        "Summary: demo env\n" + "".join(f"Requires-Dist: {r}\n" for r in requirements),
    )
    members = wheel_members(extra={"demo_env-1.0.0.dist-info/METADATA": meta.encode()})
    return write_zip(tmp_path / WHEEL, members)


@pytest.mark.parametrize(
    "requirement",
    [
        "evil @ file:///tmp/evil",
        "evil @ https://example.invalid/evil-1.0.tar.gz",
        "evil @ git+https://example.invalid/evil.git@main",
        "evil[extra] @ https://example.invalid/evil.whl ; python_version >= '3'",
    ],
)
def test_direct_url_dependencies_are_refused(tmp_path: Path, requirement: str) -> None:
    message = refused(_wheel_requiring(tmp_path, "packaging>=24", requirement))
    assert "direct URL dependency" in message and "'evil'" in message


def test_direct_url_in_sdist_metadata_is_refused(tmp_path: Path) -> None:
    sdist = make_sdist(tmp_path)
    with tarfile.open(sdist, "r:gz") as archive:
        members = [(m, archive.extractfile(m).read()) for m in archive if m.isreg()]  # type: ignore[union-attr]
    with tarfile.open(sdist, "w:gz") as archive:
        for member, data in members:
            if member.name.endswith("PKG-INFO"):
                data = data.replace(b"Summary", b"Requires-Dist: x @ git+https://h/x\nSummary")
                member.size = len(data)
            archive.addfile(member, io.BytesIO(data))
    assert "direct URL dependency 'x @ git+https://h/x'" in refused(sdist)


def test_named_dependencies_pass(tmp_path: Path) -> None:
    wheel = _wheel_requiring(tmp_path, "packaging>=24", "prime-envhub-sdk[sandbox]>=0.1")
    assert validate_distribution(wheel, wheel.name).metadata.requires_dist == [
        "packaging>=24",
        "prime-envhub-sdk[sandbox]>=0.1",
    ]


# --- source archives (`prime env push` uploads them, `prime env pull` unpacks them) ---------


def _source_archive(tmp_path: Path, members: dict[str, bytes]) -> Path:
    path = tmp_path / "demo-env-1.0.0-abc.tar.gz"
    with tarfile.open(path, "w:gz") as archive:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return path


def test_source_archive_valid(tmp_path: Path) -> None:
    archive = _source_archive(tmp_path, {"pyproject.toml": b"[project]\n", "demo_env.py": b"x=1\n"})
    validate_source_archive(archive, archive.name)


def test_source_archive_bomb_and_member_count(tmp_path: Path) -> None:
    bomb = _source_archive(tmp_path, {"zeros.bin": bytes(64 * 1024 * 1024)})
    assert bomb.stat().st_size < 1024 * 1024
    with pytest.raises(InvalidUpload, match="source archive unpacks to more than"):
        validate_source_archive(bomb, bomb.name)
    many = _source_archive(tmp_path, {f"f{i}.txt": b"" for i in range(30)})
    with pytest.raises(InvalidUpload, match="more than 20 files"):
        validate_source_archive(many, many.name, UploadLimits(max_members=20))


@pytest.mark.parametrize(
    ("member", "fragment"),
    [
        (_link("evil", "/etc/passwd"), "link or special file"),
        (tarfile.TarInfo("../evil.py"), "path traversal"),
        (tarfile.TarInfo("/tmp/evil.py"), "absolute path"),
    ],
)
def test_source_archive_hostile_members(
    tmp_path: Path, member: tarfile.TarInfo, fragment: str
) -> None:
    path = tmp_path / "demo-env-1.0.0-abc.tar.gz"
    with tarfile.open(path, "w:gz") as archive:
        archive.addfile(member, io.BytesIO(b"") if member.isreg() else None)
    with pytest.raises(InvalidUpload, match=fragment):
        validate_source_archive(path, path.name)
