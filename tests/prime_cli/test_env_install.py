"""The install command line: local wheel files only, never a hub index or a bare name."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from prime_cli.env_install import (
    InstallError,
    ResolvedEnv,
    check_distinct_packages,
    find_uv,
    install_command,
    target_python,
)
from registry_index.resolve import parse_env_ref
from tests.support import require


def _env(ref: str, version: str) -> ResolvedEnv:
    parsed = parse_env_ref(ref)
    return ResolvedEnv(
        ref=parsed,
        package_name=parsed.name,
        version=version,
        visibility="public",
        yanked=False,
        yanked_reason=None,
        wheel_url=f"http://127.0.0.1:1/{parsed.owner}/files/{parsed.name}/x.whl",
        wheel_sha256="ab" * 32,
        wheel_filename=f"{parsed.name.replace('-', '_')}-{version}-py3-none-any.whl",
    )


def test_uv_command_installs_files_and_reinstalls_them(tmp_path: Path) -> None:
    require(find_uv() is not None, "uv (dev extra)")
    wheel = tmp_path / "calc_env-0.1.0-py3-none-any.whl"
    cmd = install_command({"calc-env": wheel}, "/venv/bin/python", "uv")
    assert cmd[1:5] == ["pip", "install", "--python", "/venv/bin/python"]
    assert cmd[-1] == str(wheel)
    assert ["--reinstall-package", "calc-env"] == cmd[5:7]
    # no index of any kind and no bare requirement names: only the verified file
    assert not any("index" in part or "find-links" in part for part in cmd)
    assert "calc-env" not in cmd[7:]


def test_pip_command(tmp_path: Path) -> None:
    wheel = tmp_path / "calc_env-0.1.0-py3-none-any.whl"
    cmd = install_command({"calc-env": wheel}, "/venv/bin/python", "pip", prerelease=True)
    assert cmd[:4] == ["/venv/bin/python", "-m", "pip", "install"]
    assert "--pre" in cmd and cmd[-1] == str(wheel)
    assert not any("index" in part for part in cmd)


def test_same_package_from_two_owners_is_refused() -> None:
    check_distinct_packages([_env("alice/calc", "1.0"), _env("alice/other", "1.0")])
    check_distinct_packages([_env("alice/calc", "1.0"), _env("alice/calc", "1.0")])
    with pytest.raises(InstallError, match="same Python package"):
        check_distinct_packages([_env("alice/calc", "1.0"), _env("bob/calc", "1.0")])


def test_target_python() -> None:
    assert target_python(None) == sys.executable
    with pytest.raises(InstallError, match="not an executable Python"):
        target_python("/nonexistent/bin/python")
