"""`prime train --algo sft|rft|opd` end to end on CPU: two steps each with the tiny model on the
vowels env, through the real CLI, trainer child and torch backend. `sft` trains on an eval
run's rollouts (sampled from the fake OpenAI server), `rft` and `opd` on a teacher that is a
policy directory (the tiny model itself: at step 0 it is the student, so opd's advantages are
0 up to float error); refusals exit 2 before any model loads."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from testing.server import FakeServer
from tests.e2e.eval_support import prime, run_dirs
from tests.e2e.train_support import FAST, NO_EVAL, VOWELS_ENV, metrics
from tests.trainer_bridge.conftest import smollm2_tokenizer_dir, tiny_model_dir  # noqa: F401


def train(tmp_path: Path, model: Path, *args: str) -> tuple[Path, list[dict[str, Any]]]:
    out = tmp_path / "out"
    result = prime(
        "train", str(VOWELS_ENV), "-m", str(model), "--max-steps", "2", "-o", str(out),
        "--output", "json", *FAST, *NO_EVAL, *args, cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    out = json.loads(result.stdout)
    run = Path(out["run_dir"])
    # what the run came to: the policy's step, and an SFT run's loss (its steps have no reward)
    assert out["outcome"]["policy_step"] == 2
    assert (out["outcome"]["sft_loss"] is not None) == (args[:2] == ("--algo", "sft"))
    return run, [json.loads(x) for x in (run / "trainer_metrics.jsonl").open()]


def batch(run: Path, step: int) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (run / "batches" / f"step_{step}" / "samples.jsonl").open()]


def eval_run(tmp_path: Path) -> Path:
    with FakeServer("openai") as server:
        result = prime(
            "eval", "run", str(VOWELS_ENV), "-m", "fake", "--base-url", server.url,
            "-n", "4", "-r", "2", "-o", str(tmp_path / "evals-out"), cwd=tmp_path,
        )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    (run_dir,) = run_dirs(tmp_path / "evals-out")
    return run_dir


@pytest.mark.slow  # ~90 s on 2 shared cores
def test_sft_trains_on_an_eval_runs_rollouts(tmp_path: Path, tiny_model_dir: Path) -> None:  # noqa: F811
    run, trained = train(
        tmp_path, tiny_model_dir, "--algo", "sft", "--data", str(eval_run(tmp_path))
    )
    assert [m["step"] for m in trained] == [0, 1]
    for row in trained:
        assert row["ce_tokens"] > 0 and row["loss_tokens"] == 0  # the ce part only
        assert row["ce_loss"] > 0 and row["grad_norm"] > 0
    samples = batch(run, 0)
    assert len(samples) == 8 and all(s["ce_weights"] for s in samples)
    assert all(s["ce_weights"] == [float(m) for m in s["loss_mask"]] for s in samples)
    data = json.loads((run / "run.json").read_text())
    assert data["status"] == "completed"
    resolved = (run / "config" / "resolved.toml").read_text()
    assert 'type = "sft"' in resolved and "/data/sft-" in resolved  # the run's own copy


@pytest.mark.slow
def test_rft_trains_on_the_teachers_best_rollout_per_task(
    tmp_path: Path,
    tiny_model_dir: Path,  # noqa: F811
) -> None:
    run, trained = train(
        tmp_path, tiny_model_dir, "--algo", "rft", "--teacher", str(tiny_model_dir),
        "--orchestrator.algo.min-reward", "0.0",
    )  # fmt: skip
    assert [m["step"] for m in trained] == [0, 1] and all(m["ce_tokens"] > 0 for m in trained)
    samples = batch(run, 0)
    records = [json.loads(x) for x in (run / "rollouts" / "step_0.jsonl").open()]
    assert {r["model"] for r in records} == {str(tiny_model_dir)}  # the teacher sampled
    by_task: dict[str, list[float]] = {}
    for r in records:
        by_task.setdefault(r["task_id"], []).append(r["reward"])
    for s in samples:  # one per group: its task's best reward
        assert s["reward"] == max(by_task[s["task_id"]])
    assert len({s["group"] for s in samples}) == len(samples)


@pytest.mark.slow
def test_opd_advantages_are_teacher_minus_student_per_token(
    tmp_path: Path,
    tiny_model_dir: Path,  # noqa: F811
) -> None:
    run, trained = train(
        tmp_path, tiny_model_dir, "--algo", "opd", "--teacher", str(tiny_model_dir)
    )
    assert [m["step"] for m in trained] == [0, 1] and all(m["loss_tokens"] > 0 for m in trained)
    samples = batch(run, 0)
    assert samples and all(s["advantages"] is not None for s in samples)
    for s in samples:
        sampled = [a for a, m in zip(s["advantages"], s["loss_mask"]) if m]
        assert all(abs(a) < 1e-3 for a in sampled)  # step 0: the teacher is the student
        assert all(a == 0.0 for a, m in zip(s["advantages"], s["loss_mask"]) if not m)
    assert metrics(run)[0]["batch/rollouts"] >= 8


def test_algo_refusals_exit_2_before_any_model_loads(tmp_path: Path) -> None:
    cases = [
        (["--algo", "sft"], "set exactly one of algo.data"),
        (["--algo", "sft", "--data", str(tmp_path / "nope")], "--data (a JSONL file, a run"),
        (["--algo", "opd", "--teacher", "reference"], "has no distribution over tokens"),
        (["--algo", "opd", "--teacher", "openai/gpt-4.1-mini"], "is a hosted chat API"),
        (["--algo", "ppo"], "'ppo' is not an algorithm"),
    ]
    for args, message in cases:
        result = prime("train", str(VOWELS_ENV), "-o", str(tmp_path / "out"), *args, cwd=tmp_path)
        assert result.returncode == 2, (args, result.stderr)
        assert message in result.stderr, (args, result.stderr)
        assert "Traceback" not in result.stderr
    assert not (tmp_path / "out").exists()


def test_an_export_file_is_the_sft_data_as_it_is(tmp_path: Path) -> None:
    data = tmp_path / "sft.jsonl"
    exported = prime("eval", "export", str(eval_run(tmp_path)), "-o", str(data), cwd=tmp_path)
    assert exported.returncode == 0, exported.stderr
    result = prime(
        "train", str(VOWELS_ENV), "--algo", "sft", "--data", str(data), "--dry-run",
        "-o", str(tmp_path / "out"), cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert f'data = "{data.resolve()}"' in result.stdout
