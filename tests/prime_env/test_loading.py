"""Environment discovery: entry points in `prime.environments`, then the module name."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

from prime_env import EnvironmentNotFound, installed_environments, load, parse_env_id

ENV_MODULE = '''
import prime_env as pe

def load_environment(num_tasks: int = 3, difficulty: str = "easy"):
    tasks = [{{"question": f"{{i}}", "answer": str(i)}} for i in range(num_tasks)]
    return pe.Environment(tasks, pe.SingleTurn(), pe.Rubric([lambda completion, answer: 1.0]){extra})
'''


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A directory on sys.path holding a module plus its .dist-info, exactly as pip installs it."""
    (tmp_path / "word_guess.py").write_text(ENV_MODULE.format(extra=""))
    dist = tmp_path / "word_guess-1.4.2.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: word-guess\nVersion: 1.4.2\n")
    (dist / "entry_points.txt").write_text("[prime.environments]\nword-guess = word_guess:load_environment\n")
    (dist / "top_level.txt").write_text("word_guess\n")
    (tmp_path / "plain_env.py").write_text(ENV_MODULE.format(extra=', name="custom", version="9.9"'))
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
    with pytest.raises(ValueError, match="not an environment id"):
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
    with pytest.raises(EnvironmentNotFound, match=r"'alice/nope' is not installed.*word-guess.*prime env install alice/nope"):
        load("alice/nope")


def test_missing_dependency_of_an_env_is_not_reported_as_missing_env(site: Path) -> None:
    with pytest.raises(ModuleNotFoundError, match="not_a_real_dependency_xyz"):
        load("broken-env")


def test_bad_env_args_name_the_accepted_ones(site: Path) -> None:
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'level'.*accepts: num_tasks, difficulty"):
        load("word-guess", level=3)
