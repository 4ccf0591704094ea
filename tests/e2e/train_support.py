"""Helpers for the `prime train` end-to-end tests: the fast env, run dirs, live children."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.e2e.eval_support import ROOT
from tests.support import read_proc

VOWELS_ENV = ROOT / "tests" / "trainer_bridge" / "envs" / "vowels.py"
SANDBOXED_ENV = ROOT / "tests" / "trainer_bridge" / "envs" / "sandboxed_vowels.py"
"""vowels scored in a sandbox: every rollout reaches one, whatever the tiny model says."""

FAST = [
    "--orchestrator.batch-size",
    "8",
    "--orchestrator.rollouts-per-example",
    "4",
    "--orchestrator.sampling.max-tokens",
    "12",
    "--orchestrator.eval.num-examples",
    "2",
    "--orchestrator.eval.max-tokens",
    "8",
]
"""Small batches and short replies: a step of the tiny model takes seconds on one core."""

NO_EVAL = ["--orchestrator.eval.at-start", "false", "--orchestrator.eval.at-end", "false"]


def train_dirs(out: Path) -> list[Path]:
    return sorted(p.parent for p in out.glob("train/*/*/run.json"))


def metrics(run: Path) -> list[dict[str, Any]]:
    path = run / "metrics.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def two_token_exact_steps(out: Path) -> Path:
    """The one run under `out`, having trained two clean steps on token-exact samples."""
    [run] = train_dirs(out)
    steps = metrics(run)
    assert [m["step"] for m in steps] == [0, 1]
    for step in steps:
        assert step["batch/samples"] == 2 and step["errors/total"] == 0
        assert step["trainer/loss_tokens"] > 0
        if step["off_policy/max"] == 0:  # token-exact: sampled ids, not re-rendered (an
            assert step["trainer/mismatch_kl"] < 1e-4  # older policy's samples differ by more)
    assert steps[0]["off_policy/max"] == 0
    return run


def children_of_run(run: Path) -> list[int]:
    """Processes whose command line names this run dir (the trainer child)."""
    pids = []
    for pid, data in read_proc("cmdline"):
        cmdline = data.decode(errors="replace")
        if str(run) in cmdline and "trainer_bridge.trainer" in cmdline:
            pids.append(pid)
    return pids
