"""The `-c` configs shipped in configs/ load and pass every check made before a model loads."""

from __future__ import annotations

from pathlib import Path

import pytest

from prime_env.evaluation import load_env
from trainer_bridge.config import build_config
from trainer_bridge.launch import check_env

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", ["arithmetic_smollm2.toml"])
def test_shipped_config_validates_against_its_env(name: str) -> None:
    config = build_config([ROOT / "configs" / name])
    # Train on the env from this checkout (the id names the hub's published copy).
    env = load_env(str(ROOT / "builtin_envs" / "arithmetic"), config.env.args)
    check_env(config, env)  # a non-empty train split; reward.weights names only env rewards
    assert len(env.tasks) == config.env.args["num_train_examples"]
    assert config.orchestrator.batch_size % config.orchestrator.rollouts_per_example == 0
