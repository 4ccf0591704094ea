"""Which recipe `prime train OWNER/NAME` builds on: the one the environment ships for the model.

The environment is installed first when it is missing (its recipes are in its wheel), and
found without being imported; the recipe is the layer under every `-c` file and flag, so
those override it key by key. What was chosen is said on stderr.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

from rich.console import Console

from hub_client import settings as cfg
from hub_client.client import HubError
from hub_client.install import InstallError, ensure_installed
from prime_cli.errors import CliError
from prime_cli.feedback import console_feedback
from prime_env.errors import EnvironmentNotFound
from prime_env.loading import is_local_path, package_dir
from registry_index.resolve import parse_env_id
from trainer_bridge.config import DEFAULT_MODEL, ConfigError
from trainer_bridge.config_loader import merge_layers
from trainer_bridge.recipes import find_recipe, shipped_recipes


def choose_recipe(
    files: Sequence[Path],
    overrides: Sequence[tuple[str, Any]],
    *,
    env_id: str | None,
    env_args: dict[str, Any] | None,
    console: Console,
) -> Path | None:
    """The environment's recipe for the model the layers choose, or None (said either way)."""
    layers = merge_layers(files, overrides, env_id=env_id, env_args=env_args)
    entries = (layers.get("orchestrator") or {}).get("env") or [{}]
    spec = entries[0].get("id") if isinstance(entries, list) and entries else None
    if not isinstance(spec, str):
        raise ConfigError(
            "no environment: give OWNER/NAME on the command line or [[orchestrator.env]] id"
        )
    model = str((layers.get("model") or {}).get("name") or DEFAULT_MODEL)
    package = _package(spec, console)
    recipe = find_recipe(package, model)
    if recipe is not None:
        console.print(
            f"using {spec}'s recipe for {model} ({recipe}); -c files and flags override it "
            "key by key, --no-env-recipe ignores it"
        )
    elif not files:
        others = shipped_recipes(package)
        has = f" (it has recipes for: {', '.join(others)})" if others else ""
        console.print(f"{spec} ships no recipe for {model}{has}; training with the defaults")
    return recipe


def _package(spec: str, console: Console) -> Path | None:
    """The environment's package directory, installing it from the hub when it is missing."""
    try:
        return package_dir(spec)
    except EnvironmentNotFound:
        pass
    except ValueError as exc:  # not an environment id
        raise ConfigError(str(exc)) from None
    if is_local_path(spec) or parse_env_id(spec)[0] is None:
        return None  # loading says what is wrong
    try:
        partial(ensure_installed, feedback=console_feedback(console))(spec)
    except (InstallError, HubError, cfg.ConfigError) as exc:
        raise CliError(str(exc), status=2) from None
    importlib.invalidate_caches()
    try:
        return package_dir(spec)
    except EnvironmentNotFound:
        return None
