"""The install routine: local wheel files only (never a hub index or a bare name), every
hub archive validated, the SDK requirement understood, installer failures explained."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from hub_client.install import (
    InstallError,
    ResolvedEnv,
    check_archive,
    check_distinct_packages,
    install_command,
    run_installer,
    sdk_need,
    target_python,
)
from prime_env.uv_binary import find_uv
from registry_index.resolve import parse_env_ref
from tests.registry_index.wheelmaker import metadata_text, wheel_members, write_zip
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


def test_sdk_need_in_any_spelling() -> None:
    need = sdk_need(
        {
            "alice/a 1.0": ["numpy>=1", "Prime_EnvHub.SDK[sandbox]>=0.1"],
            "alice/b 1.0": ["prime-envhub-sdk<0.3", "prime-envhub-sdk>=9; extra == 'never'"],
        }
    )
    assert [str(r) for r in need.requirements] == [
        "Prime_EnvHub.SDK[sandbox]>=0.1",
        "prime-envhub-sdk<0.3",
    ]
    assert need.accepts("0.2.0") and not need.accepts("0.3.0") and not need.accepts("0.0.9")
    assert "alice/a 1.0 needs Prime_EnvHub.SDK[sandbox]>=0.1" in need.describe()
    assert sdk_need({"alice/c 1.0": ["numpy"]}).requirements == []


def test_a_bomb_wheel_from_a_hostile_hub_is_refused_and_dropped(tmp_path: Path) -> None:
    wheel = tmp_path / "bomb_env-1.0.0-py3-none-any.whl"
    members = wheel_members("bomb_env", extra={"bomb_env/zeros.bin": bytes(64 * 1024 * 1024)})
    write_zip(wheel, members)
    assert wheel.stat().st_size < 1024 * 1024
    with pytest.raises(InstallError, match="fails validation, nothing was installed.*zip bomb"):
        check_archive(wheel, "alice/bomb-env 1.0.0")
    assert not wheel.exists()


def test_real_uv_failure_names_the_missing_requirement(tmp_path: Path) -> None:
    """uv against an empty local index: the error names the requirement and the fix."""
    uv = find_uv()
    require(uv is not None, "uv (dev extra)")
    wheel = tmp_path / "needy_env-1.0.0-py3-none-any.whl"
    meta = metadata_text("needy_env", "1.0.0").replace(
        "Summary", "Requires-Dist: ghost-dep-xyz>=2\nSummary"
    )
    write_zip(
        wheel,
        wheel_members("needy_env", extra={"needy_env-1.0.0.dist-info/METADATA": meta.encode()}),
    )
    venv = tmp_path / "venv"
    subprocess.run([str(uv), "venv", "-q", "--python", sys.executable, str(venv)], check=True)
    (tmp_path / "empty").mkdir()
    cmd = install_command({"needy-env": wheel}, str(venv / "bin" / "python"), "uv")
    env_vars = {"UV_DEFAULT_INDEX": (tmp_path / "empty").as_uri(), "UV_NO_CACHE": "1"}
    with pytest.MonkeyPatch.context() as patch:
        for key, value in env_vars.items():
            patch.setenv(key, value)
        with pytest.raises(InstallError) as info:
            run_installer(cmd, {"alice/needy-env 1.0.0": ["ghost-dep-xyz>=2"]})
    message = str(info.value)
    assert message.startswith("alice/needy-env 1.0.0 requires 'ghost-dep-xyz>=2'"), message
    assert env_vars["UV_DEFAULT_INDEX"] in message and "pyproject.toml" in message


def _wheel(tmp_path: Path, name: str, requires: list[str]) -> Path:
    module = name.replace("-", "_")
    wheel = tmp_path / f"{module}-1.0.0-py3-none-any.whl"
    lines = "".join(f"Requires-Dist: {r}\n" for r in requires)
    meta = metadata_text(module, "1.0.0").replace("Summary", lines + "Summary")
    write_zip(
        wheel, wheel_members(module, extra={f"{module}-1.0.0.dist-info/METADATA": meta.encode()})
    )
    return wheel


def test_with_the_index_out_of_reach_what_is_installed_is_enough(tmp_path: Path) -> None:
    """uv looks installed dependencies up on its index: offline, the install is tried again
    with --offline and succeeds from the target's packages; a dependency that is missing is
    named, with the package that needs it (not the one above it)."""
    uv = find_uv()
    require(uv is not None, "uv (dev extra)")
    venv = tmp_path / "venv"
    subprocess.run([str(uv), "venv", "-q", "--python", sys.executable, str(venv)], check=True)
    python = str(venv / "bin" / "python")
    base = _wheel(tmp_path, "base-dep", [])
    subprocess.run([str(uv), "pip", "install", "-q", "--python", python, "--offline", str(base)],
                   check=True)  # fmt: skip
    needy = _wheel(tmp_path, "needy-env", ["base-dep>=1", "mid-pkg"])
    mid = _wheel(tmp_path, "mid-pkg", ["ghost-dep-xyz>=2"])
    lines: list[str] = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("UV_DEFAULT_INDEX", "http://127.0.0.1:9/simple")  # nothing listens there
        patch.setenv("UV_NO_CACHE", "1")
        patch.setenv("UV_HTTP_RETRIES", "0")
        requires = {"alice/needy-env 1.0.0": ["base-dep>=1", "mid-pkg"]}
        with pytest.raises(InstallError) as info:
            run_installer(install_command({"needy-env": needy, "mid-pkg": mid}, python, "uv"),
                          requires, on_output=lines.append)  # fmt: skip
        message = str(info.value)
        assert message.startswith("mid-pkg requires 'ghost-dep-xyz>=2'"), "".join(lines)
        assert "the package index was unreachable, so uv ran --offline" in message
        assert any("trying again with what is installed" in line for line in lines)
        mid = _wheel(tmp_path, "mid-pkg", [])
        run_installer(install_command({"needy-env": needy, "mid-pkg": mid}, python, "uv"),
                      requires, on_output=lines.append)  # fmt: skip
    listed = subprocess.run([str(uv), "pip", "list", "--python", python], capture_output=True,
                            text=True, check=True).stdout  # fmt: skip
    assert "needy-env" in listed and "base-dep" in listed
