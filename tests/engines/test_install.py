"""Finding an engine, and an install that fails leaving what was there.

The real install (minutes, 3.5 GB) is CI's set-up (scripts/test.sh runs `prime engine install
vllm`); here the engines directory is a temporary one."""

from __future__ import annotations

import fcntl
import json
import stat
import sys
import threading
from pathlib import Path

import pytest

from engines.install import (
    ENGINES_DIR_ENV,
    Engine,
    EngineError,
    find_vllm,
    install_vllm,
)
from tests.e2e.eval_support import prime, prime_env
from tests.support import fake_vllm_engine


def test_the_installed_engine_is_found_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENGINES_DIR_ENV, str(tmp_path))
    target = fake_vllm_engine(tmp_path, version="9.9.9")
    engine = find_vllm()
    assert (engine.version, engine.source, engine.location) == (
        "9.9.9",
        "prime engine install",
        str(target),
    )


def test_a_vllm_command_on_path_is_found_by_its_interpreter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A `vllm` script whose interpreter has a vllm distribution (here: a fake one)."""
    site = tmp_path / "site"
    dist = site / "vllm-0.1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm\nVersion: 0.1.0\n")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    python = bindir / "python"
    python.write_text(f'#!/bin/sh\nPYTHONPATH={site} exec {sys.executable} "$@"\n')
    script = bindir / "vllm"
    script.write_text(f"#!{python}\nprint('vllm')\n")
    for path in (python, script):
        path.chmod(path.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv(ENGINES_DIR_ENV, str(tmp_path / "none"))
    monkeypatch.setenv("PATH", f"{bindir}:/usr/bin:/bin")
    engine = find_vllm()
    assert (engine.python, engine.version, engine.source) == (str(python), "0.1.0", "PATH")


def test_a_missing_engine_names_the_install_command(tmp_path: Path) -> None:
    env = prime_env(**{ENGINES_DIR_ENV: str(tmp_path / "none"), "PATH": "/usr/bin:/bin"})
    listed = prime("engine", "list", "--output", "json", cwd=tmp_path, env=env)
    assert listed.returncode == 0, listed.stderr
    body = json.loads(listed.stdout)
    assert body["engines"] == []
    assert body["missing"]["vllm"] == "vLLM is not installed: run `prime engine install vllm`"


def test_a_failed_install_leaves_the_previous_engine(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A release that does not exist: the installer fails, the old engine is back in place."""
    monkeypatch.setenv(ENGINES_DIR_ENV, str(tmp_path))
    fake_vllm_engine(tmp_path, version="1.0.0")
    lines: list[str] = []
    with pytest.raises(EngineError, match="failed"):
        install_vllm(version="0.0.0.dev1", cuda=True, say=lines.append)
    assert find_vllm().version == "1.0.0"
    assert sorted(p.name for p in tmp_path.iterdir()) == [".vllm.lock", "vllm"]
    assert any("installing vllm==0.0.0.dev1" in line for line in lines)


def test_a_second_install_waits_for_the_first_and_takes_its_engine(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two installs at once (two test runs): the second waits on the lock, then finds the
    engine the first installed instead of moving it away mid-install."""
    monkeypatch.setenv(ENGINES_DIR_ENV, str(tmp_path))
    lines: list[str] = []
    done: list[Engine] = []
    with open(tmp_path / ".vllm.lock", "w") as first:
        fcntl.flock(first, fcntl.LOCK_EX)
        second = threading.Thread(
            target=lambda: done.append(install_vllm(cuda=False, say=lines.append))
        )
        second.start()
        second.join(timeout=2)
        assert second.is_alive() and not done
        assert lines == ["another install of vllm is running here; waiting for it"]
        fake_vllm_engine(tmp_path)  # what the first install leaves
    second.join(timeout=30)
    assert [engine.location for engine in done] == [str(tmp_path / "vllm")]
    assert lines[-1].endswith(f"is already installed in {tmp_path / 'vllm'}")


def test_eval_with_a_missing_engine_says_so_and_writes_nothing(tmp_path: Path) -> None:
    env = prime_env(**{ENGINES_DIR_ENV: str(tmp_path / "none"), "PATH": "/usr/bin:/bin"})
    arithmetic = Path(__file__).resolve().parents[2] / "builtin_envs" / "arithmetic"
    result = prime(
        "eval", "run", str(arithmetic), "-m", "local/smollm2-135m", "--backend", "vllm",
        "-n", "1", "-r", "1", "-o", str(tmp_path / "out"), cwd=tmp_path, env=env,
    )  # fmt: skip
    assert result.returncode == 1, result.stderr
    assert "Error: vLLM is not installed: run `prime engine install vllm`" in result.stderr
    assert "Traceback" not in result.stderr and not (tmp_path / "out").exists()
    refused = prime(
        "eval", "run", str(arithmetic), "-m", "local/smollm2-135m", "--backend", "vllm",
        "-w", "2", "-o", str(tmp_path / "out"), cwd=tmp_path, env=env,
    )  # fmt: skip
    assert refused.returncode == 2 and "give -w 1 with --backend vllm" in refused.stderr
