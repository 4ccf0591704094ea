"""The recipe an installed environment ships for a model (registry_index/recipes.py has the
rule for where it lives), found in its package directory: the layer under the `-c` files and
flags; and what a recipe may set.

A recipe is the environment author's, not the user's: it may set **training keys only** (the
algorithm, sampling, loss and optimiser, batch shape, steps, stages, the environment's args,
evals), never where the run writes or what it is called, which servers or models it talks to
with which credentials, what engine arguments it passes, what it reports to, or which model it
trains. Those come only from the user (flags, `-c` files). A recipe that sets one is refused
whole, naming each key, before anything runs (issue 37: a wheel's recipe could write its run
outside `outputs/`, send the user's hub key to a URL of its choosing as a teacher's key, or
pass `--trust-remote-code` to vLLM).
"""

from __future__ import annotations

from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from registry_index.recipes import RECIPE_DIR, recipe_stem
from trainer_bridge.config import ConfigError, flatten
from trainer_bridge.config_loader import NULL, read_toml

_ORCHESTRATOR = (
    "batch_size", "rollouts_per_example", "max_async_level", "max_off_policy_steps",
    "max_inflight", "seed", "filter_zero_advantages", "max_groups_per_step", "max_empty_steps",
    "algo.type", "algo.min_reward", "algo.best_of", "algo.options", "algo.options.*",
    "sampling", "sampling.*", "reward", "reward.*", "advantage", "advantage.*", "eval",
    "eval.*", "env.args", "env.args.*", "env.0.args", "env.0.args.*",
)  # fmt: skip
_TRAINER = (
    "loss", "loss.*", "optim", "optim.*", "scheduler", "scheduler.*", "micro_batch_tokens",
    "activation_checkpointing", "share_prefix", "logprob_chunk", "seed",
    "model.lora", "model.lora.*",  # prime-rl's spelling of model.lora
)  # fmt: skip
TRAINING_KEYS: tuple[str, ...] = (
    "max_steps", "seed", "deterministic", "model.lora", "model.lora.*", "model.dtype",
    *(f"orchestrator.{key}" for key in _ORCHESTRATOR),
    *(f"trainer.{key}" for key in _TRAINER),
    "stages.*.name", "stages.*.max_steps",
    *(f"stages.*.orchestrator.{key}" for key in _ORCHESTRATOR),
    *(f"stages.*.trainer.{key}" for key in _TRAINER),
)  # fmt: skip
"""Dotted keys (`*` any part) a recipe may set."""

_TEACHER_MODEL = ("orchestrator.algo.teacher.model", "stages.*.orchestrator.algo.teacher.model")
_REFERENCE = "reference"


def recipe_problems(table: dict[str, Any]) -> list[str]:
    """The keys of a recipe's table that are not training keys, each with why; [] if none."""
    problems = []
    for key, value in flatten(table).items():
        if any(fnmatchcase(key, pattern) for pattern in _TEACHER_MODEL):
            if value != _REFERENCE:  # any other teacher is a model path or a paid API
                problems.append(
                    f"{key} = {value!r}: a recipe's teacher may only be {_REFERENCE!r} (the "
                    "environment's reference policy); another model, its URL and key come "
                    "from you"
                )
            continue
        if value == NULL or any(fnmatchcase(key, pattern) for pattern in TRAINING_KEYS):
            continue
        problems.append(f"{key}: {_why(key)}")
    return problems


def _why(key: str) -> str:
    for prefix, what in (
        ("output_dir", "where the run writes"),
        ("run_name", "the run's name"),
        ("inference", "the inference engine, its servers and arguments"),
        ("monitors", "where the run reports"),
        ("model", "the model trained"),
        ("ckpt", "how checkpoints are kept"),
    ):
        if key == prefix or key.startswith(prefix + "."):
            return f"{what} comes only from you"
    if "teacher" in key:
        return "a teacher's server and credentials come only from you"
    return "not a training key"


def load_recipe(path: Path) -> dict[str, Any]:
    """The recipe's table, or a ConfigError naming every key it may not set."""
    table = read_toml(path)
    problems = recipe_problems(table)
    if problems:
        raise ConfigError(
            f"the environment's recipe {path} sets what only you may set:\n  "
            + "\n  ".join(problems)
            + "\nA recipe may set training keys only (algorithm, sampling, loss, optimiser, "
            "batch, steps, stages, env args, evals); give the rest with flags or -c, or ignore "
            "the recipe with --no-env-recipe."
        )
    return table


def find_recipe(package: Path | None, model: str) -> Path | None:
    """`<package>/train/<model>.toml` if the environment ships one for `model`, checked:
    a recipe that sets more than training keys is a ConfigError (`load_recipe`)."""
    if package is None:
        return None
    path = package / RECIPE_DIR / f"{recipe_stem(model)}.toml"
    if not path.is_file():
        return None
    load_recipe(path)
    return path


def shipped_recipes(package: Path | None) -> list[str]:
    """The models an environment ships recipes for (what to suggest when there is none)."""
    if package is None or not (package / RECIPE_DIR).is_dir():
        return []
    return sorted(p.stem for p in (package / RECIPE_DIR).glob("*.toml"))
