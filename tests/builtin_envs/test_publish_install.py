"""End to end: publish the five built-ins to a fresh hub as `prime`, then `prime env install`
them by name into a fresh virtualenv and load each one there."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from builtin_envs.publish import BUILTIN_NAMES, PublishError, publish_builtins
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


def test_publish_then_install_by_name_into_a_fresh_virtualenv(
    hub: tuple[str, str], tmp_path: Path
) -> None:
    url, token = hub
    uploaded = publish_builtins(url, token)
    wheels = sorted(name for name in uploaded if name.endswith(".whl"))
    assert len(wheels) == 6 and any(w.startswith("prime_envhub-") for w in wheels)
    assert len([n for n in uploaded if n.endswith(".tar.gz")]) == 5
    # Re-publishing the same files is a no-op, not an error (identical re-upload).
    publish_builtins(url, token, ["arithmetic"], include_sdk=False)

    index = httpx.get(
        f"{url}/prime/simple/", headers={"Accept": "application/vnd.pypi.simple.v1+json"}
    ).json()
    assert {"wordle", "wiki-search", "reverse-text", "arithmetic", "python-code"} <= {
        p["name"] for p in index["projects"]
    }

    venv = tmp_path / "fresh"
    subprocess.run(
        [str(BIN / "uv"), "venv", "--quiet", "--python", sys.executable, str(venv)], check=True
    )
    python = venv / "bin" / "python"
    refs = ["prime/prime-envhub", *(f"prime/{name}" for name in BUILTIN_NAMES)]
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
        publish_builtins(url, "not-a-token", ["reverse-text"], include_sdk=False)
    with pytest.raises(ValueError, match="unknown built-in environment"):
        publish_builtins(url, "x", ["chess"])
