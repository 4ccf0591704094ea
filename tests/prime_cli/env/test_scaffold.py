"""`prime env init` produces a package that builds, validates and loads as it is."""

from __future__ import annotations

import importlib.util
import os
import stat
import sys
import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner

from prime_cli.env.project import build_distributions, load_project
from prime_cli.main import cli
from prime_env import Environment
from registry_index.validation import validate_distribution


def test_init_build_validate_and_load(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    result = CliRunner().invoke(cli, ["env", "init", "demo-math", "--path", str(tmp_path)])
    assert result.exit_code == 0, result.output
    root = tmp_path / "demo-math"
    assert sorted(p.name for p in root.iterdir()) == [
        ".gitignore",
        "README.md",
        "demo_math.py",
        "pyproject.toml",
    ]
    ignored = (root / ".gitignore").read_text().split()
    assert {"build/", "dist/", "*.egg-info/", "outputs/"} <= set(ignored)

    pyproject = tomllib.loads((root / "pyproject.toml").read_text())
    # Environments depend on the light SDK only, never on the hub + CLI distribution.
    assert pyproject["project"]["dependencies"] == ["prime-envhub-sdk>=0.1"]
    entry = pyproject["project"]["entry-points"]["prime.environments"]
    assert entry == {"demo-math": "demo_math:load_environment"}
    readme = (root / "README.md").read_text()
    for section in (
        "Overview",
        "Datasets",
        "Task",
        "Quickstart",
        "Environment Arguments",
        "Metrics",
    ):
        assert f"## {section}" in readme

    project = load_project(root)
    assert (project.name, project.version, project.tags) == (
        "demo-math",
        "0.1.0",
        ["single-turn", "example"],
    )
    built = build_distributions(project, tmp_path / "dist")
    checked = validate_distribution(built.wheel, built.wheel.name)
    assert checked.metadata.name == "demo-math" and str(checked.metadata.version) == "0.1.0"
    assert built.sdist is not None and validate_distribution(built.sdist, built.sdist.name)

    spec = importlib.util.spec_from_file_location("demo_math", root / "demo_math.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "demo_math", module)
    spec.loader.exec_module(module)
    env = module.load_environment(num_examples=2)
    assert isinstance(env, Environment) and len(env.tasks) == 2
    assert module.correct_answer([{"role": "assistant", "content": "It is 42"}], "42") == 1.0
    assert module.correct_answer([{"role": "assistant", "content": "It is 41"}], "42") == 0.0


def test_init_refuses_bad_names_and_existing_dirs(tmp_path: Path) -> None:
    tmp_path = tmp_path / "work"
    tmp_path.mkdir()
    runner = CliRunner()
    bad = runner.invoke(cli, ["env", "init", "../escape", "--path", str(tmp_path)])
    assert bad.exit_code == 1 and "invalid environment name" in bad.output
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "keep.txt").write_text("mine")
    taken = runner.invoke(cli, ["env", "init", "taken", "--path", str(tmp_path)])
    assert taken.exit_code == 1 and "not empty" in taken.output
    assert sorted(p.name for p in (tmp_path / "taken").iterdir()) == ["keep.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["taken"]  # no staging dirs left


def test_load_project_errors(tmp_path: Path) -> None:
    runner = CliRunner()
    missing = runner.invoke(cli, ["env", "build", str(tmp_path)])
    assert missing.exit_code == 1 and "no pyproject.toml" in missing.output
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\nversion = "1.0+local"\n')
    local = runner.invoke(cli, ["env", "build", str(tmp_path)])
    assert local.exit_code == 1 and "local versions" in local.output
    assert "Traceback" not in local.output


def test_init_directory_has_the_usual_permissions(tmp_path: Path) -> None:
    """The new directory follows the umask like `mkdir` (0755 under 022), not mkdtemp's 0700."""
    old = os.umask(0o022)
    try:
        result = CliRunner().invoke(cli, ["env", "init", "perm-env", "--path", str(tmp_path)])
    finally:
        os.umask(old)
    assert result.exit_code == 0, result.output
    assert stat.S_IMODE((tmp_path / "perm-env").stat().st_mode) == 0o755
    assert stat.S_IMODE((tmp_path / "perm-env" / "pyproject.toml").stat().st_mode) == 0o644
