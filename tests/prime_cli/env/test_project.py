"""What `prime env push` checks locally before building: the environment is there; version bumps."""

from __future__ import annotations

from pathlib import Path

import pytest

from prime_cli.env.project import (
    ProjectError,
    bumped_version,
    check_environment,
    load_project,
    write_version,
)


def _project(root: Path, module: str | None, source: str, entry: str | None = None) -> Path:
    root.mkdir()
    text = '[project]\nname = "my-env"\nversion = "1.2.3"\n\n[tool.x]\nversion = "keep"\n'
    if entry is not None:
        text += f'\n[project.entry-points."prime.environments"]\nmy-env = "{entry}"\n'
    (root / "pyproject.toml").write_text(text)
    if module is not None:
        path = root / module
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source)
    return root


def test_module_named_after_the_project(tmp_path: Path) -> None:
    root = _project(tmp_path / "a", "my_env.py", "def load_environment(**kw):\n    pass\n")
    assert check_environment(load_project(root)) == "my_env:load_environment"
    root = _project(
        tmp_path / "b", "src/my_env/__init__.py", "from .impl import load_environment\n"
    )
    assert check_environment(load_project(root)) == "my_env:load_environment"


def test_entry_point_must_name_something_real(tmp_path: Path) -> None:
    root = _project(tmp_path / "a", "pkg/core.py", "def make(): ...\n", entry="pkg.core:make")
    assert check_environment(load_project(root)) == "pkg.core:make"
    root = _project(tmp_path / "b", "pkg/core.py", "def other(): ...\n", entry="pkg.core:make")
    with pytest.raises(ProjectError, match="does not define"):
        check_environment(load_project(root))
    root = _project(tmp_path / "c", None, "", entry="missing:load_environment")
    with pytest.raises(ProjectError, match="not in the project"):
        check_environment(load_project(root))


def test_no_environment_says_how_to_add_one(tmp_path: Path) -> None:
    root = _project(tmp_path / "a", "my_env.py", "VALUE = 1\n")
    with pytest.raises(ProjectError, match="does not define load_environment") as caught:
        check_environment(load_project(root))
    assert "prime.environments" in str(caught.value)
    root = _project(tmp_path / "b", "other.py", "def load_environment(): ...\n")
    with pytest.raises(ProjectError, match="has no environment: no module 'my_env'"):
        check_environment(load_project(root))
    root = _project(tmp_path / "c", "my_env.py", "def broken(:\n")
    with pytest.raises(ProjectError, match="does not parse"):
        check_environment(load_project(root))


@pytest.mark.parametrize(
    ("version", "kind", "expected"),
    [
        ("1.2.3", "patch", "1.2.4"),
        ("1.2", "patch", "1.2.1"),
        ("1.2.4rc1", "patch", "1.2.4"),
        ("1.2.3", "rc", "1.2.4rc0"),
        ("1.2.4rc0", "rc", "1.2.4rc1"),
        ("1.2.3", "post", "1.2.3.post0"),
        ("1.2.3.post0", "post", "1.2.3.post1"),
    ],
)
def test_bumps(version: str, kind: str, expected: str) -> None:
    assert bumped_version(version, kind) == expected


def test_write_version_changes_only_the_project_version(tmp_path: Path) -> None:
    root = _project(tmp_path / "a", "my_env.py", "def load_environment(): ...\n")
    before = (root / "pyproject.toml").read_text()
    assert write_version(load_project(root), "1.2.4").version == "1.2.4"
    after = (root / "pyproject.toml").read_text()
    assert after == before.replace('version = "1.2.3"', 'version = "1.2.4"')
    assert 'version = "keep"' in after
