"""Output that reads well anywhere: piped to a file (no terminal, no COLUMNS), tables keep one
row a line and the progress display keeps every field, instead of rich's 80-column folding."""

from __future__ import annotations

import subprocess
from pathlib import Path

from testing.server import FakeServer
from tests.e2e.eval_support import PRIME, SAY_ENV, prime_env
from tests.hub_server.hubproc import start_hub
from tests.hub_server.wheels import twine_upload

SUMMARY = "An environment whose one-line description is longer than eighty columns on its own"


def _piped(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """`prime ARGS` with stdout and stderr going to pipes, as in a log or CI, and no COLUMNS."""
    run_env = {k: v for k, v in prime_env(HOME=str(cwd), **env).items() if k != "COLUMNS"}
    return subprocess.run(
        [str(PRIME), *args],
        cwd=cwd,
        env=run_env,
        text=True,
        capture_output=True,
        timeout=600,
        check=False,
    )


def test_env_list_in_a_pipe_is_one_row_a_line(tmp_path: Path) -> None:
    with start_hub(tmp_path / "hub") as hub:
        token = hub.add_user("alice")
        names = [f"wide-env-{i}" for i in range(3)]
        for name in names:
            twine_upload(hub.url, token, "alice", name, "0.1.0", summary=SUMMARY)
        listed = _piped("env", "list", cwd=tmp_path, PRIME_HUB_URL=hub.url)
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    for name in names:
        rows = [line for line in lines if f"alice/{name}" in line]
        assert len(rows) == 1 and SUMMARY in rows[0], listed.stdout
    assert "…" not in listed.stdout
    assert len(lines) < 12, listed.stdout  # title, rules, header, three rows: not a word a line


def test_eval_progress_and_table_in_a_pipe_keep_every_field(tmp_path: Path) -> None:
    with FakeServer("openai") as server:
        result = _piped(
            "eval", "run", str(SAY_ENV), "-m", "fake-model-with-a-long-name", "-b", server.url,
            "-n", "3", "-r", "2", "-o", str(tmp_path / "out"), cwd=tmp_path,
        )  # fmt: skip
    assert result.returncode == 0, result.stderr
    progress = [line for line in result.stderr.splitlines() if "rollouts/s" in line]
    assert len(progress) == 1, result.stderr
    assert "6/6" in progress[0] and "reward 1.000" in progress[0] and "tok/s" in progress[0]
    assert "eta 0:00:00" in progress[0] and "…" not in progress[0], progress[0]
    header = [line for line in result.stdout.splitlines() if "reward (mean ± se)" in line]
    row = [line for line in result.stdout.splitlines() if "fake-model-with-a-long-name" in line]
    # one row per model, every column on it (not the narrow, transposed form)
    assert len(header) == 1 and "tokens in/out" in header[0], result.stdout
    assert row and "1.000 ± 0.000" in row[0], result.stdout
