"""The stock `prime` client's habits work against our hub: its flags, its JSON shapes, its
scripts (`prime env list -n 5 --output json | jq .total`), plus the commands users expect
(`logout`, `env status`, `env uninstall`) and the checks `push` makes before building.

A real hub (`prime hub serve`, SQLite + local blobs) on loopback; `prime` runs as a subprocess.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

from tests.e2e.cli_support import (
    PRIME,
    cli_env,
    fresh_venv,
    installed,
    ok,
    one_line_error,
    prime,
    write_env,
)
from tests.hub_server.hubproc import HubProcess
from tests.support import require

pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="module")
def alice(hub: HubProcess) -> str:
    return hub.add_user("alice")


@pytest.fixture
def env(tmp_path: Path, hub: HubProcess) -> dict[str, str]:
    return cli_env(tmp_path / "home", hub.url)


def _version(root: Path) -> str:
    return str(tomllib.loads((root / "pyproject.toml").read_text())["project"]["version"])


def _hub_versions(env: dict[str, str], slug: str) -> list[str]:
    out = json.loads(ok(prime(env, "env", "versions", slug, "--output", "json")))
    return [item["semantic_version"] for item in out["versions"]]


@pytest.mark.slow  # several builds and installs: about a minute on 2 busy cores
def test_push_with_stock_flags(
    tmp_path: Path, env: dict[str, str], alice: str, hub: HubProcess
) -> None:
    root = write_env(tmp_path, "stock-push")
    pushed = json.loads(
        ok(prime(env, "env", "push", "-p", str(root), "-n", "stock-push", "-o", "alice",
                 "-v", "PRIVATE", "--output", "json", token=alice))
    )  # fmt: skip
    assert pushed["environment"] == "alice/stock-push" and pushed["version"] == "0.1.0"
    assert pushed["url"] == f"{hub.url}/alice/stock-push"  # the web page of what was published
    human = prime(env, "env", "push", "--path", str(root), "--auto-bump", token=alice)
    assert f"web     {hub.url}/alice/stock-push" in ok(human)
    assert _version(root) == "0.1.1"
    ok(prime(env, "env", "push", str(root), "--post", token=alice))
    assert _version(root) == "0.1.1.post0"
    ok(prime(env, "env", "push", str(root), "--rc", token=alice))
    assert _version(root) == "0.1.2rc0"
    assert _hub_versions(env | {"PRIME_API_KEY": alice}, "alice/stock-push") == [
        "0.1.2rc0", "0.1.1.post0", "0.1.1", "0.1.0",
    ]  # fmt: skip

    # a bump whose push is refused (0.1.0 → 0.1.1, which exists) is undone
    pyproject = root / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace('"0.1.2rc0"', '"0.1.0"'))
    refused = prime(env, "env", "push", str(root), "--auto-bump", token=alice)
    one_line_error(refused, "nothing to push", "0.1.1")  # exactly what 0.1.1 holds
    assert _version(root) == "0.1.0" and "keeps its previous version" in refused.stderr
    pyproject.write_text(pyproject.read_text().replace('"0.1.0"', '"0.1.2rc0"'))

    # --dry-run builds and validates, bumps nothing and sends nothing
    (root / "stock_push" / "__init__.py").write_text(
        (root / "stock_push" / "__init__.py").read_text() + "\n# changed\n"
    )
    dry = prime(env, "env", "push", str(root), "--auto-bump", "--dry-run", token=alice)
    assert "Dry run: alice/stock-push@0.1.2 is ready" in ok(dry)
    assert "would bump 0.1.2rc0 → 0.1.2" in dry.stderr
    assert _version(root) == "0.1.2rc0"
    assert len(_hub_versions(env | {"PRIME_API_KEY": alice}, "alice/stock-push")) == 4

    one_line_error(
        prime(env, "env", "push", str(root), "-n", "other-name", token=alice), "[project] name"
    )
    one_line_error(
        prime(env, "env", "push", str(root), "--rc", "--post", token=alice), "exclude each other"
    )


@pytest.mark.slow  # several builds and installs: about a minute on 2 busy cores
def test_list_flags_and_json_shape(tmp_path: Path, env: dict[str, str], alice: str) -> None:
    require(shutil.which("jq") is not None, "jq (scripts/system_deps.sh)")
    for name in ("list-a", "list-b", "list-c"):
        ok(prime(env, "env", "push", str(write_env(tmp_path, name)), token=alice))

    # the stock client's own script, unchanged
    path = f"{PRIME.parent}:{env.get('PATH', '')}"
    total = subprocess.run(
        "set -o pipefail; prime env list -n 5 --output json | jq .total",
        shell=True, env=env | {"PATH": path}, capture_output=True, text=True, check=True,
        executable="/bin/bash",
    ).stdout.strip()  # fmt: skip
    listing = json.loads(ok(prime(env, "env", "list", "-n", "5", "--output", "json")))
    assert total.isdigit() and int(total) == listing["total"] >= 3
    item = listing["environments"][0]
    for field in ("environment", "description", "visibility", "version", "stars", "updated_at"):
        assert field in item, item
    assert item["visibility"] in ("PUBLIC", "PRIVATE") and "/" in item["environment"]
    assert (listing["limit"], listing["offset"]) == (5, 0)

    def names(*args: str) -> list[str]:
        out = json.loads(ok(prime(env, "env", "list", *args, "--output", "json", token=alice)))
        return [row["environment"] for row in out["environments"]]

    assert names("-s", "list-", "--sort", "name", "--order", "asc") == [
        "alice/list-a", "alice/list-b", "alice/list-c",
    ]  # fmt: skip
    assert names("-s", "list-", "--sort", "name", "-n", "1", "-p", "2") == ["alice/list-b"]
    assert names("-s", "list-", "--sort", "name", "--num", "1", "--offset", "2") == ["alice/list-c"]
    assert "alice/list-a" in names(
        "-t", "cli-test", "--owner", "alice", "--mine", "--visibility", "PUBLIC"
    )
    assert names("-s", "list-", "--sort", "stars", "-n", "100")  # accepted: sorted by downloads
    one_line_error(prime(env, "env", "list", "--starred"), "no stars")


@pytest.mark.slow  # several builds and installs: about a minute on 2 busy cores
def test_info_pull_status_install_uninstall(
    tmp_path: Path, env: dict[str, str], alice: str
) -> None:
    root = write_env(tmp_path, "roundtrip-env")
    ok(prime(env, "env", "push", str(root), token=alice))
    ok(prime(env, "env", "push", str(root), "--auto-bump", token=alice))

    info = json.loads(
        ok(prime(env, "env", "info", "alice/roundtrip-env", "-v", "0.1.0", "--output", "json"))
    )
    assert info["version"]["semantic_version"] == "0.1.0"
    target = tmp_path / "pulled"
    ok(prime(env, "env", "pull", "alice/roundtrip-env", "-t", str(target), "-v", "0.1.0"))
    assert 'version = "0.1.0"' in (target / "pyproject.toml").read_text()

    status = json.loads(ok(prime(env, "env", "status", "alice/roundtrip-env", "--output", "json")))
    assert status["latest_version"]["semantic_version"] == "0.1.1"
    assert status["visibility"] == "PUBLIC" and status["name"] == "roundtrip-env"

    python = fresh_venv(tmp_path / "venv", env)
    ok(prime(env, "env", "install", "alice/roundtrip-env@0.1.0", "--python", str(python),
             "--prerelease"))  # fmt: skip
    assert installed(python, "roundtrip-env") == "0.1.0"
    kept = json.loads(
        ok(prime(env, "env", "install", "alice/roundtrip-env", "--no-upgrade",
                 "--python", str(python), "--output", "json"))
    )  # fmt: skip
    assert kept == {"installed": [], "skipped": ["alice/roundtrip-env"], "installer": "uv"}
    assert installed(python, "roundtrip-env") == "0.1.0"

    listed = json.loads(
        ok(prime(env, "env", "status", "--python", str(python), "--output", "json"))
    )
    assert listed["environments"] == [
        {"package": "roundtrip-env", "version": "0.1.0", "environments": ["roundtrip-env"],
         "source": "hub alice"},
    ]  # fmt: skip
    ok(
        prime(
            env, "env", "uninstall", "alice/roundtrip-env", "--python", str(python), "--with", "uv"
        )
    )
    assert installed(python, "roundtrip-env") is None
    one_line_error(
        prime(env, "env", "uninstall", "roundtrip-env", "--python", str(python)),
        "not installed here",
    )


def test_push_refuses_before_building(
    tmp_path: Path, env: dict[str, str], alice: str, hub: HubProcess
) -> None:
    empty = write_env(tmp_path, "no-factory", factory=False)
    refused = prime(env, "env", "push", str(empty), token=alice)
    one_line_error(refused, "does not define load_environment", "entry-points")
    assert "Building" not in refused.stderr
    one_line_error(prime(env, "env", "info", "alice/no-factory"), "not found")  # nothing created

    root = write_env(tmp_path, "scoped-env")
    narrow = hub.token_for("alice", ["upload:alice/some-other-env"])
    refused = prime(env, "env", "push", str(root), token=narrow)
    one_line_error(refused, "may not publish alice/scoped-env", "upload:alice")
    assert "Building" not in refused.stderr
    refused = prime(env, "env", "push", str(root), "-o", "admin", token=alice)
    one_line_error(refused, "cannot publish to 'admin'")
    assert "Building" not in refused.stderr


def test_login_logout_and_stock_base_url(env: dict[str, str], alice: str, hub: HubProcess) -> None:
    bare = {k: v for k, v in env.items() if k != "PRIME_HUB_URL"}
    ok(prime(bare, "login", "--url", hub.url, "--token", alice))
    assert "alice" in ok(prime(bare, "whoami"))
    assert "Logged out" in ok(prime(bare, "logout"))
    one_line_error(prime(bare, "whoami"), "not logged in")
    # the stock client's variable, with or without /api/v1
    stock = bare | {"PRIME_BASE_URL": f"{hub.url}/api/v1"}
    shown = json.loads(ok(prime(stock, "config", "show", "--output", "json")))
    assert shown["settings"]["hub_url"] == {"value": hub.url, "source": "env PRIME_BASE_URL"}
    assert json.loads(ok(prime(stock, "env", "list", "--output", "json")))["total"] >= 0
