"""Isolate every hub client and CLI test from the developer's settings, cache and hub variables."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def isolated_prime_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / ".cache"))
    for var in (
        "PRIME_HUB_URL",
        "PRIME_API_BASE_URL",
        "PRIME_BASE_URL",
        "PRIME_API_KEY",
        "PRIME_OWNER",
    ):
        monkeypatch.delenv(var, raising=False)
    return home
