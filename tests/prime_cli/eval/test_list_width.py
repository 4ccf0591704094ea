"""`prime eval list`'s tables fit the terminal: 32-character evaluation ids stay whole on one
line (one copies them), the least needed columns are left out first."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from prime_cli.eval.tables import fitted_table

COLUMNS = ["id", "environment", "model", "reward", "rollouts", "errors", "status", "verified",
           "created"]  # fmt: skip
ROWS = [
    [f"{i:032x}", "alice/wiki-search@0.3.1", "openai/gpt-4.1-mini", "0.412 ± 0.031", "100", "3",
     "completed", "verified", "2026-12-05 07:30"]
    for i in range(3)
]  # fmt: skip


@pytest.mark.parametrize("width", [80, 120, 200])
def test_ids_stay_whole_and_the_table_fits(width: int) -> None:
    table = fitted_table("evaluations", COLUMNS, ROWS, width, whole=("id", "reward"),
                         optional=("created", "rollouts", "verified", "status", "errors"))  # fmt: skip
    out = io.StringIO()
    Console(width=width, file=out, color_system=None).print(table)
    lines = out.getvalue().splitlines()
    assert all(len(line) <= width for line in lines), lines
    for row in ROWS:
        assert sum(row[0] in line for line in lines) == 1, lines  # whole, on one line
    assert sum("0.412 ± 0.031" in line for line in lines) == 3
    if width >= 200:
        assert any("2026-12-05 07:30" in line for line in lines)  # room for everything
    else:
        assert not any("2026-12-05" in line for line in lines)  # left out first
