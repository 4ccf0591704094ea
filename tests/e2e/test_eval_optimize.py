"""`prime eval optimize ENV -m MODEL --reflection-model M`: GEPA-style prompt search with a
scripted reflection model raises the held-out mean of a prompt-sensitive environment, keeps to
its rollout budget, drops a proposal that does not beat its parent on the minibatch, and writes
the best prompt with a before/after summary."""

from __future__ import annotations

import json
from pathlib import Path

from testing.server import FakeServer
from tests.e2e.cli_support import one_line_error
from tests.e2e.eval_support import ROOT, prime

INSTRUCTION_ENV = ROOT / "testing" / "envs" / "instruction_env.py"
GOOD = "Repeat the word.\nsay:"


def test_optimize_raises_the_heldout_mean_within_its_budget(tmp_path: Path) -> None:
    with FakeServer("openai") as model, FakeServer("openai") as reflection:
        reflection.script_replies(["Here it is:\n```\nBe brief.\n```", f"```text\n{GOOD}\n```"])
        result = prime(
            "eval", "optimize", str(INSTRUCTION_ENV), "-m", "fake", "-b", model.url,
            "--reflection-model", "reflector", "--reflection-base-url", reflection.url,
            "--budget", "40", "--val-size", "6", "--test-size", "6", "--output", "json",
            "-o", str(tmp_path / "out"), cwd=tmp_path,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        model_calls = model.stats()["requests"]
        reflection_calls = reflection.stats()["requests"]
    out = json.loads(result.stdout)
    before, after = out["heldout"]["before"], out["heldout"]["after"]
    assert before["reward_mean"] == 0.0 and after["reward_mean"] == 1.0
    assert before["scored"] == after["scored"] == 6
    assert out["best_prompt"] == GOOD and out["seed_prompt"] == "Answer the question."
    assert out["rollouts_used"] <= 40
    assert model_calls == out["rollouts_used"] + 12  # the search, then two held-out runs
    assert reflection_calls == 2  # asked only when a minibatch had failures
    directory = Path(out["directory"])
    assert (directory / "best_prompt.txt").read_text() == GOOD + "\n"
    candidates = [json.loads(line) for line in (directory / "candidates.jsonl").open()]
    assert [(c["kept"], c["prompt"]) for c in candidates] == [
        (True, "Answer the question."),
        (True, GOOD),
        (False, "Be brief."),
    ]
    assert candidates[1]["parent"] == 0 and candidates[1]["val_mean"] == 1.0
    heldout = [json.loads(line) for line in (directory / "heldout_after.jsonl").open()]
    assert {r["reward"] for r in heldout} == {1.0}
    assert "candidate 1 (from 0): minibatch 0 -> 3; validation 1.000" in result.stderr


def test_a_budget_too_small_is_refused(tmp_path: Path) -> None:
    result = prime(
        "eval", "optimize", str(INSTRUCTION_ENV), "-m", "fake", "-b", "http://127.0.0.1:9/v1",
        "--reflection-model", "r", "--reflection-base-url", "http://127.0.0.1:9/v1",
        "--budget", "3", "--val-size", "6", cwd=tmp_path,
    )  # fmt: skip
    one_line_error(result, "--budget 3 cannot score even the starting prompt")


def test_the_reference_policy_is_refused(tmp_path: Path) -> None:
    dead = "http://127.0.0.1:9/v1"
    roles = [
        ["-m", "reference", "--reflection-model", "r", "--reflection-base-url", dead],
        ["-m", "fake", "-b", dead, "--reflection-model", "reference"],
    ]
    for role in roles:
        result = prime("eval", "optimize", str(INSTRUCTION_ENV), *role, "-o", "out", cwd=tmp_path)
        one_line_error(result, "-m reference plays the environment's own policy")
    assert not (tmp_path / "out").exists()


def test_the_reflection_model_defaults_to_the_optimised_one(tmp_path: Path) -> None:
    """No --reflection-model: the run's own model reflects, said on stderr."""
    with FakeServer("openai") as model:
        model.script_replies([f"```text\n{GOOD}\n```"] * 50)
        result = prime(
            "eval", "optimize", str(INSTRUCTION_ENV), "-m", "fake", "-b", model.url,
            "--budget", "20", "--val-size", "3", "--test-size", "3", "--output", "json",
            "-o", str(tmp_path / "out"), cwd=tmp_path,
        )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "reflecting with fake, the model optimised" in result.stderr
    assert json.loads(result.stdout)["rollouts_used"] <= 20
