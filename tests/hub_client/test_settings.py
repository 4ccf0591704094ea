"""The settings file: location, permissions, atomic writes, precedence and validation."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from click.testing import CliRunner

from hub_client import settings as cfg
from prime_cli.main import cli


def test_path_honours_xdg_config_home(isolated_prime_home: Path) -> None:
    assert cfg.config_path() == isolated_prime_home / ".config" / "prime" / "config.toml"


def test_set_writes_mode_0600_and_round_trips() -> None:
    path = cfg.set_value("hub_url", "http://127.0.0.1:9999/api/v1/")
    cfg.set_value("api_key", "phub_secret_value_123")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert cfg.load_file() == {
        "hub_url": "http://127.0.0.1:9999",
        "api_key": "phub_secret_value_123",
    }
    # no temp files left beside it
    assert sorted(p.name for p in path.parent.iterdir()) == ["config.toml"]


def test_environment_overrides_file(monkeypatch: pytest.MonkeyPatch) -> None:
    cfg.set_value("hub_url", "http://127.0.0.1:1111")
    cfg.set_value("api_key", "from-file-token")
    settings = cfg.load_settings()
    assert (settings.hub_url, settings.api_key) == ("http://127.0.0.1:1111", "from-file-token")
    assert settings.sources == {"hub_url": "file", "api_key": "file"}

    monkeypatch.setenv("PRIME_API_BASE_URL", "http://127.0.0.1:2222/api/v1")
    assert cfg.load_settings().hub_url == "http://127.0.0.1:2222"
    monkeypatch.setenv("PRIME_HUB_URL", "http://127.0.0.1:3333")
    monkeypatch.setenv("PRIME_API_KEY", "from-env-token")
    settings = cfg.load_settings()
    assert (settings.hub_url, settings.api_key) == ("http://127.0.0.1:3333", "from-env-token")
    assert settings.sources["hub_url"] == "env PRIME_HUB_URL"


def test_defaults_without_file() -> None:
    settings = cfg.load_settings()
    assert settings.hub_url == cfg.DEFAULT_HUB_URL
    assert settings.api_key is None and settings.sources["hub_url"] == "default"


@pytest.mark.parametrize("url", ["127.0.0.1:8000", "ftp://host", "http://", ""])
def test_invalid_urls_are_refused(url: str) -> None:
    with pytest.raises(cfg.ConfigError, match="invalid hub URL"):
        cfg.set_value("hub_url", url)
    assert not cfg.config_path().exists()


def test_corrupt_file_is_a_clear_error() -> None:
    path = cfg.config_path()
    path.parent.mkdir(parents=True)
    path.write_text("hub_url = [unterminated\n")
    result = CliRunner().invoke(cli, ["config", "show"])
    assert result.exit_code == 1
    assert "is not valid TOML" in result.output and "Traceback" not in result.output


def test_config_commands(isolated_prime_home: Path) -> None:
    runner = CliRunner()
    assert runner.invoke(cli, ["config", "set", "owner", "acme"]).exit_code == 0
    assert runner.invoke(cli, ["config", "set", "api_key", "phub_abcdefghijklmnop"]).exit_code == 0
    shown = runner.invoke(cli, ["config", "show", "--output", "json"])
    assert shown.exit_code == 0, shown.output
    assert '"value": "acme"' in shown.output
    assert "phub_abcdefghijklmnop" not in shown.output  # the token is masked
    bad = runner.invoke(cli, ["config", "set", "colour", "blue"])
    assert bad.exit_code == 2 and "colour" in bad.output
    assert runner.invoke(cli, ["config", "unset", "owner"]).exit_code == 0
    assert "owner" not in cfg.load_file()


def test_stock_base_url_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PRIME_BASE_URL", "http://127.0.0.1:4444/api/v1")
    settings = cfg.load_settings()
    assert settings.hub_url == "http://127.0.0.1:4444"
    assert settings.sources["hub_url"] == "env PRIME_BASE_URL"
    monkeypatch.setenv("PRIME_API_BASE_URL", "http://127.0.0.1:5555")  # the older name wins
    assert cfg.load_settings().hub_url == "http://127.0.0.1:5555"


def test_logout_removes_only_the_token() -> None:
    cfg.set_value("hub_url", "http://127.0.0.1:1111")
    cfg.set_value("api_key", "phub_to_forget_123")
    result = CliRunner().invoke(cli, ["logout"])
    assert result.exit_code == 0 and "Logged out" in result.output
    assert cfg.load_file() == {"hub_url": "http://127.0.0.1:1111"}
    assert "nothing to do" in CliRunner().invoke(cli, ["logout"]).output


def test_hub_seed_defaults_to_the_configured_hub(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import prime_cli.hub

    seen: list[str] = []
    monkeypatch.setattr(prime_cli.hub, "_seed", lambda url, data_dir: seen.append(url) or [])
    monkeypatch.setenv("PRIME_HUB_URL", "http://127.0.0.1:7777")
    result = CliRunner().invoke(cli, ["hub", "seed", "--data-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert seen == ["http://127.0.0.1:7777"]


def test_stock_config_spellings() -> None:
    runner = CliRunner()
    assert (
        runner.invoke(cli, ["config", "set-base-url", "http://127.0.0.1:6666/api/v1"]).exit_code
        == 0
    )
    assert runner.invoke(cli, ["config", "set-api-key", "phub_stock_key_1234"]).exit_code == 0
    assert cfg.load_file() == {"hub_url": "http://127.0.0.1:6666", "api_key": "phub_stock_key_1234"}
    shown = runner.invoke(cli, ["config", "view", "--output", "json"])
    assert shown.exit_code == 0 and '"source": "file"' in shown.output
    assert "phub_stock_key_1234" not in shown.output  # masked
