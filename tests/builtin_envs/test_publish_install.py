"""End to end: publish the six built-ins to a fresh hub as `prime`, then `prime env install`
them by name into a fresh virtualenv and load each one there; and the install commands we show
take the hub's packages even when another index has a same-named, higher version."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from builtin_envs.publish import BUILTIN_NAMES, OWNER, PublishError, publish_builtins
from registry_index.install_commands import install_commands
from tests.e2e.cli_support import fresh_venv
from tests.e2e.package_index import serve_packages
from tests.hub_server.wheels import write_wheel
from tests.support import free_port

BIN = Path(sys.executable).parent
PRIME = str(BIN / "prime")


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    data = tmp_path_factory.mktemp("hub-data")
    added = subprocess.run(
        [PRIME, "hub", "user", "add", "prime", "--data-dir", str(data)],
        capture_output=True,
        text=True,
        check=True,
    )
    token = added.stdout.strip().splitlines()[-1]
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with open(data / "server.log", "w") as log:
        server = subprocess.Popen(
            [PRIME, "hub", "serve", "--data-dir", str(data), "--port", str(port)],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        for _ in range(300):
            try:
                if httpx.get(url + "/prime/simple/", timeout=2).status_code < 500:
                    break
            except httpx.TransportError:
                pass
            if server.poll() is not None:
                pytest.fail(f"the hub exited: {(data / 'server.log').read_text()[-2000:]}")
            time.sleep(0.2)
        yield url, token
    finally:
        server.terminate()
        server.wait(timeout=20)


@pytest.mark.slow  # builds six environments and installs their dependencies (about a minute)
def test_publish_then_install_by_name_into_a_fresh_virtualenv(
    hub: tuple[str, str], tmp_path: Path
) -> None:
    url, token = hub
    uploaded = publish_builtins(url, token)
    # The environments only: the SDK they depend on is served by the hub itself (/_sdk/).
    wheels = sorted(name for name in uploaded if name.endswith(".whl"))
    assert len(wheels) == 6 and not any(w.startswith("prime_envhub") for w in wheels)
    assert len([n for n in uploaded if n.endswith(".tar.gz")]) == 6
    # Re-publishing the same files is a no-op, not an error (identical re-upload).
    assert publish_builtins(url, token, ["arithmetic"]) == []

    index = httpx.get(
        f"{url}/prime/simple/", headers={"Accept": "application/vnd.pypi.simple.v1+json"}
    ).json()
    builtins = set(BUILTIN_NAMES)
    assert builtins <= {p["name"] for p in index["projects"]}

    venv = tmp_path / "fresh"
    subprocess.run(
        [str(BIN / "uv"), "venv", "--quiet", "--python", sys.executable, str(venv)], check=True
    )
    python = venv / "bin" / "python"
    refs = [f"prime/{name}" for name in BUILTIN_NAMES]
    env = {**os.environ, "PRIME_HUB_URL": url, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    installed = subprocess.run(
        [PRIME, "env", "install", *refs, "--python", str(python), "--output", "json"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert installed.returncode == 0, installed.stderr[-3000:]

    script = (
        "import json, prime_env\n"
        f"names = {list(BUILTIN_NAMES)!r}\n"
        "found = sorted(prime_env.installed_environments())\n"
        "loaded = {n: len(prime_env.load('prime/' + n).get_eval_tasks()) for n in names}\n"
        "print(json.dumps({'found': found, 'loaded': loaded}))\n"
    )
    run = subprocess.run(
        [str(python), "-c", script], capture_output=True, text=True, cwd=tmp_path, check=False
    )
    assert run.returncode == 0, run.stderr[-3000:]
    report = json.loads(run.stdout.strip().splitlines()[-1])
    assert set(BUILTIN_NAMES) <= set(report["found"])
    assert all(count > 0 for count in report["loaded"].values()), report


def test_publishing_with_a_bad_token_fails_clearly(hub: tuple[str, str]) -> None:
    url, _ = hub
    with pytest.raises(PublishError, match="(twine upload failed|the hub answered 401)"):
        publish_builtins(url, "not-a-token", ["reverse-text"])
    with pytest.raises(ValueError, match="unknown built-in environment"):
        publish_builtins(url, "x", ["chess"])


# --------------------------------------------------------------------------- dependency confusion


@pytest.fixture(scope="module")
def public_index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A "public index" on loopback (pypiserver) where someone has squatted `reverse-text` with a
    higher version; every other name falls through to PyPI, like a real public index."""
    packages = tmp_path_factory.mktemp("public-index")
    write_wheel(packages, "reverse-text", "99.0", module_source='ORIGIN = "impostor"\n')
    log = packages.parent / "pypiserver.log"
    with serve_packages(packages, log, fallback="https://pypi.org/simple/") as url:
        yield url


def _version_of(python: Path, dist: str, cwd: Path) -> str:
    code = "import importlib.metadata as m, sys; print(m.version(sys.argv[1]))"
    done = subprocess.run(
        [str(python), "-c", code, dist], capture_output=True, text=True, check=True, cwd=cwd
    )
    return done.stdout.strip()


@pytest.mark.slow
def test_every_shown_command_takes_the_hubs_package_over_a_higher_one_elsewhere(
    hub: tuple[str, str], public_index: str, tmp_path: Path
) -> None:
    url, token = hub
    publish_builtins(url, token, ["reverse-text"])
    assert httpx.get(f"{public_index}reverse-text/", follow_redirects=True).status_code == 200
    env = {k: v for k, v in os.environ.items() if not k.startswith(("UV_", "PIP_", "PRIME_"))}
    env.update(
        UV_DEFAULT_INDEX=public_index,  # the user's own index is the one with the impostor
        PIP_INDEX_URL=public_index,
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        XDG_CACHE_HOME=str(tmp_path / "cache"),
        UV_CACHE_DIR=subprocess.run(
            [str(BIN / "uv"), "cache", "dir"], capture_output=True, text=True, check=True
        ).stdout.strip(),
    )
    shown = {c.tool: c for c in install_commands(url, OWNER, "reverse-text")}

    # Control: the command publish.py used to suggest takes the impostor (so this test can fail).
    control = fresh_venv(tmp_path / "control")
    old = subprocess.run(
        [str(BIN / "uv"), "pip", "install", "--dry-run", "--python", str(control),
         "--index-url", f"{url}/prime/simple/", "--extra-index-url", public_index, "reverse-text"],
        capture_output=True, text=True, env=env, check=False,
    )  # fmt: skip
    assert "reverse-text==99.0" in old.stdout + old.stderr, old.stderr

    # uv, as shown: the hub's indexes first, first-index strategy.
    with_uv = fresh_venv(tmp_path / "uv")
    argv = shlex.split(shown["uv"].command)
    done = subprocess.run(
        [str(BIN / "uv"), *argv[1:], "--python", str(with_uv)],
        capture_output=True, text=True, env=env, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert _version_of(with_uv, "reverse-text", tmp_path) == "0.1.0"
    assert _version_of(with_uv, "prime-envhub-sdk", tmp_path) == "0.1.0"

    # pip, as shown: the hub's two wheels by URL, everything else from the user's index.
    page = httpx.get(
        f"{url}/prime/simple/reverse-text/",
        headers={"Accept": "application/vnd.pypi.simple.v1+json"},
    ).json()
    sdk_page = httpx.get(
        f"{url}/_sdk/simple/prime-envhub-sdk/",
        headers={"Accept": "application/vnd.pypi.simple.v1+json"},
    ).json()
    wheel = next(f for f in page["files"] if f["filename"].endswith(".whl"))
    pip_line = next(
        c.command
        for c in install_commands(
            url, OWNER, "reverse-text", "0.1.0",
            wheel_url=f"{url}/prime/files/reverse-text/{wheel['filename']}",
            sdk_wheel_url=f"{url}/_sdk/files/prime-envhub-sdk/{sdk_page['files'][0]['filename']}",
        )
        if c.tool == "pip"
    )  # fmt: skip
    with_pip = fresh_venv(tmp_path / "pip", with_pip=True)
    argv = shlex.split(pip_line)
    done = subprocess.run(
        [str(with_pip), "-m", *argv], capture_output=True, text=True, env=env, check=False
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert _version_of(with_pip, "reverse-text", tmp_path) == "0.1.0"

    # prime env install: resolved on the hub, installed from the verified file.
    with_prime = fresh_venv(tmp_path / "prime")
    done = subprocess.run(
        [PRIME, "env", "install", "prime/reverse-text", "--python", str(with_prime)],
        capture_output=True, text=True, env={**env, "PRIME_HUB_URL": url}, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert _version_of(with_prime, "reverse-text", tmp_path) == "0.1.0"
