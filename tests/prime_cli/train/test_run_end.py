"""What `prime train` prints at and after the end of a run, on run directories written here (no
learning run): the held-out before/after, the best step, the SFT loss and where the policy is;
`prime train samples`' trained reward and its parts; `prime train --help` and `--help-all`;
the live line after the last batch (never a step N+1 of 0 groups); an SFT step's reward cell."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from rich.console import Console

from prime_cli.main import cli
from trainer_bridge.metrics import step_line
from trainer_bridge.orchestrator.progress import Progress
from trainer_bridge.outcome import outcome_lines, read_outcome
from trainer_bridge.protocol.run_dir import RunDir


def jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def finished_run(tmp_path: Path, *, sft: bool = False) -> RunDir:
    run = RunDir.new(tmp_path / "out", "prime/arithmetic", "local/smollm2-135m")
    run.update_run_json(
        status="completed", env="prime/arithmetic", model="local/smollm2-135m",
        correctness="correct",
    )  # fmt: skip
    jsonl(run.root / "evals.jsonl", [
        {"policy": 0, "eval/reward": 0.1, "eval/correct": 0.0},
        {"policy": 2, "eval/reward": 0.9, "eval/correct": 0.8},
        {"policy": 4, "eval/reward": 0.7, "eval/correct": 0.6},
    ])  # fmt: skip
    rows = [{"step": s, "reward/mean": None if sft else 0.5, "trainer/loss": 2.0 - s / 4}
            for s in range(4)]  # fmt: skip
    jsonl(run.metrics, rows)
    for step in range(5):
        (run.broadcast(step)).mkdir(parents=True)
        (run.broadcast(step) / "STABLE").touch()
    return run


def test_the_last_lines_say_before_after_the_best_step_and_where_the_policy_is(
    tmp_path: Path,
) -> None:
    run = finished_run(tmp_path)
    lines = outcome_lines(read_outcome(run.root), run.root)
    assert lines[0] == (
        "held-out: step 0: reward 0.100, correct 0.00 -> step 4: reward 0.700, correct 0.60"
    )
    assert lines[1] == "best held-out: step 2: reward 0.900, correct 0.80"
    assert f"policy (step 4): {run.broadcast(4)}" in lines
    assert any(f"prime train export {run.root} --step 4 -o DIR" in line for line in lines)
    assert any(
        "prime eval run prime/arithmetic -m local/smollm2-135m --adapter" in x for x in lines
    )
    assert not any(line.startswith("loss") for line in lines)  # GRPO steps have rewards


def test_sft_steps_show_their_loss_not_a_reward_of_none(tmp_path: Path) -> None:
    run = finished_run(tmp_path, sft=True)
    outcome = read_outcome(run.root)
    assert outcome.loss == (2.0, 1.25)
    assert "loss (steps without a reward, sft): 2 -> 1.25" in outcome_lines(outcome, run.root)
    line = step_line({"step": 1, "reward/mean": None, "trainer/loss": 1.75})
    assert "None" not in line and "1.75" in line


def test_a_run_without_evals_says_so(tmp_path: Path) -> None:
    run = finished_run(tmp_path)
    (run.root / "evals.jsonl").unlink()
    assert outcome_lines(read_outcome(run.root), run.root)[0].startswith("held-out: no evals ran")


def test_after_the_last_batch_the_live_line_is_no_stalled_step(tmp_path: Path) -> None:
    run = RunDir.new(tmp_path / "out", "e", "m")
    console = Console(record=True, width=200, force_terminal=False)
    progress = Progress(run, console)
    progress.start_step(2, "main", 8)
    progress.sampled_all(3)
    line = progress.current.line()
    assert line == "all 3 steps sampled; waiting for the trainer's last step and the final eval"
    assert json.loads(run.progress.read_text())["sampled_all"] is True


def rollout(task: str, index: int, rewards: dict[str, float]) -> dict[str, Any]:
    return {
        "run_id": "r", "env": "e", "task_id": task, "example_index": 0, "rollout_index": index,
        "model": "m", "prompt": [{"role": "user", "content": "q"}],
        "completion": [{"role": "assistant", "content": f"answer {index}"}],
        "reward": rewards["correct"], "rewards": {"correct": rewards["correct"]},
        "metrics": {"format": rewards["format"]},
    }  # fmt: skip


def test_samples_show_the_reward_trained_on_and_its_parts(tmp_path: Path) -> None:
    """The run re-weighted a zero-weight metric (`format`): a wrong answer in good format
    trained with reward 0.2, not the env's 0."""
    run = finished_run(tmp_path)
    jsonl(run.rollouts(0), [rollout("t1", 0, {"correct": 0.0, "format": 1.0}),
                            rollout("t1", 1, {"correct": 1.0, "format": 1.0})])  # fmt: skip
    jsonl(run.batch(0) / "samples.jsonl", [
        {"task_id": "t1", "rollout_index": 0, "advantage": -0.5, "reward": 0.2},
        {"task_id": "t1", "rollout_index": 1, "advantage": 0.5, "reward": 1.2},
    ])  # fmt: skip
    weights = {"correct": 1.0, "format": 0.2}
    (run.batch(0) / "meta.json").write_text(json.dumps({"stage": 0, "reward_weights": weights}))
    shown = CliRunner().invoke(cli, ["train", "samples", str(run.root), "--step", "0"])
    assert shown.exit_code == 0, shown.output
    assert (
        "#0   reward 0.2 (correct 1×0 + format 0.2×1) [env reward 0] wrong   adv -0.500"
        in shown.output
    )
    assert (
        "#1   reward 1.2 (correct 1×1 + format 0.2×1) [env reward 1] correct adv +0.500"
        in shown.output
    )
    listed = CliRunner().invoke(
        cli, ["train", "samples", str(run.root), "--step", "0", "--output", "json"]
    )
    first = json.loads(listed.output)[0]
    assert first["trained_reward"] == 0.2 and first["reward"] == 0.0
    assert first["reward_parts"] == {"correct": [1.0, 0.0], "format": [0.2, 1.0]}


def test_train_help_lists_the_training_options_and_help_all_every_key() -> None:
    shown = CliRunner().invoke(cli, ["train", "--help"])
    assert shown.exit_code == 0, shown.output
    for text in ("--max-steps", "--algo", "--orchestrator.batch-size", "--trainer.optim.lr",
                 "--help-all", "resume", "samples"):  # fmt: skip
        assert text in shown.output, text
    every = CliRunner().invoke(cli, ["train", "--help-all"])
    assert every.exit_code == 0, every.output
    assert "--orchestrator.advantage.std-norm  (bool, default False)" in every.output
    assert "--trainer.scheduler.type  (constant|linear|cosine, default constant)" in every.output
    run_help = CliRunner().invoke(cli, ["train", "prime/arithmetic", "--help"])
    assert run_help.exit_code == 0 and "--orchestrator.rollouts-per-example" in run_help.output


def test_the_live_step_line_takes_its_short_form_on_a_narrow_terminal() -> None:
    from trainer_bridge.orchestrator.progress import StepProgress

    cur = StepProgress(step=12, stage="grpo-main", groups_done=37, groups_zero_advantage=21,
                       usable_rollouts=48, batch_size=64, waiting="waiting for policy 13")  # fmt: skip
    assert len(cur.line()) > 100  # the full form, for logs
    short = cur.line(80)
    assert len(short) <= 80 and short.startswith("step 12: 37 groups (21 zero-adv), 48/64")
    assert cur.line(200) == cur.line()
