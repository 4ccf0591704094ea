"""The source-tree content hash is stable across machines and ignores build noise."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from registry_index.content_hash import iter_tree_files, tree_content_hash


def _tree(root: Path) -> Path:
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text("x = 1\n")
    (root / "pyproject.toml").write_text("[project]\nname='x'\n")
    return root


def test_ignores_caches_builds_and_metadata(tmp_path: Path) -> None:
    root = _tree(tmp_path / "a")
    before = tree_content_hash(root)
    for noise in [".git/HEAD", "pkg/__pycache__/m.pyc", "dist/x.whl", "build/lib/x.py",
                  "x.egg-info/PKG-INFO", ".venv/bin/python", ".prime/state", "outputs/r.jsonl",
                  "pkg/stale.pyc", ".pytest_cache/v/x", ".mypy_cache/3.11/m.json",
                  ".ruff_cache/0/x", "pkg/.DS_Store"]:  # fmt: skip
        (root / noise).parent.mkdir(parents=True, exist_ok=True)
        (root / noise).write_text("noise")
    os.utime(root / "pkg" / "__init__.py", (0, 0))
    os.chmod(root / "pyproject.toml", 0o600)
    assert tree_content_hash(root) == before
    assert iter_tree_files(root) == ["pkg/__init__.py", "pyproject.toml"]


def test_same_content_elsewhere_same_hash(tmp_path: Path) -> None:
    first = _tree(tmp_path / "one")
    second = tmp_path / "elsewhere" / "two"
    shutil.copytree(first, second)
    assert tree_content_hash(first) == tree_content_hash(second)


def test_changes_in_content_or_layout_change_the_hash(tmp_path: Path) -> None:
    root = _tree(tmp_path / "a")
    base = tree_content_hash(root)
    (root / "pkg" / "__init__.py").write_text("x = 2\n")
    changed = tree_content_hash(root)
    assert changed != base
    (root / "pkg" / "__init__.py").rename(root / "pkg" / "main.py")
    assert tree_content_hash(root) not in {base, changed}


def test_boundaries_between_files_matter(tmp_path: Path) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir()
    two.mkdir()
    (one / "a").write_text("xb")
    (one / "b").write_text("")
    (two / "a").write_text("x")
    (two / "b").write_text("b")
    assert tree_content_hash(one) != tree_content_hash(two)


def test_symlinked_directory_counts_as_a_link(tmp_path: Path) -> None:
    root = _tree(tmp_path / "a")
    (root / "alias").symlink_to("pkg", target_is_directory=True)
    assert "alias" in iter_tree_files(root)
    before = tree_content_hash(root)
    (root / "alias").unlink()
    (root / "alias").symlink_to("elsewhere")
    assert tree_content_hash(root) != before
