"""`prime train resume` of a finished run: a bare resume says at once that there is nothing to
do; `--max-steps N` past a cosine that has decayed to 0 is refused with the choices, and
`--schedule constant` trains the added steps as a new stage at the configured lr."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.e2e.eval_support import prime
from tests.e2e.train_support import FAST, NO_EVAL, VOWELS_ENV, metrics, train_dirs
from tests.trainer_bridge.conftest import smollm2_tokenizer_dir, tiny_model_dir  # noqa: F401


def _resume(run: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return prime("train", "resume", str(run), *extra, cwd=run.parent)


@pytest.mark.slow  # a 2-step run and a 1-step resume of the tiny model: about a minute
def test_a_finished_run_is_extended_only_with_a_schedule_choice(
    tmp_path: Path,
    tiny_model_dir: Path,  # noqa: F811
) -> None:
    first = prime(
        "train", str(VOWELS_ENV), "-m", str(tiny_model_dir), "-o", str(tmp_path / "out"),
        *FAST, *NO_EVAL, "--max-steps", "2", "--trainer.scheduler.type", "cosine",
        "--trainer.optim.lr", "0.001", cwd=tmp_path,
    )  # fmt: skip
    assert first.returncode == 0, first.stderr[-3000:]
    (run,) = train_dirs(tmp_path / "out")
    trainer_log = (run / "logs" / "trainer.log").read_text()
    resolved = (run / "config" / "resolved.toml").read_text()

    bare = _resume(run)
    assert bare.returncode == 0, bare.stderr
    assert "finished: it trained all 2 of its steps; nothing to resume" in bare.stderr
    assert f"prime train resume {run} --max-steps 4" in bare.stderr
    assert (run / "logs" / "trainer.log").read_text() == trainer_log  # no trainer started

    refused = _resume(run, "--max-steps", "3")
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert "cosine learning-rate schedule ends at lr 0 at step 2" in refused.stderr
    for choice in ("--schedule extend", "--schedule restart", "--schedule constant"):
        assert choice in refused.stderr
    assert (run / "config" / "resolved.toml").read_text() == resolved

    extended = _resume(run, "--max-steps", "3", "--schedule", "constant", "--output", "json")
    assert extended.returncode == 0, extended.stderr[-3000:]
    assert json.loads(extended.stdout)["status"] == "completed"
    rows = {row["step"]: row for row in metrics(run)}
    assert rows[1]["trainer/lr"] == pytest.approx(0.0005)  # cosine over 2 steps: 1e-3, 5e-4
    assert rows[2]["trainer/lr"] == pytest.approx(0.001)  # the added stage: constant 1e-3
    info = json.loads((run / "run.json").read_text())
    assert [(s["name"], s["start"], s["end"]) for s in info["stages"]] == [
        ("main", 0, 2),
        ("constant_2", 2, 3),
    ]

    again = _resume(run)  # the checkpoints before the added stage are still this run's
    assert again.returncode == 0 and "trained all 3 of its steps" in again.stderr
