"""`prime hub` lives in the CLI, above the hub: hub_server imports neither `prime_cli` nor
`builtin_envs` (only `prime_cli.hub` ties them together, loaded when `prime hub` runs)."""

from __future__ import annotations

from pathlib import Path

from tests.support import imported_packages

ROOT = Path(__file__).resolve().parents[2]


def test_hub_server_imports_neither_the_cli_nor_the_builtins() -> None:
    found = imported_packages(ROOT / "hub_server")
    assert found
    offending = {path: names & {"prime_cli", "builtin_envs"} for path, names in found.items()}
    assert {path: names for path, names in offending.items() if names} == {}


def test_prime_hub_is_the_clis_command() -> None:
    hub = imported_packages(ROOT / "prime_cli")["prime_cli/hub.py"]
    assert {"hub_server", "builtin_envs", "hub_client"} <= hub
