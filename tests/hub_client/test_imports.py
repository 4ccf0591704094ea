"""The hub client is a library below the CLI: it imports neither `prime_cli` nor rich, at any
level (lazy imports included), so it prints nothing of its own."""

from __future__ import annotations

from pathlib import Path

from tests.support import imported_packages

ROOT = Path(__file__).resolve().parents[2]


def test_hub_client_imports_neither_the_cli_nor_rich() -> None:
    found = imported_packages(ROOT / "hub_client")
    assert "hub_client/client.py" in found
    offending = {path: names & {"prime_cli", "rich"} for path, names in found.items()}
    assert {path: names for path, names in offending.items() if names} == {}
