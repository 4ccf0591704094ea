"""What a finished (or stopped) training run came to, read back from its run directory.

`prime train` ends with these lines, so a run's stdout says what it achieved without opening a
file: the held-out evals before and after (reward, and the env's correctness metric when it has
one), the best evaluated step, the loss of the steps without a reward (SFT), and where the
policy is with the commands that use it. `--output json` carries the same fields.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from registry_index.files import read_jsonl
from trainer_bridge.protocol.run_dir import RunDir
from trainer_bridge.protocol.stable import stable_steps


@dataclass
class HeldOut:
    """One held-out eval: the policy version, its mean reward and correct share (or None)."""

    step: int
    reward: float | None
    correct: float | None

    def score(self) -> float:
        """What "best" ranks by: the correct share when the env has one, else the reward."""
        value = self.correct if self.correct is not None else self.reward
        return float("-inf") if value is None else value


@dataclass
class Outcome:
    evals: list[HeldOut] = field(default_factory=list)
    correctness: str | None = None
    loss: tuple[float, float] | None = None
    """First and last `trainer/loss` of the steps that had no reward (SFT), when any."""
    policy_step: int | None = None
    policy_dir: Path | None = None
    env: str | None = None
    model: str | None = None

    @property
    def best(self) -> HeldOut | None:
        """The best-scoring eval, the latest of equals (it has trained the most)."""
        return max(reversed(self.evals), key=HeldOut.score) if self.evals else None

    def as_json(self) -> dict[str, Any]:
        best = self.best
        return {
            "held_out": [vars(e) for e in self.evals],
            "correctness": self.correctness,
            "best_step": best.step if best else None,
            "sft_loss": list(self.loss) if self.loss else None,
            "policy_step": self.policy_step,
            "policy_dir": str(self.policy_dir) if self.policy_dir else None,
        }


def read_outcome(root: Path) -> Outcome:
    run = RunDir(root)
    info = run.read_run_json()
    correctness = info.get("correctness")
    evals = []
    for row in read_jsonl(root / "evals.jsonl"):
        correct = row.get(f"eval/{correctness}") if correctness else None
        evals.append(HeldOut(int(row["policy"]), row.get("eval/reward"), correct))
    by_step = {e.step: e for e in evals}  # a resumed run may have evaluated a step twice
    losses = [
        float(row["trainer/loss"])
        for row in read_jsonl(run.metrics)
        if row.get("reward/mean") is None and isinstance(row.get("trainer/loss"), (int, float))
    ]
    steps = stable_steps(root / "broadcasts")
    last = steps[-1] if steps else None
    return Outcome(
        evals=[by_step[s] for s in sorted(by_step)],
        correctness=correctness,
        loss=(losses[0], losses[-1]) if losses else None,
        policy_step=last,
        policy_dir=run.broadcast(last) if last is not None else None,
        env=info.get("env"),
        model=info.get("model"),
    )


def _held_out(e: HeldOut, correctness: str | None) -> str:
    reward = "-" if e.reward is None else f"{e.reward:.3f}"
    text = f"reward {reward}"
    if correctness and e.correct is not None:
        text += f", {correctness} {e.correct:.2f}"
    return f"step {e.step}: {text}"


def outcome_lines(outcome: Outcome, run_root: Path) -> list[str]:
    """The lines `prime train` ends with (before `completed: DIR`)."""
    lines: list[str] = []
    evals = outcome.evals
    if len(evals) >= 2:
        first, last = evals[0], evals[-1]
        lines.append(
            f"held-out: {_held_out(first, outcome.correctness)} -> "
            f"{_held_out(last, outcome.correctness)}"
        )
    elif evals:
        lines.append(f"held-out: {_held_out(evals[0], outcome.correctness)}")
    else:
        lines.append("held-out: no evals ran (orchestrator.eval.at_start / at_end were off)")
    best = outcome.best
    if best is not None and len(evals) >= 2:
        lines.append(f"best held-out: {_held_out(best, outcome.correctness)}")
    if outcome.loss is not None:
        lines.append(f"loss (steps without a reward, sft): {outcome.loss[0]:.4g} -> "
                     f"{outcome.loss[1]:.4g}")  # fmt: skip
    if outcome.policy_dir is not None:
        lines.append(f"policy (step {outcome.policy_step}): {outcome.policy_dir}")
        export = f"prime train export {run_root} --step {outcome.policy_step} -o DIR"
        lines.append(f"  export it: {export}")
        if outcome.env and outcome.model:
            lines.append(
                f"  evaluate it: prime eval run {outcome.env} -m {outcome.model} --adapter DIR"
            )
    return lines
