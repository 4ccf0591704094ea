"""The `prime` settings: a small TOML file plus environment-variable overrides.

The file lives in the platform's config directory (platformdirs: `$XDG_CONFIG_HOME/prime/
config.toml`, default `~/.config/prime/config.toml` on Linux) and holds an API token, so it is
written atomically (temp file, fsync, `os.replace`) with mode 0600: a crash never leaves a
half-written file and other local users can never read the token. Reading is pydantic-settings:
environment variables win over the file so that CI jobs and one-off commands need no file at all;
`PRIME_API_BASE_URL` and `PRIME_BASE_URL` are accepted too, so a shell set up for the stock
`prime` client also works.
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlsplit

import platformdirs
import tomli_w
from pydantic import AliasChoices, Field, ValidationError, field_validator
from pydantic_settings import (
    BaseSettings,
    InitSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from registry_index.files import write_atomic
from registry_index.toml_text import TomlError, parse_toml

DEFAULT_HUB_URL = "http://127.0.0.1:8000"

# key -> what it is; the only keys `prime config set` accepts.
KEYS: dict[str, str] = {
    "hub_url": "base URL of the hub, e.g. http://127.0.0.1:8000",
    "api_key": "API token sent as `Authorization: Bearer …`",
    "owner": "default owner (user or organisation) for `prime env push`",
}

# Environment variables, in priority order, for each key.
ENV_VARS: dict[str, tuple[str, ...]] = {
    "hub_url": ("PRIME_HUB_URL", "PRIME_API_BASE_URL", "PRIME_BASE_URL"),
    "api_key": ("PRIME_API_KEY",),
    "owner": ("PRIME_OWNER",),
}


class ConfigError(Exception):
    """A settings problem the user can fix; the message says how."""


def config_path() -> Path:
    """Where the settings file lives (the platform's user config directory)."""
    return platformdirs.user_config_path("prime", appauthor=False) / "config.toml"


def _aliases(key: str) -> AliasChoices:
    return AliasChoices(*ENV_VARS[key], key)


class Settings(BaseSettings):
    """The effective settings: environment variables over the file over defaults."""

    model_config = SettingsConfigDict(frozen=True, env_ignore_empty=True, extra="ignore")

    hub_url: str = Field(default=DEFAULT_HUB_URL, validation_alias=_aliases("hub_url"))
    api_key: str | None = Field(default=None, validation_alias=_aliases("api_key"))
    owner: str | None = Field(default=None, validation_alias=_aliases("owner"))
    # key -> where its value came from ("env PRIME_HUB_URL", "file", "default").
    sources: dict[str, str] = Field(default_factory=dict, exclude=True)

    @field_validator("hub_url", mode="after")
    @classmethod
    def _normal_url(cls, value: str) -> str:
        try:
            return normalize_hub_url(value)
        except ConfigError as exc:
            raise ValueError(str(exc)) from exc

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # The file through `load_file` (the one TOML reader, `registry_index.toml_text`),
        # below the environment.
        return (init_settings, env_settings, InitSettingsSource(settings_cls, load_file()))


def normalize_hub_url(url: str) -> str:
    """Check that `url` is an http(s) URL and strip a trailing `/` and `/api/v1`.

    The stock client's base URL is the host without `/api/v1` (it appends it itself); users paste
    both forms, so both are accepted.
    """
    url = url.strip()
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ConfigError(f"invalid hub URL {url!r}: expected http://HOST[:PORT] or https://HOST")
    url = url.rstrip("/")
    url = url.removesuffix("/api/v1")
    return url


def load_file(path: Path | None = None) -> dict[str, str]:
    """The settings stored in the file (empty when there is none)."""
    path = path or config_path()
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from exc
    try:
        data = parse_toml(raw, str(path))
    except TomlError as exc:
        raise ConfigError(f"{exc}; fix or delete it") from None
    return {key: str(value) for key, value in data.items() if key in KEYS}


def save_file(values: dict[str, str], path: Path | None = None) -> Path:
    """Write `values` atomically with mode 0600 and return the path."""
    path = path or config_path()
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    text = tomli_w.dumps({key: values[key] for key in sorted(values)})
    write_atomic(path, text, mode=0o600, durable=True)
    return path


def set_value(key: str, value: str) -> Path:
    """Validate and store one setting."""
    if key not in KEYS:
        raise ConfigError(f"unknown setting {key!r}; known settings: {', '.join(KEYS)}")
    if key == "hub_url":
        value = normalize_hub_url(value)
    elif not value.strip():
        raise ConfigError(f"{key} cannot be empty; use `prime config unset {key}` to remove it")
    values = load_file()
    values[key] = value.strip()
    return save_file(values)


def unset_value(key: str) -> Path:
    """Remove one setting from the file."""
    if key not in KEYS:
        raise ConfigError(f"unknown setting {key!r}; known settings: {', '.join(KEYS)}")
    values = load_file()
    values.pop(key, None)
    return save_file(values)


def load_settings() -> Settings:
    """The effective settings: environment variables over the file over defaults."""
    stored = load_file()  # a clear ConfigError for an unreadable or broken file
    try:
        settings = Settings()
    except ValidationError as exc:
        problems = "; ".join(
            str(err.get("msg", "")).removeprefix("Value error, ") for err in exc.errors()
        )
        raise ConfigError(f"invalid settings: {problems}") from exc
    sources: dict[str, str] = {}
    for key in KEYS:
        var = next((v for v in ENV_VARS[key] if os.environ.get(v)), None)
        if var is not None:
            sources[key] = f"env {var}"
        elif key in stored:
            sources[key] = "file"
        elif key == "hub_url":
            sources[key] = "default"
    return settings.model_copy(update={"sources": sources})


def clear_credentials() -> Path | None:
    """Remove the token from the settings file (`prime logout`); None when none was stored."""
    values = load_file()
    if "api_key" not in values:
        return None
    values.pop("api_key")
    return save_file(values)


def mask_token(token: str | None) -> str:
    """Show enough of a token to recognise it, never the whole secret."""
    if not token:
        return "(not set)"
    return token[:8] + "…" if len(token) > 12 else "****"
