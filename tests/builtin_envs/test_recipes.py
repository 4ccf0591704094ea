"""Every built-in ships a training recipe for `local/smollm2-135m` in its package (and so in its
wheel), and it passes every check `prime train` makes before a model loads."""

from __future__ import annotations

from pathlib import Path

import pytest

from builtin_envs.publish import BUILTIN_NAMES, BUILTINS_DIR
from prime_env.evaluation import load_env
from prime_env.loading import package_dir
from trainer_bridge.config import DEFAULT_MODEL
from trainer_bridge.config_loader import build_config
from trainer_bridge.launch import check_env
from trainer_bridge.recipes import find_recipe


@pytest.mark.parametrize("name", BUILTIN_NAMES)
def test_each_builtin_ships_a_valid_recipe_for_the_local_model(name: str) -> None:
    project = BUILTINS_DIR / name
    recipe = find_recipe(package_dir(str(project)), DEFAULT_MODEL)
    assert recipe is not None and recipe.name == "smollm2-135m.toml"
    assert "train/*.toml" in (project / "pyproject.toml").read_text()  # shipped in the wheel
    config = build_config([recipe], env_id=str(project))
    assert config.env.id == str(project)  # a recipe names no env: it is the env's own
    env = load_env(str(project), config.env.args)
    check_env(config, env)  # reward names, split sizes, every stage
    assert env.correctness is not None  # and the env names its correctness metric
    assert config.orchestrator.batch_size % config.orchestrator.rollouts_per_example == 0
    assert config.model.lora is not None and config.max_steps >= 10


def test_arithmetic_recipe_pays_no_copied_example() -> None:
    recipe = Path(BUILTINS_DIR / "arithmetic" / "arithmetic" / "train" / "smollm2-135m.toml")
    config = build_config([recipe], env_id="prime/arithmetic")
    assert "format_reward" not in config.orchestrator.reward.weights
    assert config.orchestrator.reward.weights.get("boxed_integer", 0) > 0
