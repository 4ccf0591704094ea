"""The small file rules: atomic replacement, lenient JSONL, path slugs, file hashes."""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

import pytest

from registry_index.content_hash import file_sha256
from registry_index.files import (
    atomic_directory,
    atomic_writer,
    read_jsonl,
    slug,
    utc_now,
    write_atomic,
    write_json_atomic,
    write_lines_atomic,
)


def test_a_failed_write_leaves_the_old_file_and_no_scratch(tmp_path: Path) -> None:
    target = tmp_path / "meta.json"
    write_json_atomic(target, {"a": 1})
    with pytest.raises(RuntimeError), atomic_writer(target) as handle:
        handle.write('{"torn": ')
        raise RuntimeError("killed mid-write")
    assert target.read_text() == '{\n  "a": 1\n}\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["meta.json"]


def test_parents_are_made_and_lines_are_streamed(tmp_path: Path) -> None:
    target = tmp_path / "deep" / "er" / "rows.jsonl"
    assert write_lines_atomic(target, (f'{{"i": {i}}}' for i in range(3))) == 3
    assert read_jsonl(target) == [{"i": 0}, {"i": 1}, {"i": 2}]


def test_a_secret_gets_its_mode_whatever_the_umask(tmp_path: Path) -> None:
    old = os.umask(0o077)
    try:
        write_atomic(tmp_path / "config.toml", "token = 'x'\n", mode=0o600, durable=True)
        write_atomic(tmp_path / "open.txt", "x", mode=0o644)
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "config.toml").stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "open.txt").stat().st_mode) == 0o644


def test_read_jsonl_skips_a_torn_line_and_reads_a_missing_file_as_empty(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    assert read_jsonl(path) == []
    path.write_text('{"step": 1}\nnot json\n{"step": 2}\n{"step": 3, "lo')
    assert read_jsonl(path) == [{"step": 1}, {"step": 2}]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("prime/arithmetic@0.1", "prime--arithmetic-0.1"),
        ("./envs/my env.py", "envs--my_env.py"),
        ("~/x", "x"),
        ("local/smollm2-135m", "local--smollm2-135m"),
        ("ollama:llama3", "ollama_llama3"),
    ],
)
def test_slug(text: str, expected: str) -> None:
    assert slug(text) == expected


def test_utc_now_is_seconds_in_utc() -> None:
    stamp = utc_now()
    assert stamp.endswith("Z") and len(stamp) == len("2026-12-04T09:30:00Z")


def test_file_sha256_matches_hashlib(tmp_path: Path) -> None:
    data = os.urandom((1 << 20) + 17)  # more than one read block
    (tmp_path / "w.bin").write_bytes(data)
    assert file_sha256(tmp_path / "w.bin") == hashlib.sha256(data).hexdigest()


def test_a_directory_appears_whole_or_not_at_all(tmp_path: Path) -> None:
    dest = tmp_path / "project"
    with pytest.raises(RuntimeError), atomic_directory(dest) as staging:
        (staging / "half.txt").write_text("x")
        raise RuntimeError("failed while filling it")
    assert list(tmp_path.iterdir()) == []
    dest.mkdir()  # an empty directory is taken over
    with atomic_directory(dest) as staging:
        (staging / "pyproject.toml").write_text("[project]\n")
    assert [p.name for p in tmp_path.iterdir()] == ["project"]
    assert (dest / "pyproject.toml").read_text() == "[project]\n"
