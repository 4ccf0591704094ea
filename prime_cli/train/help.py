"""`prime train --help` and `--help-all`: the training options, read from the config schema.

`--help` shows the run's flags, the dotted config keys most runs change and the subcommands;
`--help-all` lists every key of `trainer_bridge.config.TrainConfig` with its type, default
and description, so the list never drifts from what the trainer accepts.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
from pydantic import BaseModel
from pydantic_core import PydanticUndefined

COMMON_KEYS = [
    "orchestrator.batch_size",
    "orchestrator.rollouts_per_example",
    "orchestrator.sampling.max_tokens",
    "orchestrator.sampling.temperature",
    "orchestrator.reward.weights",
    "orchestrator.eval.interval",
    "orchestrator.eval.num_examples",
    "trainer.optim.lr",
    "trainer.scheduler.type",
    "model.lora.rank",
    "ckpt.interval",
]
"""The keys a first run most often sets (after -m, --max-steps, --algo)."""


def _model_of(annotation: Any) -> type[BaseModel] | None:
    """The config section a field holds (`X` or `X | None`), else None."""
    options = typing.get_args(annotation) if isinstance(annotation, types.UnionType) else ()
    for item in (annotation, *options):
        if isinstance(item, type) and issubclass(item, BaseModel):
            return item
    return None


def _type_name(annotation: Any) -> str:
    if typing.get_origin(annotation) is typing.Literal:
        return "|".join(str(v) for v in typing.get_args(annotation))
    text = getattr(annotation, "__name__", None) if isinstance(annotation, type) else None
    return text or str(annotation).replace("typing.", "").replace("trainer_bridge.config.", "")


def _default(value: Any) -> str:
    return str(value) if isinstance(value, (str, Path)) else repr(value)


def config_keys(model: type[BaseModel], prefix: str = "") -> Iterator[tuple[str, str, str, str]]:
    """(dotted key, type, default, description) of every leaf key, sections walked."""
    for name, info in model.model_fields.items():
        key = f"{prefix}{name}"
        section = _model_of(info.annotation)
        if section is not None and key != "stages":
            yield from config_keys(section, key + ".")
            continue
        if info.default is not PydanticUndefined:
            default = _default(info.default)
        elif info.default_factory is not None:
            default = _default(info.default_factory())  # type: ignore[call-arg]
        else:
            default = "required"
        doc = " ".join((info.description or "").split())
        yield key, _type_name(info.annotation), default, doc


def _flag(key: str) -> str:
    return "--" + key.replace("_", "-")


def common_options_text() -> str:
    from trainer_bridge.config import TrainConfig

    known = {key: (kind, default) for key, kind, default, _ in config_keys(TrainConfig)}
    rows = [(_flag(k), f"{known[k][0]}, default {known[k][1]}") for k in COMMON_KEYS]
    width = max(len(flag) for flag, _ in rows) + 2
    lines = [f"  {flag:<{width}}{text}" for flag, text in rows]
    return (
        "Common training options (any config key works as --dotted.key VALUE):\n"
        + "\n".join(lines)
        + "\n\nEvery key: prime train --help-all (docs/training.md: Config)."
    )


def print_all_keys() -> None:
    from trainer_bridge.config import TrainConfig

    click.echo("Every training config key, as --dotted.key VALUE or in a -c FILE.toml:\n")
    for key, kind, default, doc in config_keys(TrainConfig):
        click.echo(f"  {_flag(key)}  ({kind}, default {default})")
        if doc:
            click.echo(f"      {doc}")
    click.echo(
        "\n[[stages]] (a -c file) take orchestrator/trainer keys per stage: docs/training.md"
    )
