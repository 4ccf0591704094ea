"""prime train's config: prime-rl's keys, precedence, and refusals by name (no model loads)."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainer_bridge.config import ConfigError, TrainConfig, differences
from trainer_bridge.config_loader import build_config, load_resolved, parse_flags, to_toml

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
    path = write(tmp_path, "resolved.toml", to_toml(config))
    again = load_resolved(path)
    assert again == config and again.digest() == config.digest()
    more = again.model_copy(update={"max_steps": 200})
    assert differences(config, more) == [] and more.digest() == config.digest()
    changed = build_config([path], [("trainer.optim.lr", 1e-3)])
    assert differences(config, changed) == ["trainer.optim.lr: run has 0.0003, now 0.001"]


def test_none_survives_the_resolved_config_for_both_processes(tmp_path: Path) -> None:
    """ckpt.interval = None used to vanish from resolved.toml (TOML has no null): the
    orchestrator then read the default 5, the trainer None, and no step ever became STABLE."""
    from trainer_bridge.trainer.trainer import load_run_config

    nulls = [
        ("ckpt.interval", None),
        ("ckpt.keep_last", None),
        ("trainer.loss.is_cap", None),
        ("trainer.optim.max_norm", None),
    ]
    config = build_config([], nulls, env_id="x/y")
    run = tmp_path / "run"
    (run / "config").mkdir(parents=True)
    (run / "config" / "resolved.toml").write_text(to_toml(config))
    for loaded in (load_resolved(run / "config" / "resolved.toml"), load_run_config(run)):
        assert loaded == config
        assert loaded.ckpt.interval is None and loaded.ckpt.keep_last is None
        assert loaded.trainer.loss.is_cap is None and loaded.trainer.optim.max_norm is None
    assert TrainConfig().ckpt.interval == 5  # the defaults are not None


STAGED = """
max_steps = 10
[[orchestrator.env]]
id = "a/b"
args = { difficulty = 1, n = 2 }
[[stages]]
name = "warm-up"
max_steps = 3
trainer.optim.lr = 1e-3
orchestrator.env.args = { difficulty = 2 }
orchestrator.sampling.temperature = 1.0
[[stages]]
name = "main"
max_steps = 4
"""


def test_stages_merge_over_the_run_and_the_last_runs_to_max_steps(tmp_path: Path) -> None:
    config = build_config([write(tmp_path, "s.toml", STAGED)])
    warm, main = config.stage_plan()
    assert (warm.name, warm.start, warm.end, main.start, main.end) == ("warm-up", 0, 3, 3, 10)
    assert warm.config.trainer.optim.lr == 1e-3 and main.config.trainer.optim.lr == 3e-4
    assert warm.config.env.args == {"difficulty": 2, "n": 2}  # merged over the run's args
    assert main.config.env.args == {"difficulty": 1, "n": 2}
    assert warm.config.orchestrator.sampling.temperature == 1.0
    assert warm.config.orchestrator.sampling.max_tokens == 128  # the run's
    short = build_config([write(tmp_path, "s.toml", STAGED)], [("max_steps", 2)])
    assert [(s.name, s.start, s.end) for s in short.stage_plan()] == [("warm-up", 0, 2)]
    again = load_resolved(write(tmp_path, "r.toml", to_toml(config)))
    assert again == config and [s.end for s in again.stage_plan()] == [3, 10]
    no_stages = TrainConfig()
    assert [(s.name, s.start, s.end) for s in no_stages.stage_plan()] == [("main", 0, 100)]


@pytest.mark.parametrize(
    ("stage", "expected"),
    [
        ("trainer.threads = 2", "stages.0.trainer.threads cannot change between stages"),
        ("model.name = 'x'", "unknown key 'stages.0.model'"),
        ("orchestrator.env = { id = 'c/d' }", "may only hold args"),
        ("orchestrator.sampling.top_p = 0.5", "in stages.0: orchestrator.sampling: top_p=0.5"),
        ("orchestrator.algo.type = 'ppo'", "in stages.0: orchestrator.algo.type"),
        ("orchestrator.batch_size = 12", "not a multiple of rollouts_per_example"),
    ],
)
def test_a_stage_is_refused_by_the_key_it_gets_wrong(
    tmp_path: Path, stage: str, expected: str
) -> None:
    text = f"[[stages]]\nmax_steps = 2\n{stage}\n"
    with pytest.raises(ConfigError, match=expected):
        build_config([write(tmp_path, "bad.toml", text)])


def test_a_recipe_entry_without_an_id_keeps_its_args_under_files_and_flags(
    tmp_path: Path,
) -> None:
    """An environment's recipe names no id (it is the env's own): the positional id fills it
    in and its args stay; a -c file's entry for the same env merges key by key."""
    recipe = write(
        tmp_path, "recipe.toml", "[[orchestrator.env]]\nargs = { difficulty = 1, n = 5 }\n"
    )
    user = write(tmp_path, "user.toml", "[[orchestrator.env]]\nargs = { n = 9 }\n")
    config = build_config([recipe, user], [("orchestrator.batch_size", 16)], env_id="prime/x")
    assert config.env.id == "prime/x" and config.env.args == {"difficulty": 1, "n": 9}
    other = build_config([recipe], env_id="prime/x", env_args={"seed": 1})
    assert other.env.args == {"seed": 1}  # -a replaces the args, as before
