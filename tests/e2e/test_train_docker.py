"""Acceptance 8: `prime train` on python-code with the Docker sandbox backend: every rollout
that submitted code ran in a labelled container, and none is left after the run."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from tests.e2e.eval_support import ROOT, prime
from tests.e2e.train_support import metrics
from tests.support import require

LABEL = "prime.sandbox"
CODE = re.compile(r"```(?:python|py)?[ \t]*\n(.*?)\n```", re.DOTALL)


def docker_ok() -> bool:
    try:
        return subprocess.run(["docker", "info"], capture_output=True, check=False).returncode == 0
    except OSError:
        return False


def submitted_code(record: dict[str, object]) -> bool:
    """python-code's own rule: a complete fenced block and an even number of fences."""
    completion = record["completion"]
    assert isinstance(completion, list)
    text = (completion[-1].get("content") or "") if completion else ""
    return bool(CODE.search(text)) and text.count("```") % 2 == 0


def labelled() -> list[str]:
    out = subprocess.run(
        ["docker", "ps", "-aq", "--filter", f"label={LABEL}"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    return out.split()


@pytest.mark.slow  # SmolLM2 writing code for 2 steps, each answer run in a container
@pytest.mark.docker
def test_python_code_trains_in_labelled_containers(tmp_path: Path) -> None:
    require(docker_ok(), "a Docker daemon")
    events = subprocess.Popen(
        ["docker", "events", "--filter", f"label={LABEL}", "--filter", "event=start",
         "--format", "{{.ID}}"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        result = prime(
            "train", str(ROOT / "builtin_envs" / "python-code"), "-m", "local/smollm2-135m",
            "-a", json.dumps({"backend": "docker", "num_eval_examples": 2}),
            "--max-steps", "2", "-o", str(tmp_path / "out"), "--output", "json",
            "--no-orchestrator.filter-zero-advantages",
            "--orchestrator.batch-size", "8", "--orchestrator.rollouts-per-example", "4",
            "--orchestrator.sampling.max-tokens", "160",
            "--orchestrator.eval.at-start", "false", "--orchestrator.eval.at-end", "false",
            cwd=tmp_path,
        )  # fmt: skip
    finally:
        events.terminate()
        started, _ = events.communicate(timeout=10)
    assert result.returncode == 0, result.stderr[-3000:]
    run = Path(json.loads(result.stdout)["run_dir"])
    assert [r["step"] for r in metrics(run)] == [0, 1]
    records = [
        json.loads(line)
        for path in sorted((run / "rollouts").glob("step_*.jsonl"))
        for line in path.read_text().splitlines()
    ]
    with_code = [r for r in records if r["error"] is None and submitted_code(r)]
    assert len(set(started.split())) >= len(with_code)  # one container per submitted answer
    assert labelled() == []  # none left after exit
    print(
        f"{len(records)} rollouts, {len(with_code)} with code, {len(set(started.split()))} containers"
    )
