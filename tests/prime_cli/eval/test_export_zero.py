"""`prime eval export` leaves rollouts scored 0 out by default; --keep-zero-reward keeps them."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from prime_cli.main import cli
from prime_env.eval_run_dir import EvalRunDir
from prime_env.record import RolloutRecord


def record(task: int, reward: float) -> RolloutRecord:
    return RolloutRecord(
        run_id="r1", env="t/env@1", task_id=f"t{task}", example_index=task, rollout_index=0,
        model="m", prompt=[{"role": "user", "content": f"q{task}"}],
        completion=[{"role": "assistant", "content": f"a{task}"}], reward=reward,
    )  # fmt: skip


def test_rollouts_scored_zero_are_not_exported_unless_kept(tmp_path: Path) -> None:
    run = EvalRunDir.new(tmp_path, "t/env@1", "m", "r1")
    rows = [record(0, 0.0), record(1, 1.0), record(2, 0.0)]
    run.results_path.write_text("".join(r.to_json() + "\n" for r in rows))
    run.update_metadata(run_id="r1", model="m", status="completed")
    out = tmp_path / "sft.jsonl"
    default = CliRunner().invoke(
        cli, ["eval", "export", str(run.root), "-o", str(out), "--output", "json"]
    )
    assert default.exit_code == 0, default.output
    assert json.loads(default.output)["zero_reward"] == 2
    assert len(out.read_text().splitlines()) == 1
    every = CliRunner().invoke(
        cli, ["eval", "export", str(run.root), "-o", str(out), "--keep-zero-reward"]
    )
    assert every.exit_code == 0, every.output
    assert len(out.read_text().splitlines()) == 3
