"""prime train's config: prime-rl's keys, precedence, and refusals by name (no model loads)."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainer_bridge.config import (
    ConfigError,
    TrainConfig,
    build_config,
    differences,
    load_resolved,
    parse_flags,
)

ISSUE_TOML = """
max_steps = 100
model.name = "local/smollm2-135m"
[[orchestrator.env]]
id = "prime/arithmetic"
args = { difficulty = 1, num_eval_examples = 50 }
[orchestrator]
batch_size = 64
rollouts_per_example = 8
max_async_level = 1
max_off_policy_steps = 2
sampling = { max_tokens = 32, temperature = 1.0 }
reward.weights = { format_reward = 0.5 }
eval.interval = 10
[trainer]
loss.type = "dapo"
optim.lr = 3e-4
model.lora = { rank = 16, alpha = 32 }
"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_the_issue_example_loads_unchanged(tmp_path: Path) -> None:
    config = build_config([write(tmp_path, "rl.toml", ISSUE_TOML)])
    assert config.env.id == "prime/arithmetic"
    assert config.env.args == {"difficulty": 1, "num_eval_examples": 50}
    assert config.orchestrator.sampling.max_tokens == 32
    assert config.orchestrator.reward.weights == {"format_reward": 0.5}
    assert config.orchestrator.eval.interval == 10
    assert config.trainer.loss.type == "dapo"
    assert config.model.lora is not None and config.model.lora.rank == 16  # [trainer.model] moved


def test_precedence_defaults_files_left_to_right_then_flags(tmp_path: Path) -> None:
    a = write(tmp_path, "a.toml", "max_steps = 5\n[orchestrator]\nbatch_size = 16\n")
    b = write(tmp_path, "b.toml", "max_steps = 7\n")
    files, overrides = parse_flags(["@", str(b), "--orchestrator.batch-size", "24"])
    config = build_config([a, *files], overrides)
    assert config.max_steps == 7  # b after a
    assert config.orchestrator.batch_size == 24  # flag after files
    assert config.orchestrator.rollouts_per_example == 8  # default
    assert TrainConfig().orchestrator.max_async_level == 1
    assert TrainConfig().orchestrator.max_off_policy_steps == 2


def test_flag_values_are_toml_and_switches(tmp_path: Path) -> None:
    _, overrides = parse_flags(
        ["--trainer.optim.lr=1e-5", "--deterministic", "--no-orchestrator.eval.at-start"]
    )
    config = build_config(
        [], [*overrides, ("orchestrator.max_async_level", 0)], env_id="x/y", env_args={"k": 1}
    )
    assert config.trainer.optim.lr == 1e-5
    assert config.deterministic is True
    assert config.orchestrator.eval.at_start is False
    assert config.env.id == "x/y" and config.env.args == {"k": 1}


def test_positional_env_keeps_file_args_for_the_same_id(tmp_path: Path) -> None:
    path = write(tmp_path, "rl.toml", ISSUE_TOML)
    same = build_config([path], env_id="prime/arithmetic")
    assert same.env.args["difficulty"] == 1
    other = build_config([path], env_id="prime/wordle")
    assert other.env.args == {}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[orchestrator]\nbogus = 1\n", "unknown key 'orchestrator.bogus'"),
        ("[deployment]\nnum_train_gpus = 1\n", "unknown key 'deployment'"),
        ("[orchestrator]\nbatch_size = 10\nrollouts_per_example = 4\n", "not a multiple"),
        ("[orchestrator.sampling]\ntop_p = 0.9\n", "top_p=0.9 is refused"),
        ("[orchestrator]\nmax_async_level = 3\n", "max_off_policy_steps 2 < max_async_level 3"),
        ("deterministic = true\n", "max_async_level = 0"),
    ],
)
def test_refused_by_name(tmp_path: Path, text: str, expected: str) -> None:
    with pytest.raises(ConfigError, match=expected):
        build_config([write(tmp_path, "bad.toml", text)])


def test_unknown_flag_and_bad_toml(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unknown key 'trainer.optim.lrr'"):
        build_config([], [("trainer.optim.lrr", 1.0)])
    with pytest.raises(ConfigError, match="not valid TOML"):
        build_config([write(tmp_path, "x.toml", "max_steps = = 1")])
    with pytest.raises(ConfigError, match="does not exist"):
        build_config([tmp_path / "missing.toml"])


def test_resolved_roundtrip_and_resumable_differences(tmp_path: Path) -> None:
    config = build_config([write(tmp_path, "rl.toml", ISSUE_TOML)])
    path = write(tmp_path, "resolved.toml", config.to_toml())
    again = load_resolved(path)
    assert again == config and again.digest() == config.digest()
    more = again.model_copy(update={"max_steps": 200})
    assert differences(config, more) == [] and more.digest() == config.digest()
    changed = build_config([path], [("trainer.optim.lr", 1e-3)])
    assert differences(config, changed) == ["trainer.optim.lr: run has 0.0003, now 0.001"]
