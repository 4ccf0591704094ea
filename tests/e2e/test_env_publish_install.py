"""End to end: `prime env init → build → push → install → import`, driven as a user would.

A real hub (`prime hub serve`, SQLite + local blobs) and a real "normal" package index
(pypiserver) run on loopback; `prime` runs as a subprocess; environments are installed with
real uv and pip into fresh virtualenvs. Nothing leaves 127.0.0.1.

The fresh virtualenvs see this checkout's SDK through a `.pth` file (as a
`--system-site-packages` venv would see system packages), so importing the environment works
offline; uv and pip do not count those packages as installed, so every dependency the
environment declares really is resolved from the normal index.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from prime_env.uv_binary import find_uv
from tests.e2e.cli_support import fresh_venv
from tests.e2e.package_index import serve_packages
from tests.hub_server.hubproc import HubProcess
from tests.hub_server.wheels import write_wheel
from tests.support import free_port, require

PRIME = Path(sys.executable).with_name("prime")

pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="module")
def tokens(hub: HubProcess) -> dict[str, str]:
    return {"alice": hub.add_user("alice"), "bob": hub.add_user("bob")}


@pytest.fixture(scope="module")
def normal_index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A pypiserver standing in for PyPI: it has `tiny-dep` and a `ghost-env` the hub lacks."""
    packages = tmp_path_factory.mktemp("normal-index")
    write_wheel(packages, "tiny-dep", "1.0", module_source='ORIGIN = "normal-index"\n')
    write_wheel(packages, "ghost-env", "1.0", module_source='ORIGIN = "normal-index"\n')
    with serve_packages(packages, packages.parent / "pypiserver.log") as url:
        yield url


@pytest.fixture
def cli_env(tmp_path: Path, hub: HubProcess, normal_index: str) -> dict[str, str]:
    """Environment for `prime` and the installers: own settings/caches, loopback indexes only."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PRIME_", "UV_", "PIP_"))}
    env.update(
        HOME=str(tmp_path / "home"),
        XDG_CONFIG_HOME=str(tmp_path / "home" / ".config"),
        XDG_CACHE_HOME=str(tmp_path / "home" / ".cache"),
        PRIME_HUB_URL=hub.url,
        UV_DEFAULT_INDEX=normal_index,
        UV_CACHE_DIR=str(tmp_path / "uv-cache"),
        UV_PYTHON_DOWNLOADS="never",
        PIP_INDEX_URL=normal_index,
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        PIP_NO_CACHE_DIR="1",
        NO_COLOR="1",
        COLUMNS="200",
    )
    return env


def prime(
    env: dict[str, str], *args: str, token: str | None = None
) -> subprocess.CompletedProcess[str]:
    run_env = dict(env)
    if token is not None:
        run_env["PRIME_API_KEY"] = token
    return subprocess.run(
        [str(PRIME), *args], check=False, env=run_env, capture_output=True, text=True, timeout=300
    )


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    return result.stdout


def one_line_error(result: subprocess.CompletedProcess[str], *needles: str) -> str:
    """A refusal: non-zero exit, a single `Error: …` line on stderr, no traceback (besides the
    hub client's notices of retries before it gave up)."""
    assert result.returncode != 0, result.stdout
    assert "Traceback" not in result.stderr + result.stdout
    lines = [
        line for line in result.stderr.splitlines() if line.strip() and "; retrying in " not in line
    ]
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def py(python: Path, code: str) -> str:
    result = subprocess.run(
        [str(python), "-c", code], check=False, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def make_env(
    env: dict[str, str], parent: Path, name: str, *, deps: list[str], version: str = "0.1.0"
) -> Path:
    """`prime env init`, then declare `deps` (served by the normal index) and `version`."""
    ok(prime(env, "env", "init", name, "--path", str(parent)))
    root = parent / name
    pyproject = root / "pyproject.toml"
    text = pyproject.read_text()
    text = re.sub(r"(?m)^dependencies = .*$", f"dependencies = {json.dumps(deps)}", text)
    text = text.replace('version = "0.1.0"', f'version = "{version}"')
    pyproject.write_text(text)
    return root


def push_new_env(
    env: dict[str, str], parent: Path, name: str, token: str, *push_args: str, deps: list[str]
) -> None:
    """`make_env`, then `prime env push` it (with `push_args`) as `token`'s account."""
    root = make_env(env, parent, name, deps=deps)
    ok(prime(env, "env", "push", str(root), *push_args, token=token))


def bump(root: Path, old: str, new: str) -> None:
    pyproject = root / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace(f'version = "{old}"', f'version = "{new}"'))


def installed_version(python: Path, dist: str) -> str | None:
    out = py(
        python,
        "import importlib.metadata as m\n"
        f"try: print(m.version({dist!r}))\n"
        "except m.PackageNotFoundError: print('-')",
    )
    return None if out == "-" else out


# --------------------------------------------------------------------------- the main flow


def test_init_build_push_install_import(
    tmp_path: Path, cli_env: dict[str, str], tokens: dict[str, str]
) -> None:
    alice = tokens["alice"]
    root = make_env(cli_env, tmp_path / "src", "calc-env", deps=["tiny-dep"])

    built = ok(prime(cli_env, "env", "build", str(root)))
    assert (root / "dist" / "calc_env-0.1.0-py3-none-any.whl").is_file(), built
    assert (root / "dist" / "calc_env-0.1.0.tar.gz").is_file()

    pushed = ok(prime(cli_env, "env", "push", str(root), token=alice))
    assert "Pushed alice/calc-env@0.1.0" in pushed
    meta = json.loads((root / ".prime" / ".env-metadata.json").read_text())
    assert (meta["owner"], meta["name"], meta["version"]) == ("alice", "calc-env", "0.1.0")

    # Another namespace of the hub has a project called tiny-dep (version 9.0): the dependency
    # still comes from the normal index. Only alice's own namespace is asked first (the first
    # index of the page's install line; tests/hub_client/test_install_namespace.py).
    shadow = make_env(cli_env, tmp_path / "src", "tiny-dep", deps=[], version="9.0")
    ok(prime(cli_env, "env", "push", str(shadow), token=tokens["bob"]))

    python = fresh_venv(tmp_path / "venv", cli_env, sees_suite=True)
    out = ok(
        prime(
            cli_env,
            "env",
            "install",
            "alice/calc-env@0.1.0",
            "--python",
            str(python),
            "--output",
            "json",
            token=alice,
        )
    )
    record = json.loads(out)
    assert record["installer"] == "uv"
    assert record["installed"][0]["environment"] == "alice/calc-env"
    assert installed_version(python, "calc-env") == "0.1.0"
    assert installed_version(python, "tiny-dep") == "1.0"
    assert py(python, "import tiny_dep; print(tiny_dep.ORIGIN)") == "normal-index"
    loaded = py(
        python,
        "import prime_env; env = prime_env.load('alice/calc-env'); "
        "print(type(env).__name__, len(env.tasks), env.version)",
    )
    assert loaded == "Environment 5 0.1.0"

    # Same content again: refused, nothing uploaded.
    one_line_error(prime(cli_env, "env", "push", str(root), token=alice), "nothing to push")
    # Changed content under the same version: refused with a bump hint.
    (root / "calc_env.py").write_text((root / "calc_env.py").read_text() + "\n# v2\n")
    one_line_error(prime(cli_env, "env", "push", str(root), token=alice), "0.1.1")
    bump(root, "0.1.0", "0.2.0")
    assert "alice/calc-env@0.2.0" in ok(prime(cli_env, "env", "push", str(root), token=alice))

    versions = json.loads(
        ok(prime(cli_env, "env", "versions", "alice/calc-env", "--output", "json"))
    )
    assert [v["semantic_version"] for v in versions["versions"]] == ["0.2.0", "0.1.0"]

    # A specifier resolves on the hub; an exact pin stays exact.
    ok(prime(cli_env, "env", "install", "alice/calc-env@>=0.2", "--python", str(python)))
    assert installed_version(python, "calc-env") == "0.2.0"
    ok(prime(cli_env, "env", "install", "alice/calc-env@0.1.0", "--python", str(python)))
    assert installed_version(python, "calc-env") == "0.1.0"

    # pull gives back exactly the pushed source tree.
    target = tmp_path / "pulled"
    ok(prime(cli_env, "env", "pull", "alice/calc-env@0.2.0", "--target", str(target)))
    for name in ("pyproject.toml", "README.md", "calc_env.py"):
        assert (target / name).read_bytes() == (root / name).read_bytes()
    one_line_error(
        prime(cli_env, "env", "pull", "alice/calc-env@0.2.0", "--target", str(target)), "not empty"
    )


# --------------------------------------------------------------------------- the light SDK

HUB_ONLY = ("fastapi", "sqlmodel", "alembic", "twine", "uvicorn", "torch")
SCORE = """
import json, sys
import prime_env, sdk_env
from prime_env.clients.openai_client import OpenAIClient
from prime_env.runner import run_rollouts_sync

env = prime_env.load("alice/sdk-env")
client = OpenAIClient("fake-model", base_url=sys.argv[1], api_key=sys.argv[2])
records = run_rollouts_sync(env, client, n=2)
right = sdk_env.correct_answer([{"role": "assistant", "content": "It is 42"}], "42")
wrong = sdk_env.correct_answer([{"role": "assistant", "content": "No idea"}], "42")
print(json.dumps({
    "env": env.id,
    "rollouts": [[r.reward, r.error] for r in records],
    "scores": [right, wrong],
}))
"""


def real_index_env(cli_env: dict[str, str]) -> dict[str, str]:
    """`cli_env` with the installers' own default index (PyPI) and the user's warm uv cache:
    the SDK's dependencies (pydantic, openai, aiohttp, ...) are real packages."""
    uv = find_uv()
    require(uv is not None, "uv")
    cache = subprocess.run(
        [str(uv), "cache", "dir"], capture_output=True, text=True, check=True
    ).stdout.strip()
    env = {k: v for k, v in cli_env.items() if k not in ("UV_DEFAULT_INDEX", "PIP_INDEX_URL")}
    env["UV_CACHE_DIR"] = cache
    return env


@pytest.mark.slow
def test_fresh_venv_on_an_unseeded_hub_gets_the_light_sdk_from_the_hub(
    tmp_path: Path, cli_env: dict[str, str], tokens: dict[str, str]
) -> None:
    """The issue's bar: a scaffolded env (depending on `prime-envhub-sdk` only) installs by name
    into a fresh venv from a hub nobody seeded, loads and scores, without any hub dependency."""
    from testing.server import FakeServer

    env = real_index_env(cli_env)
    ok(prime(env, "env", "init", "sdk-env", "--path", str(tmp_path / "src")))
    ok(prime(env, "env", "push", str(tmp_path / "src" / "sdk-env"), token=tokens["alice"]))
    python = fresh_venv(tmp_path / "venv", env, with_pip=True)
    ok(prime(env, "env", "install", "alice/sdk-env", "--python", str(python), "--output", "json"))

    with FakeServer("openai", api_key="k") as fake:
        scored = json.loads(py_args(python, SCORE, fake.url, "k", cwd=tmp_path))
    assert scored["env"] == "alice/sdk-env@0.1.0"
    assert len(scored["rollouts"]) == 2
    assert all(error is None and reward in (0.0, 1.0) for reward, error in scored["rollouts"])
    assert scored["scores"] == [1.0, 0.0]

    listed = subprocess.run(
        [str(python), "-m", "pip", "list", "--format", "json"],
        capture_output=True, text=True, check=True, env=env,
    )  # fmt: skip
    names = {item["name"].lower() for item in json.loads(listed.stdout)}
    assert {"sdk-env", "prime-envhub-sdk"} <= names
    assert not names & set(HUB_ONLY), names & set(HUB_ONLY)
    assert "prime-envhub" not in names
    # The SDK came from the hub (its wheel, verified), not from any index.
    origin = py_args(
        python,
        "import importlib.metadata as m; print(m.distribution('prime-envhub-sdk')"
        ".read_text('direct_url.json'))",
        cwd=tmp_path,
    )
    assert "/prime/wheels/_sdk/" in json.loads(origin)["url"]


def py_args(python: Path, code: str, *args: str, cwd: Path) -> str:
    result = subprocess.run(
        [str(python), "-c", code, *args],
        check=False, capture_output=True, text=True, timeout=120, cwd=cwd,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return result.stdout.strip().splitlines()[-1]


def test_unresolvable_dependency_is_named_with_a_fix(
    tmp_path: Path, cli_env: dict[str, str], tokens: dict[str, str]
) -> None:
    """Before: "the installer failed with exit status 1". Now the requirement is named."""
    push_new_env(
        cli_env, tmp_path / "src", "needy-env", tokens["alice"], deps=["tiny-dep", "ghost-dep>=2"]
    )
    python = fresh_venv(tmp_path / "venv", cli_env, sees_suite=True)
    for installer in ("uv", "pip"):
        failed = prime(
            cli_env, "env", "install", "alice/needy-env", "--python", str(python),
            "--with", installer,
        )  # fmt: skip
        assert failed.returncode == 1 and "Traceback" not in failed.stderr
        error = failed.stderr.strip().splitlines()[-1]
        assert error.startswith("Error: alice/needy-env 0.1.0 requires 'ghost-dep>=2'"), error
        assert cli_env["UV_DEFAULT_INDEX" if installer == "uv" else "PIP_INDEX_URL"] in error
        assert "pyproject.toml" in error
    assert installed_version(python, "needy-env") is None


def test_an_sdk_the_hub_cannot_serve_is_named(
    tmp_path: Path, cli_env: dict[str, str], tokens: dict[str, str]
) -> None:
    push_new_env(
        cli_env, tmp_path / "src", "future-env", tokens["alice"], deps=["prime-envhub-sdk>=99"]
    )
    python = fresh_venv(tmp_path / "venv", cli_env)
    failed = prime(cli_env, "env", "install", "alice/future-env", "--python", str(python))
    assert failed.returncode == 1 and "Traceback" not in failed.stderr
    error = failed.stderr.strip().splitlines()[-1]
    assert error.startswith("Error: alice/future-env 0.1.0 needs prime-envhub-sdk>=99"), error
    assert "serves prime-envhub-sdk 0.1.0" in error
    assert installed_version(python, "future-env") is None


def test_listing_info_yank_json(
    tmp_path: Path, cli_env: dict[str, str], tokens: dict[str, str]
) -> None:
    alice = tokens["alice"]
    push_new_env(cli_env, tmp_path / "src", "listed-env", alice, deps=[])

    listing = json.loads(ok(prime(cli_env, "env", "list", "--owner", "alice", "--output", "json")))
    assert "listed-env" in {item["name"] for item in listing["environments"]}
    found = json.loads(ok(prime(cli_env, "env", "search", "listed", "--output", "json")))
    assert [item["name"] for item in found["environments"]] == ["listed-env"]
    assert "listed-env" in ok(prime(cli_env, "env", "list", "--tag", "example"))

    info = json.loads(ok(prime(cli_env, "env", "info", "alice/listed-env", "--output", "json")))
    assert info["version"]["semantic_version"] == "0.1.0"
    assert info["version"]["wheel_filename"] == "listed_env-0.1.0-py3-none-any.whl"

    ok(prime(cli_env, "env", "yank", "alice/listed-env@0.1.0", "--reason", "broken", token=alice))
    versions = json.loads(
        ok(prime(cli_env, "env", "versions", "alice/listed-env", "--output", "json"))
    )
    assert versions["versions"][0]["yanked"] is True
    # bob may not yank alice's environment
    assert (
        prime(cli_env, "env", "unyank", "alice/listed-env@0.1.0", token=tokens["bob"]).returncode
        == 1
    )
    ok(prime(cli_env, "env", "unyank", "alice/listed-env@0.1.0", token=alice))
    versions = json.loads(
        ok(prime(cli_env, "env", "versions", "alice/listed-env", "--output", "json"))
    )
    assert versions["versions"][0]["yanked"] is False


# --------------------------------------------------------------------------- privacy


def test_private_environment_is_invisible_to_others(
    tmp_path: Path, hub: HubProcess, cli_env: dict[str, str], tokens: dict[str, str]
) -> None:
    alice, bob = tokens["alice"], tokens["bob"]
    push_new_env(cli_env, tmp_path / "src", "secret-env", alice, "--visibility", "private", deps=[])

    for token in (bob, None):
        one_line_error(prime(cli_env, "env", "info", "alice/secret-env", token=token), "not found")
        one_line_error(
            prime(cli_env, "env", "versions", "alice/secret-env", token=token), "not found"
        )
        listing = json.loads(ok(prime(cli_env, "env", "list", "--output", "json", token=token)))
        assert "secret-env" not in {item["name"] for item in listing["environments"]}
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        assert httpx.get(f"{hub.url}/alice/simple/secret-env/", headers=headers).status_code == 404
    python = fresh_venv(tmp_path / "venv", cli_env, sees_suite=True)
    one_line_error(
        prime(cli_env, "env", "install", "alice/secret-env", "--python", str(python), token=bob),
        "not found",
    )
    assert installed_version(python, "secret-env") is None

    # The owner sees it and can install it (the wheel download carries the token).
    ok(prime(cli_env, "env", "install", "alice/secret-env", "--python", str(python), token=alice))
    assert installed_version(python, "secret-env") == "0.1.0"


# --------------------------------------------------------------------------- dependency confusion


@pytest.mark.parametrize("installer", ["uv", "pip"])
def test_unknown_name_never_falls_through(
    tmp_path: Path,
    cli_env: dict[str, str],
    tokens: dict[str, str],
    normal_index: str,
    installer: str,
) -> None:
    """`ghost-env` exists on the normal index but not on the hub: install must refuse."""
    python = fresh_venv(tmp_path / "venv", cli_env, with_pip=installer == "pip", sees_suite=True)
    assert httpx.get(normal_index + "ghost-env/").status_code == 200
    result = prime(
        cli_env,
        "env",
        "install",
        "alice/ghost-env",
        "--python",
        str(python),
        "--with",
        installer,
        token=tokens["alice"],
    )
    one_line_error(result, "not found", "nothing was installed")
    assert installed_version(python, "ghost-env") is None


def test_pip_installer_uses_normal_index_for_dependencies(
    tmp_path: Path, cli_env: dict[str, str], tokens: dict[str, str]
) -> None:
    push_new_env(cli_env, tmp_path / "src", "pip-env", tokens["alice"], deps=["tiny-dep"])
    python = fresh_venv(tmp_path / "venv", cli_env, with_pip=True, sees_suite=True)
    out = ok(
        prime(
            cli_env,
            "env",
            "install",
            "alice/pip-env",
            "--python",
            str(python),
            "--with",
            "pip",
            "--output",
            "json",
            token=tokens["alice"],
        )
    )
    assert json.loads(out)["installer"] == "pip"
    assert installed_version(python, "pip-env") == "0.1.0"
    assert installed_version(python, "tiny-dep") == "1.0"


# --------------------------------------------------------------------------- errors


def test_errors_are_one_clear_line(
    tmp_path: Path, hub: HubProcess, cli_env: dict[str, str], tokens: dict[str, str]
) -> None:
    root = make_env(cli_env, tmp_path / "src", "err-env", deps=[])
    python = fresh_venv(tmp_path / "venv", cli_env, sees_suite=True)

    bad = "phub_" + "x" * 43
    one_line_error(prime(cli_env, "whoami", token=bad), "not authenticated", "prime login")
    one_line_error(prime(cli_env, "env", "push", str(root), token=bad), "not authenticated")
    one_line_error(prime(cli_env, "env", "push", str(root)), "needs a token")

    dead = dict(cli_env, PRIME_HUB_URL=f"http://127.0.0.1:{free_port()}")
    one_line_error(prime(dead, "env", "list"), "cannot reach the hub", "PRIME_HUB_URL")
    one_line_error(
        prime(dead, "env", "install", "alice/err-env", "--python", str(python)),
        "cannot reach the hub",
    )
    one_line_error(
        prime(dead, "login", "--url", dead["PRIME_HUB_URL"], "--token", tokens["alice"]),
        "nothing saved",
    )

    one_line_error(prime(cli_env, "env", "info", "alice/no-such-env"), "not found")
    ok(prime(cli_env, "env", "push", str(root), token=tokens["alice"]))
    one_line_error(
        prime(cli_env, "env", "install", "alice/err-env@9.9", "--python", str(python)),
        "9.9",
        "0.1.0",
    )
    usage = prime(cli_env, "env", "install", "not-a-reference", "--python", str(python))
    assert (
        usage.returncode == 2 and "OWNER/NAME" in usage.stderr and "Traceback" not in usage.stderr
    )

    (root / "pyproject.toml").write_text("[project\n")
    one_line_error(
        prime(cli_env, "env", "push", str(root), token=tokens["alice"]), "not valid TOML"
    )


def test_login_saves_settings_used_by_later_commands(
    tmp_path: Path, hub: HubProcess, cli_env: dict[str, str], tokens: dict[str, str]
) -> None:
    env = {k: v for k, v in cli_env.items() if k != "PRIME_HUB_URL"}
    one_line_error(
        prime(env, "login", "--url", hub.url, "--token", "phub_" + "y" * 43), "nothing saved"
    )
    assert not (tmp_path / "home" / ".config" / "prime" / "config.toml").exists()
    ok(prime(env, "login", "--url", hub.url, "--token", tokens["bob"]))
    path = tmp_path / "home" / ".config" / "prime" / "config.toml"
    assert path.stat().st_mode & 0o777 == 0o600
    who = json.loads(ok(prime(env, "whoami", "--output", "json")))
    assert (who["username"], who["hub_url"]) == ("bob", hub.url)
    shutil.rmtree(tmp_path / "home" / ".config")


def test_push_to_an_organisation(
    tmp_path: Path, hub: HubProcess, cli_env: dict[str, str], tokens: dict[str, str]
) -> None:
    from hub_server.admin import create_org, open_database

    engine = open_database(hub.settings)
    try:
        create_org(engine, "acme", ["alice"])
    finally:
        engine.dispose()
    root = make_env(cli_env, tmp_path / "src", "org-env", deps=[])
    refused = prime(cli_env, "env", "push", str(root), "--owner", "acme", token=tokens["bob"])
    assert refused.returncode == 1 and "Traceback" not in refused.stderr
    # The owner may also come from the settings (PRIME_OWNER / `prime config set owner`).
    pushed = ok(
        prime(dict(cli_env, PRIME_OWNER="acme"), "env", "push", str(root), token=tokens["alice"])
    )
    assert "Pushed acme/org-env@0.1.0" in pushed
    info = json.loads(ok(prime(cli_env, "env", "info", "acme/org-env", "--output", "json")))
    assert info["environment"]["owner"]["name"] == "acme"
