"""A `--lab` run's link to the Lab: its token, and the checks made before anything starts.

The token is the one the hub client already uses (`TINKER_API_KEY` when set, else the prime
settings' `api_key`: `PRIME_API_KEY` or `prime login`'s); it must carry the `train` scope. The
run's config goes to the Lab unchanged only where the Lab computes the same thing: LoRA on its
one base model, alpha 32, attention and/or MLP projections, the built-in token losses
(`trainer_bridge.lab.datums.check_loss`). Anything else is refused here, by name (exit 2).
"""

from __future__ import annotations

import logging
import os

from hub_client.client import HubError
from hub_client.lab import lab_models
from hub_client.settings import ConfigError as SettingsError
from hub_client.settings import load_settings
from trainer_bridge.config import ConfigError, TrainConfig
from trainer_bridge.lab.datums import check_loss
from trainer_bridge.lab.engine import ATTENTION, LORA_ALPHA, MLP

KEY_VARIABLE = "TINKER_API_KEY"
"""How the key reaches the Lab trainer child (never written to the run directory)."""


def quiet_queue_waits() -> None:
    """The SDK warns each time a long poll ends with the request still queued on the Lab
    ("Retrying request … because of try_again"): on a busy Lab that is every request, and
    normal; its real failures are raised, not logged."""
    logging.getLogger("tinker.lib.api_future_impl").setLevel(logging.ERROR)


def lab_url(config: TrainConfig) -> str:
    return config.inference.urls[0].rstrip("/")


def lab_key() -> str:
    """The hub token to train with: $TINKER_API_KEY, else the prime settings' token."""
    key = os.environ.get(KEY_VARIABLE)
    if key:
        return key
    try:
        token = load_settings().api_key
    except SettingsError as error:
        raise ConfigError(str(error)) from None
    if not token:
        raise ConfigError(
            "--lab needs a hub token with the `train` scope: `prime login --token TOKEN`, or "
            "set PRIME_API_KEY (create one with `prime hub token create USER --name N "
            "--scope train`)"
        )
    return token


def check_lab(config: TrainConfig, key: str) -> None:
    """Refuse (ConfigError) a run the Lab at `inference.urls[0]` cannot train as configured,
    or one whose token it does not accept."""
    url = lab_url(config)
    lora = config.model.lora
    if lora is None:
        raise ConfigError(
            "--lab trains LoRA adapters: full fine-tuning (model.lora = false) is not served"
        )
    if lora.alpha != LORA_ALPHA or lora.dropout:
        raise ConfigError(
            f"--lab trains LoRA with alpha {LORA_ALPHA} and no dropout; the config has "
            f"model.lora.alpha = {lora.alpha:g}, dropout = {lora.dropout:g}"
        )
    if targets(lora.target_modules) is None:
        raise ConfigError(
            f"--lab trains the attention projections {ATTENTION}, the MLP's {MLP} or both; "
            f"model.lora.target_modules = {lora.target_modules} is neither"
        )
    for stage in config.stage_plan():
        check_loss(stage.config.trainer.loss, where=f"stage {stage.name!r}")
    try:
        served = lab_models(url, key)
    except HubError as error:
        raise ConfigError(str(error)) from None
    if config.model.name not in served:
        raise ConfigError(
            f"the Lab at {url} trains {', '.join(served) or 'no model'}, not "
            f"{config.model.name}; pass -m with one of them"
        )


def targets(modules: list[str]) -> tuple[bool, bool] | None:
    """(train_attn, train_mlp) for LoRA target modules the Lab can train, else None."""
    chosen = set(modules)
    attn, mlp = set(ATTENTION) <= chosen, set(MLP) <= chosen
    if not (attn or mlp) or chosen != set(ATTENTION if attn else []) | set(MLP if mlp else []):
        return None
    return attn, mlp
