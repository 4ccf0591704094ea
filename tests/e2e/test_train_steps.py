"""`prime train` steps end to end on the tiny model: a step always ends (no update when every
group ties, then the run stops with the advice), progress and `prime train samples`, an
interrupted step's finished groups reused by the resume, and stages resumed inside a stage
and at a stage's first step."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import pytest

from tests.e2e.eval_support import PRIME, prime, prime_env
from tests.e2e.test_train_faults import wait_for
from tests.e2e.train_support import FAST, NO_EVAL, VOWELS_ENV, metrics, train_dirs
from tests.trainer_bridge.conftest import smollm2_tokenizer_dir, tiny_model_dir  # noqa: F401


def train(tmp_path: Path, model: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return prime(
        "train", str(VOWELS_ENV), "-m", str(model), "-o", str(tmp_path / "out"),
        "--output", "json", *FAST, *NO_EVAL, *extra, cwd=tmp_path,
    )  # fmt: skip


@pytest.mark.slow  # one short run of the tiny model: about 40 s on 2 busy cores
def test_steps_without_signal_end_then_the_run_stops_with_the_advice(
    tmp_path: Path,
    tiny_model_dir: Path,  # noqa: F811
) -> None:
    """Every reward weighted 0: every group ties. Each step ends after 2 groups with no
    update (the trainer still publishes the next policy), and 2 such steps stop the run."""
    result = train(
        tmp_path, tiny_model_dir, "--max-steps", "6", "--orchestrator.max-async-level", "0",
        "--orchestrator.reward.weights", "{vowels = 0.0}",
        "--orchestrator.max-groups-per-step", "2", "--orchestrator.max-empty-steps", "2",
    )  # fmt: skip
    assert result.returncode == 1, result.stderr[-3000:]
    assert "2 steps in a row had no update" in result.stderr
    assert "step 0: no update, all 2 groups had equal rewards" in result.stderr
    assert "Traceback" not in result.stderr
    (run,) = train_dirs(tmp_path / "out")
    info = json.loads((run / "run.json").read_text())
    assert info["status"] == "failed" and "no update" in info["error"]
    rows = metrics(run)
    assert [r["step"] for r in rows] == [0, 1]
    assert rows[0]["batch/skipped"] == 1 and rows[0]["batch/zero_advantage_share"] == 1.0
    assert rows[0]["trainer/skipped"] == 1.0  # the trainer made no update for step 0
    assert "stopped" in rows[1]
    assert (run / "broadcasts" / "step_1" / "STABLE").is_file()  # the same weights, published
    progress = json.loads((run / "progress.json").read_text())
    assert progress["step"] == 1 and progress["groups_done"] >= 1

    shown = prime("train", "samples", str(run), "--step", "0", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert "── train-" in shown.stdout and "not trained" in shown.stdout
    listed = prime("train", "samples", str(run), "--step", "0", "--output", "json", cwd=tmp_path)
    items = json.loads(listed.stdout)
    assert len(items) == len((run / "rollouts" / "step_0.jsonl").read_text().splitlines()) == 8
    assert all(i["advantage"] is None and i["error"] is None for i in items)
    missing = prime("train", "samples", str(run), "--step", "9", cwd=tmp_path)
    assert missing.returncode == 1 and "no rollouts for step 9" in missing.stderr
    assert "Traceback" not in missing.stderr


@pytest.mark.slow  # a run interrupted in step 1 and resumed: about a minute on busy cores
def test_an_interrupted_step_keeps_its_finished_groups_and_the_resume_uses_them(
    tmp_path: Path,
    tiny_model_dir: Path,  # noqa: F811
) -> None:
    """One group in flight at a time, each rollout scored in ~4 s: SIGTERM once step 1 has
    finished a group; the resume (from the step-1 checkpoint) batches that group again."""
    proc = subprocess.Popen(
        [str(PRIME), "train", str(VOWELS_ENV), "-m", str(tiny_model_dir), "-o",
         str(tmp_path / "out"), *FAST, *NO_EVAL, "--max-steps", "3",
         "--orchestrator.max-async-level", "0", "--orchestrator.max-inflight", "1",
         "--ckpt.interval", "1", "-a", '{"latency_median_s": 4.0, "latency_sigma": 0.01}'],
        cwd=tmp_path, env=prime_env(), text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        wait_for(lambda: len(train_dirs(tmp_path / "out")) == 1, 120, "the run dir")
        (run,) = train_dirs(tmp_path / "out")

        def one_group_of_step_1() -> bool:
            try:
                progress = json.loads((run / "progress.json").read_text())
            except (OSError, ValueError):
                return False
            return progress["step"] == 1 and progress["groups_done"] >= 1

        wait_for(one_group_of_step_1, 300, "a finished group of step 1")
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 143, err[-3000:]
    assert "kept 1 finished groups for the resume" in err
    (saved,) = [json.loads(line) for line in (run / "rollouts" / "unbatched.jsonl").open()]
    kept = {
        (r["task_id"], r["rollout_index"], r["completion"][0]["content"]) for r in saved["records"]
    }

    resumed = prime("train", "resume", str(run), "--output", "json", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "reusing 1 groups (4 rollouts) the run had sampled" in resumed.stderr
    rows = metrics(run)
    assert [r["step"] for r in rows] == [0, 1, 2]
    assert rows[1]["rollouts/reused"] == 4 and rows[2]["rollouts/reused"] == 0
    step_1 = [json.loads(line) for line in (run / "rollouts" / "step_1.jsonl").open()]
    again = {(r["task_id"], r["rollout_index"], r["completion"][0]["content"]) for r in step_1}
    assert kept <= again  # the very rollouts the interrupted run sampled
    assert not (run / "rollouts" / "unbatched.jsonl").exists()


@pytest.mark.slow  # three short runs of the tiny model: about 2 min on busy cores
def test_stages_run_in_order_and_resume_inside_a_stage_and_at_its_start(
    tmp_path: Path,
    tiny_model_dir: Path,  # noqa: F811
) -> None:
    """Stage `a` (2 steps, lr 1e-3) then `b` (lr 0: its steps change nothing, on other data).
    Stopped at the boundary (max_steps 2) and resumed, `b` starts with its own optimiser;
    resumed again inside `b`, its schedule continues."""
    stages = tmp_path / "stages.toml"
    stages.write_text(
        "[[stages]]\nname = 'a'\nmax_steps = 2\ntrainer.optim.lr = 1e-3\n"
        "[[stages]]\nname = 'b'\nmax_steps = 2\ntrainer.optim.lr = 0.0\n"
        "orchestrator.env.args = { num_tasks = 8 }\n"
    )
    first = train(
        tmp_path, tiny_model_dir, "-c", str(stages), "--max-steps", "2", "--ckpt.interval", "1"
    )
    assert first.returncode == 0, first.stderr[-3000:]
    (run,) = train_dirs(tmp_path / "out")
    info = json.loads((run / "run.json").read_text())
    assert [(s["name"], s["start"], s["end"]) for s in info["stages"]] == [("a", 0, 2)]
    for max_steps in ("3", "4"):
        more = prime("train", "resume", str(run), "--max-steps", max_steps, cwd=tmp_path)
        assert more.returncode == 0, more.stderr[-3000:]
    rows = metrics(run)
    assert [r["step"] for r in rows] == [0, 1, 2, 3]
    assert [r["stage/name"] for r in rows] == ["a", "a", "b", "b"]
    assert [r["trainer/lr"] for r in rows] == [1e-3, 1e-3, 0.0, 0.0]
    assert {
        r["task_id"].split("-")[1]
        for s in (2, 3)
        for r in map(json.loads, (run / "rollouts" / f"step_{s}.jsonl").open())
    } <= {str(i) for i in range(8)}
    from safetensors.torch import load_file

    def adapter(version: int) -> dict[str, object]:
        return load_file(str(run / "broadcasts" / f"step_{version}" / "adapter_model.safetensors"))

    a2, b4 = adapter(2), adapter(4)
    assert all(bool((a2[k] == b4[k]).all()) for k in a2)  # lr 0 in stage b: no change
    assert (run / "plots" / "train.png").stat().st_size > 0
