"""bench_hub_abuse runs end to end in its quick mode (so the script cannot rot) and the hub
holds: every refusal a 4xx, RSS growth and disk within their budgets (the script's exit
status). It never asserts how fast anything was."""

from __future__ import annotations

import pytest

from tests.scripts.quick import run_quick


@pytest.mark.slow
def test_bench_hub_abuse_quick() -> None:
    out = run_quick("bench_hub_abuse.py", "--quick", timeout=600)
    assert "every refusal a 4xx (no 5xx, no dropped answer): True" in out
    assert "RSS idle" in out and "load" in out and "targets met" in out
