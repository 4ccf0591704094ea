"""Environment discovery: entry points in `prime.environments`, then the module name."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

import prime_env
from prime_env import EnvironmentNotFound, installed_environments, load, parse_env_id
from tests.support import python_output

REPO = Path(prime_env.__file__).resolve().parents[1]

ENV_MODULE = """
import prime_env as pe

def load_environment(num_tasks: int = 3, difficulty: str = "easy"):
    tasks = [{{"question": f"{{i}}", "answer": str(i)}} for i in range(num_tasks)]
    return pe.Environment(tasks, pe.SingleTurn(), pe.Rubric([lambda completion, answer: 1.0]){extra})
"""


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A directory on sys.path holding a module plus its .dist-info, exactly as pip installs it."""
    (tmp_path / "word_guess.py").write_text(ENV_MODULE.format(extra=""))
    dist = tmp_path / "word_guess-1.4.2.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: word-guess\nVersion: 1.4.2\n")
    (dist / "entry_points.txt").write_text(
        "[prime.environments]\nword-guess = word_guess:load_environment\n"
    )
    (dist / "top_level.txt").write_text("word_guess\n")
    (tmp_path / "plain_env.py").write_text(
        ENV_MODULE.format(extra=', name="custom", version="9.9"')
    )
    (tmp_path / "broken_env.py").write_text("import not_a_real_dependency_xyz\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    yield tmp_path
    for name in ("word_guess", "plain_env", "broken_env"):
        sys.modules.pop(name, None)


def test_parse_env_id() -> None:
    assert parse_env_id("alice/wordle@1.2") == ("alice", "wordle", "1.2")
    assert parse_env_id("wordle") == (None, "wordle", None)
    assert parse_env_id("alice/wiki-search@>=0.2") == ("alice", "wiki-search", ">=0.2")
    with pytest.raises(ValueError, match="not an environment reference"):
        parse_env_id("a/b/c")


def test_load_by_entry_point_with_args_and_version(site: Path) -> None:
    assert "word-guess" in installed_environments()
    env = load("alice/word-guess@1.4", num_tasks=5)
    assert len(env.tasks) == 5
    assert env.name == "alice/word-guess" and env.version == "1.4.2"
    assert env.id == "alice/word-guess@1.4.2"
    assert env.env_args == {"num_tasks": 5}
    assert load("word_guess").name == "word_guess"  # normalised names match the entry point


def test_load_by_module_name_keeps_author_name(site: Path) -> None:
    env = load("bob/plain-env")
    assert env.name == "custom" and env.version == "9.9"


def test_unknown_environment_lists_installed_ones(site: Path) -> None:
    with pytest.raises(
        EnvironmentNotFound,
        match=r"'alice/nope' is not installed.*word-guess.*prime env install alice/nope",
    ):
        load("alice/nope")


def test_missing_dependency_of_an_env_is_not_reported_as_missing_env(site: Path) -> None:
    with pytest.raises(ModuleNotFoundError, match="not_a_real_dependency_xyz"):
        load("broken-env")


def test_bad_env_args_name_the_accepted_ones(site: Path) -> None:
    with pytest.raises(
        TypeError, match=r"unexpected keyword argument 'level'.*accepts: num_tasks, difficulty"
    ):
        load("word-guess", level=3)


def test_load_local_project_file_and_package(tmp_path: Path) -> None:
    """`prime eval run ./my-env` during development: nothing installed."""
    project = tmp_path / "my-proj"
    (project / "src" / "dev_env_pkg").mkdir(parents=True)
    (project / "pyproject.toml").write_text(
        '[project]\nname = "dev-env"\nversion = "0.0.3"\n'
        '[project.entry-points."prime.environments"]\ndev-env = "dev_env_pkg:make"\n'
    )
    (project / "src" / "dev_env_pkg" / "__init__.py").write_text(
        ENV_MODULE.format(extra="").replace("def load_environment", "def make")
    )
    single = tmp_path / "single_file_env.py"
    single.write_text(ENV_MODULE.format(extra=""))
    try:
        env = load(str(project), num_tasks=2)
        assert (env.name, env.version, len(env.tasks)) == ("dev-env", "0.0.3", 2)
        env = load(str(single))
        assert env.name == "single_file_env" and len(env.tasks) == 3
        with pytest.raises(EnvironmentNotFound, match="no such file"):
            load(str(tmp_path / "missing.py"))
        empty = tmp_path / "empty"
        empty.mkdir()
        with pytest.raises(EnvironmentNotFound, match="neither a .py file"):
            load(
                "./" + str(empty.relative_to(Path.cwd()))
                if empty.is_relative_to(Path.cwd())
                else str(empty)
            )
    finally:
        for name in ("dev_env_pkg", "single_file_env"):
            sys.modules.pop(name, None)
        for entry in (str(project / "src"), str(tmp_path)):
            while entry in sys.path:
                sys.path.remove(entry)


def test_pip_installed_environment_is_found_by_entry_point(tmp_path: Path) -> None:
    """A real `pip install` of an env package, then `prime_env.load` in a fresh interpreter."""
    project = tmp_path / "proj"
    (project / "piped_env").mkdir(parents=True)
    (project / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=69"]\nbuild-backend = "setuptools.build_meta"\n'
        '[project]\nname = "piped-env"\nversion = "2.0.1"\ndependencies = []\n'
        '[project.entry-points."prime.environments"]\npiped-env = "piped_env:load_environment"\n'
        '[tool.setuptools]\npackages = ["piped_env"]\n'
    )
    (project / "piped_env" / "__init__.py").write_text(ENV_MODULE.format(extra=""))
    target = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "--target",
            str(target),
            str(project),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    code = (
        "import prime_env;"
        "env = prime_env.load('carol/piped-env@2.0', num_tasks=4);"
        "print(env.id, len(env.tasks), sorted(prime_env.installed_environments()))"
    )
    out = python_output(code, {**os.environ, "PYTHONPATH": f"{target}{os.pathsep}{REPO}"}, tmp_path)
    assert out.split(" ", 2)[:2] == ["carol/piped-env@2.0.1", "4"]
    assert "'piped-env'" in out
