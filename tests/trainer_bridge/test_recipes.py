"""An environment's recipe sets training keys only; where the run writes, what it is called,
which servers, credentials, engine arguments, monitors and model it uses come from the user
(issue 37). A run name is one path component, from a recipe, a `-c` file or a flag."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from prime_cli.main import cli
from trainer_bridge.config import ConfigError
from trainer_bridge.config_loader import build_config
from trainer_bridge.recipes import find_recipe

ARITHMETIC = Path(__file__).resolve().parents[2] / "builtin_envs" / "arithmetic"
HOSTILE = {
    "output_dir": 'output_dir = "/tmp/anywhere"',
    "run_name": 'run_name = "../../../../escaped-run"',
    "inference.backend": '[inference]\nbackend = "external"\nurls = ["http://127.0.0.1:9/v1"]',
    "inference.extra_args": '[inference]\nextra_args = ["--trust-remote-code"]',
    "orchestrator.algo.teacher.base_url": (
        '[orchestrator.algo]\ntype = "opd"\n[orchestrator.algo.teacher]\nmodel = "m"\n'
        'base_url = "http://127.0.0.1:9/v1"\napi_key_var = "PRIME_API_KEY"'
    ),
    "monitors.wandb.project": '[monitors.wandb]\nproject = "theirs"',
    "model.name": '[model]\nname = "/etc"',
    "stages.0.orchestrator.algo.teacher.model": (
        '[[stages]]\nmax_steps = 1\norchestrator = { algo = { type = "sft", teacher = '
        '{ model = "openai/gpt-4.1" } } }'
    ),
}


def project_with_recipe(root: Path, recipe: str) -> Path:
    """A copy of prime/arithmetic whose recipe for the default model is `recipe`."""
    project = root / "arithmetic"
    shutil.copytree(ARITHMETIC, project, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    (project / "arithmetic" / "train" / "smollm2-135m.toml").write_text(recipe + "\n")
    return project


@pytest.mark.parametrize("key", sorted(HOSTILE))
def test_a_recipe_that_sets_what_only_the_user_may_is_refused_by_key(
    tmp_path: Path, key: str
) -> None:
    project = project_with_recipe(tmp_path, "max_steps = 2\n" + HOSTILE[key])
    with pytest.raises(ConfigError) as refused:
        find_recipe(project / "arithmetic", "local/smollm2-135m")
    assert f"\n  {key}" in str(refused.value) and "--no-env-recipe" in str(refused.value)
    result = CliRunner().invoke(cli, ["train", str(project), "--dry-run"], catch_exceptions=False)
    assert result.exit_code == 2, result.output
    assert key in result.output and "only you may set" in result.output, result.output
    assert not (tmp_path / "escaped-run").exists() and not Path("/tmp/anywhere").exists()


@pytest.fixture
def fresh_arithmetic(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No `arithmetic` module imported, as in a fresh `prime train`: another test of this worker
    may have imported the installed one, and a path env is not loaded over a module of its name
    (`prime_env.loading`). The modules and `sys.path` are as before afterwards."""
    before = {k: v for k, v in sys.modules.items() if k.split(".")[0] == "arithmetic"}
    for name in before:
        del sys.modules[name]
    monkeypatch.setattr(sys, "path", list(sys.path))
    yield
    for name in [k for k in sys.modules if k.split(".")[0] == "arithmetic"]:
        del sys.modules[name]
    sys.modules.update(before)


@pytest.mark.usefixtures("fresh_arithmetic")
def test_the_same_keys_from_the_user_and_training_keys_from_a_recipe_are_taken(
    tmp_path: Path,
) -> None:
    project = project_with_recipe(
        tmp_path,
        'max_steps = 3\n[orchestrator]\nsampling = { max_tokens = 16 }\n'
        '[orchestrator.algo]\ntype = "sft"\nteacher = { model = "reference" }\n'
        "[trainer]\noptim.lr = 1e-4",
    )  # fmt: skip
    user = tmp_path / "mine.toml"
    user.write_text('run_name = "mine"\n[inference]\nextra_args = ["--enforce-eager"]\n')
    result = CliRunner().invoke(cli, ["train", str(project), "--dry-run", "-c", str(user),
                                      "-o", str(tmp_path / "out")], catch_exceptions=False)  # fmt: skip
    assert result.exit_code == 0, result.output
    assert 'run_name = "mine"' in result.output and "--enforce-eager" in result.output
    assert "lr = 0.0001" in result.output and "max_tokens = 16" in result.output


@pytest.mark.parametrize("name", ["../escaped", "/abs", "a/b", "..", ".hidden", "", "x" * 129])
def test_a_run_name_is_one_path_component_everywhere(tmp_path: Path, name: str) -> None:
    with pytest.raises(ConfigError, match="not one path component"):
        build_config(overrides=[("run_name", name)], env_id="prime/arithmetic")
    config = tmp_path / "c.toml"
    config.write_text(f"run_name = {name!r}\n".replace("'", '"'))
    with pytest.raises(ConfigError, match="not one path component"):
        build_config([config], env_id="prime/arithmetic")
    result = CliRunner().invoke(
        cli, ["train", "prime/arithmetic", "--no-env-recipe", "--run-name", name, "--dry-run"],
        catch_exceptions=False,
    )  # fmt: skip
    assert result.exit_code == 2 and "not one path component" in result.output, result.output
