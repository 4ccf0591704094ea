"""The stock `prime` client (PyPI prime 0.18.0), unmodified, installs an environment from our hub
into an empty venv: `prime env install OWNER/NAME` runs `uv pip install NAME --extra-index-url
HUB/OWNER/simple/`, and the environment's SDK (`prime-envhub-sdk`, on no public index) comes
from that same index. Everything else comes from the "normal index", a pypiserver on loopback
holding the files scripts/setup.sh downloaded (the stock client, the SDK's dependencies)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from hub_client.install import find_uv
from tests.e2e.cli_support import cli_env, ok, prime
from tests.e2e.eval_support import ROOT
from tests.e2e.package_index import serve_packages
from tests.hub_server.hubproc import start_hub
from tests.support import require

pytestmark = pytest.mark.timeout(900)

WHEELHOUSE = ROOT / ".venv" / "wheelhouse" / "stock-prime-0.18.0"
LOAD = (
    "import importlib.metadata as m, hello_env; env = hello_env.load_environment(); "
    "print(m.version('hello-env'), m.version('prime-envhub-sdk'), len(env.tasks))"
)


@pytest.mark.slow  # two venvs, a hub, a package index and three installs
def test_stock_prime_env_install_into_an_empty_venv(tmp_path: Path) -> None:
    require((WHEELHOUSE / ".complete").is_file(), "the stock client's files (scripts/setup.sh)")
    uv = find_uv()
    require(uv is not None, "uv")
    with (
        start_hub(tmp_path / "hub") as hub,
        serve_packages(WHEELHOUSE, tmp_path / "index.log") as index,
    ):
        token = hub.add_user("alice")
        ours = cli_env(tmp_path / "home", hub.url)
        ok(prime(ours, "env", "init", "hello-env", "--path", str(tmp_path / "src")))
        ok(prime(ours, "env", "push", str(tmp_path / "src" / "hello-env"), token=token))

        env = {k: v for k, v in os.environ.items() if not k.startswith(("PRIME_", "UV_", "PIP_"))}
        home = tmp_path / "stock-home"
        (home / ".prime").mkdir(parents=True)
        env.update(
            HOME=str(home),
            UV_CACHE_DIR=str(tmp_path / "uv-cache"),
            UV_DEFAULT_INDEX=index,  # the user's normal index
            UV_PYTHON_DOWNLOADS="never",
            PRIME_API_BASE_URL=hub.url,  # what the stock client reads
            PRIME_API_KEY=token,
            COLUMNS="200",
        )

        def venv(name: str) -> Path:
            subprocess.run([str(uv), "venv", "-q", "--python", sys.executable, str(tmp_path / name)],
                           check=True, env=env)  # fmt: skip
            return tmp_path / name

        stock = venv("stock")
        subprocess.run(
            [str(uv), "pip", "install", "-q", "--python", str(stock / "bin" / "python"),
             "prime==0.18.0"],
            check=True, env=env,
        )  # fmt: skip
        target = venv("target")
        env.update(VIRTUAL_ENV=str(target), PATH=f"{Path(str(uv)).parent}:{os.environ['PATH']}")
        installed = subprocess.run(
            [str(stock / "bin" / "prime"), "env", "install", "alice/hello-env"],
            cwd=tmp_path, env=env, text=True, capture_output=True, timeout=600, check=False,
        )  # fmt: skip
    # the stock client exits 0 even when uv failed: read what it ran and what it said (rich
    # folds its lines at COLUMNS whatever the length of this run's paths: compare words)
    output = " ".join((installed.stdout + installed.stderr).split())
    assert "--extra-index-url " + f"{hub.url}/alice/simple/" in output, output
    assert "Successfully installed alice/hello-env" in output, output
    loaded = subprocess.run(
        [str(target / "bin" / "python"), "-c", LOAD],
        text=True, capture_output=True, check=False,
    )  # fmt: skip
    assert loaded.returncode == 0, loaded.stderr
    version, sdk, tasks = loaded.stdout.split()
    assert version == "0.1.0" and int(tasks) > 0
    from registry_index.sdk import SDK_DISTRIBUTION

    ours_sdk = subprocess.run(
        [sys.executable, "-c", f"import importlib.metadata as m; print(m.version('{SDK_DISTRIBUTION}'))"],
        text=True, capture_output=True, check=True,
    ).stdout.strip()  # fmt: skip
    assert sdk == ours_sdk  # the hub's own SDK, from the owner's index
