"""Content hashes: of one file, and of an environment source tree.

`prime env push` refuses to publish unchanged content, and the hub records which source a
version was built from, so the hash must be the same on every machine: it covers sorted
relative POSIX paths and file bytes only (no mtimes, modes or OS path separators), and skips
build outputs, caches and virtual environments that differ between machines.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

IGNORED_DIRS = frozenset(
    {".git", "__pycache__", "dist", "build", ".venv", ".prime", "outputs",
     # tool caches: they differ between machines and never belong to the source
     ".pytest_cache", ".mypy_cache", ".ruff_cache", ".tox", ".nox", ".DS_Store"}
)  # fmt: skip
IGNORED_SUFFIXES = (".pyc", ".egg-info")


def _ignored(name: str) -> bool:
    return name in IGNORED_DIRS or name.endswith(IGNORED_SUFFIXES)


def iter_tree_files(root: Path) -> list[str]:
    """Relative POSIX paths of the files that count, sorted; symlinks are not followed."""
    found: list[str] = []
    for directory, dirnames, filenames in os.walk(root):
        dirnames[:] = [name for name in dirnames if not _ignored(name)]
        rel_dir = Path(directory).relative_to(root)
        # os.walk does not descend into symlinked directories; count them as links instead.
        linked_dirs = [name for name in dirnames if (Path(directory) / name).is_symlink()]
        dirnames[:] = [name for name in dirnames if name not in linked_dirs]
        for name in [*filenames, *linked_dirs]:
            if _ignored(name):
                continue
            found.append((rel_dir / name).as_posix())
    return sorted(found)


def file_sha256(path: Path) -> str:
    """Hex sha256 of a file's bytes, read a MiB at a time (wheels, weights)."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def tree_content_hash(root: Path) -> str:
    """Hex sha256 over every counted file: its path, its length, then its bytes.

    Length-prefixing keeps `a` + `bc` distinct from `ab` + `c`.
    """
    digest = hashlib.sha256()
    for rel in iter_tree_files(root):
        path = root / rel
        encoded = rel.encode("utf-8")
        digest.update(len(encoded).to_bytes(8, "big") + encoded)
        if path.is_symlink():
            target = os.readlink(path).encode("utf-8")
            digest.update(b"L" + len(target).to_bytes(8, "big") + target)
            continue
        digest.update(b"F" + path.stat().st_size.to_bytes(8, "big"))
        with path.open("rb") as handle:
            while chunk := handle.read(1024 * 1024):
                digest.update(chunk)
    return digest.hexdigest()
