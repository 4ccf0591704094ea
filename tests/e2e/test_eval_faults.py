"""Acceptance: with 20% injected provider faults, every rollout is scored or recorded as an
error after its retries — never scored 0 because of a fault. Real HTTP, real `prime` process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from testing.server import FakeServer
from tests.e2e.eval_support import SAY_ENV, prime, records, run_dirs

FAULTS = {"429": 0.04, "500": 0.04, "drop": 0.04, "timeout": 0.04, "malformed": 0.04}
ERROR_TYPES = {"rate_limited", "server_error", "connection_error", "timeout", "malformed_response"}

pytestmark = pytest.mark.timeout(600)


@pytest.mark.parametrize(
    ("provider", "retries", "stream"),
    [
        ("openai", "1", "--no-stream"),  # few retries: some rollouts must end as errors
        ("openai", "6", "--stream"),  # enough retries: every rollout is scored
        ("anthropic", "1", "--no-stream"),
    ],
)
def test_faulty_provider_200_rollouts(
    tmp_path: Path, provider: str, retries: str, stream: str
) -> None:
    with FakeServer(provider, faults=FAULTS, seed=7) as server:
        server.configure(rates=FAULTS, seed=7, retry_after_s=0.05)
        endpoints = tmp_path / "endpoints.toml"
        endpoints.write_text(f'[fake]\nurl = "{server.url}"\nclient = "{provider}"\n')
        result = prime(
            "eval",
            "run",
            str(SAY_ENV),
            "-m",
            "fake",
            "--endpoints",
            str(endpoints),
            "-n",
            "100",
            "-r",
            "2",
            "-c",
            "32",
            "--timeout",
            "1",
            "--max-retries",
            retries,
            stream,
            "-o",
            str(tmp_path / "out"),
            "--output",
            "json",
            cwd=tmp_path,
        )
        injected = server.stats()["injected"]
    assert result.returncode == 0, result.stderr
    assert set(injected) == set(FAULTS)  # every fault type really happened
    (run_dir,) = run_dirs(tmp_path / "out")
    rows = records(run_dir)
    assert len(rows) == 200
    assert len({(r["example_index"], r["rollout_index"]) for r in rows}) == 200
    errors = [r for r in rows if r["error"] is not None]
    scored = [r for r in rows if r["error"] is None]
    for row in scored:
        assert row["reward"] == 1.0, row  # the fake always answers correctly when it answers
    for row in errors:
        assert row["reward"] is None and row["rewards"] == {} and row["stop_reason"] == "error"
        assert row["error"]["type"] in ERROR_TYPES
        assert "gave up after" in row["error"]["message"]
    if retries == "1":
        assert errors, "20% faults with one retry must leave some rollouts failed"
    else:
        assert not errors
    summary = json.loads(result.stdout)["runs"][0]["summary"]
    assert summary["errors"] == len(errors) and summary["scored"] == len(scored)
    assert summary["reward_mean"] == 1.0  # errors are excluded, not averaged as 0
