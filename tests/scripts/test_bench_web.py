"""bench_web runs end to end in its quick mode, so the script cannot rot.

Not a timed test: it asserts that the script finishes and prints each page's ratio to the
hub's JSON read and the load, never how fast a page was.
"""

from __future__ import annotations

import re

import pytest

from tests.scripts.quick import run_quick


@pytest.mark.slow
def test_bench_web_quick() -> None:
    out = run_quick("bench_web.py", "--quick", timeout=600)
    for kind in ("home page", "search", "environment page", "samples page, reward filter"):
        assert re.search(rf"\| {kind} \| [\d.]+ ms \| [\d.]+ ms \| [\d.]+ \|", out), out
    assert re.search(r"load average [\d.]+ at the start", out), out
