"""`prime train`'s configuration files and flags, read into the schema of trainer_bridge.config.

Precedence: defaults < `-c FILE.toml` files (prime-rl's `@ FILE.toml` too), left to right, deep
merged < `--dotted.key VALUE` flags (kebab or snake case, values read as TOML, `None` for null).
A run's `config/resolved.toml` is written here (`to_toml`) and read back (`load_resolved`) by
every process of the run; TOML has no null, so None is written as `None` both ways.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import tomli_w
from pydantic import ValidationError

from registry_index.toml_text import TomlError, parse_toml
from trainer_bridge.config import ConfigError, TrainConfig, deep_merge, error_lines

NULL = "None"
"""How None is written in TOML files and flags (prime-rl's convention)."""


def _nulls(value: Any, *, writing: bool) -> Any:
    """None as NULL in a table to be written (`writing`), NULL as None in one that was read."""
    if writing and value is None:
        return NULL
    if not writing and value == NULL:
        return None
    if isinstance(value, dict):
        return {k: _nulls(v, writing=writing) for k, v in value.items()}
    if isinstance(value, list):
        return [_nulls(v, writing=writing) for v in value]
    return value


def to_toml(config: TrainConfig) -> str:
    """The config as TOML, None written as "None" (TOML has no null; reading it back
    restores None instead of the key's default)."""
    return tomli_w.dumps(_nulls(config.model_dump(mode="json"), writing=True))


def read_toml(path: Path) -> dict[str, Any]:
    try:
        return parse_toml(path.read_bytes(), str(path))
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist") from None
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
    except TomlError as exc:
        raise ConfigError(str(exc)) from None


def parse_value(text: str) -> Any:
    """A flag value as TOML (`3e-4`, `true`, `[1, 2]`, `{a = 1}`, `"x"`); else the plain string."""
    if text == NULL:
        return None
    try:
        return parse_toml(f"v = {text}", "a flag value")["v"]
    except TomlError:
        return text


def set_dotted(data: dict[str, Any], key: str, value: Any) -> None:
    parts = [p.replace("-", "_") for p in key.split(".")]
    if not all(parts):
        raise ConfigError(f"--{key}: empty key segment")
    node = data
    for part in parts[:-1]:
        child = node.setdefault(part, {})
        if isinstance(child, list) and len(child) == 1 and isinstance(child[0], dict):
            child = child[0]  # `--orchestrator.env.args …` addresses the single env entry
        if not isinstance(child, dict):
            raise ConfigError(f"--{key}: {part} is a value, not a table")
        node = child
    node[parts[-1]] = value


def parse_flags(args: Sequence[str]) -> tuple[list[Path], list[tuple[str, Any]]]:
    """Split extra CLI arguments into `@ FILE.toml` files and `--dotted.key VALUE` overrides."""
    files: list[Path] = []
    overrides: list[tuple[str, Any]] = []
    items = list(args)
    i = 0
    while i < len(items):
        arg = items[i]
        if arg == "@":
            if i + 1 >= len(items):
                raise ConfigError("`@` must be followed by a TOML file")
            files.append(Path(items[i + 1]))
            i += 2
            continue
        if arg.startswith("@"):
            files.append(Path(arg[1:]))
            i += 1
            continue
        if not arg.startswith("--"):
            raise ConfigError(
                f"unexpected argument {arg!r}: overrides look like --dotted.key VALUE"
            )
        key = arg[2:]
        if "=" in key:
            key, raw = key.split("=", 1)
            overrides.append((key, parse_value(raw)))
            i += 1
        elif key.startswith("no-") and (i + 1 >= len(items) or items[i + 1].startswith("--")):
            overrides.append((key[3:], False))
            i += 1
        elif i + 1 >= len(items) or items[i + 1].startswith("--"):
            overrides.append((key, True))  # a bare flag is a boolean switch, as in prime-rl
            i += 1
        else:
            overrides.append((key, parse_value(items[i + 1])))
            i += 2
    return files, overrides


def build_config(
    files: Iterable[Path] = (),
    overrides: Iterable[tuple[str, Any]] = (),
    *,
    env_id: str | None = None,
    env_args: dict[str, Any] | None = None,
) -> TrainConfig:
    """Defaults < files (left to right) < overrides, validated into a TrainConfig."""
    return validate(merge_layers(files, overrides, env_id=env_id, env_args=env_args))


def merge_layers(
    files: Iterable[Path] = (),
    overrides: Iterable[tuple[str, Any]] = (),
    *,
    env_id: str | None = None,
    env_args: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Files (left to right) < overrides as one table, not yet validated.

    `env_id`/`env_args` (the CLI's positional and `-a`) set the single `[[orchestrator.env]]`
    entry: a different id replaces the file's entry (its args with it); the same id, or an
    entry without one (an environment's own recipe), keeps them."""
    merged: dict[str, Any] = {}
    for path in files:
        merged = deep_merge(merged, read_toml(path))
    if env_id is not None or env_args is not None:
        orchestrator = merged.setdefault("orchestrator", {})
        entries = orchestrator.get("env") or [{}]
        entry = dict(entries[0]) if isinstance(entries, list) and entries else {}
        if env_id is not None and entry.get("id") not in (None, env_id):
            entry = {"id": env_id}
        if env_id is not None:
            entry["id"] = env_id
        if env_args is not None:
            entry["args"] = env_args
        orchestrator["env"] = [entry]
    for key, value in overrides:
        set_dotted(merged, key, value)
    return merged


def _prime_rl_model_keys(data: dict[str, Any]) -> dict[str, Any]:
    """prime-rl writes the trainer's model settings (LoRA) under `[trainer.model]`; here they
    live in the one `[model]` table both processes read. Move them, refusing a contradiction."""
    trainer = data.get("trainer")
    if not isinstance(trainer, dict) or not isinstance(trainer.get("model"), dict):
        return data
    trainer = dict(trainer)
    moved = trainer.pop("model")
    model = dict(data.get("model") or {})
    for key, value in moved.items():
        if key in model and model[key] != value:
            raise ConfigError(
                f"trainer.model.{key} = {value!r} contradicts model.{key} = {model[key]!r}; "
                "keep one of them"
            )
        model[key] = value
    return {**data, "trainer": trainer, "model": model}


def validate(data: dict[str, Any]) -> TrainConfig:
    data = _prime_rl_model_keys(_nulls(data, writing=False))
    try:
        return TrainConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(describe(exc)) from None


def describe(exc: ValidationError) -> str:
    return "invalid training config:\n  " + "\n  ".join(error_lines(exc))


def load_resolved(path: Path) -> TrainConfig:
    """The config a run was started with (`config/resolved.toml`)."""
    return validate(read_toml(path))
