"""Issue 26, class 13: a deeply nested TOML gave a traceback from `prime config`, `prime eval
run --endpoints` and `prime train -c` (and an environment's pyproject.toml). Each now ends
with the usual one-line error and the exit status the command gives any broken file (1;
`prime train` answers every config error as a usage error, 2)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from hub_client import settings as cfg
from prime_cli.main import cli

DEEP = "a = " + "[" * 50_000 + "]" * 50_000 + "\n"


def _one_line_error(args: list[str], status: int = 1) -> str:
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == status, (result.exit_code, result.output[-2000:])
    assert "Traceback" not in result.output and "RecursionError" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.output


def test_config_toml(isolated_prime_home: Path) -> None:
    path = cfg.config_path()
    path.parent.mkdir(parents=True)
    path.write_text(DEEP)
    assert "nested more than" in _one_line_error(["config", "show"])


def test_endpoints_file(tmp_path: Path) -> None:
    endpoints = tmp_path / "endpoints.toml"
    endpoints.write_text(DEEP)
    output = _one_line_error(["eval", "run", str(tmp_path), "-m", "alias", "--endpoints",
                              str(endpoints)])  # fmt: skip
    assert "nested more than" in output


def test_train_config(tmp_path: Path) -> None:
    config = tmp_path / "rl.toml"
    config.write_text(DEEP)
    output = _one_line_error(["train", "owner/env", "-c", str(config), "--dry-run"], status=2)
    assert "nested more than" in output
    config.write_text("max_steps = = 1\n")  # any broken config: the same status
    _one_line_error(["train", "owner/env", "-c", str(config), "--dry-run"], status=2)


@pytest.mark.parametrize("command", [["env", "build"], ["eval", "run"]])
def test_an_environments_pyproject(
    tmp_path: Path, command: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    (tmp_path / "pyproject.toml").write_text(DEEP)
    args = [*command, str(tmp_path)] + (
        ["-m", "openai/gpt-4.1-mini"] if command[0] == "eval" else []
    )
    assert "nested more than" in _one_line_error(args)
