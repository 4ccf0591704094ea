"""Acceptance 8: `prime train` on python-code with the Docker sandbox backend: every rollout
that submitted code ran in a labelled container; none is left after the run, nor after a
SIGKILL and the next start; an unreachable daemon gives error records, not zeros.

Only the first test needs SmolLM2 writing code; the fault tests use sandboxed_vowels (every
rollout of the tiny model scored in a sandbox), which makes reaching a sandbox certain and
cheap instead of waiting minutes for SmolLM2's first code block."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.eval_support import PRIME, ROOT, prime, prime_env
from tests.e2e.train_support import FAST, NO_EVAL, SANDBOXED_ENV, VOWELS_ENV, metrics, train_dirs
from tests.support import require
from tests.trainer_bridge.conftest import smollm2_tokenizer_dir, tiny_model_dir  # noqa: F401

pytestmark = pytest.mark.xdist_group("docker")  # starts Docker sandboxes (tests/conftest.py)

LABEL = "prime.sandbox"
OWNER = "prime.sandbox.owner"
PYTHON_CODE = [
    "train", str(ROOT / "builtin_envs" / "python-code"), "-m", "local/smollm2-135m",
    "-a", json.dumps({"backend": "docker", "num_eval_examples": 2}),
    "--no-orchestrator.filter-zero-advantages",
    "--orchestrator.batch-size", "6", "--orchestrator.rollouts-per-example", "2",
    "--orchestrator.sampling.max-tokens", "160", "--orchestrator.sampling.temperature", "0.3",
    "--orchestrator.eval.at-start", "false", "--orchestrator.eval.at-end", "false",
]  # fmt: skip
"""SmolLM2 on python-code, one step of 3 groups of 2. At T=1 about a third of its answers hold
a complete code block (11 of 32 in an eval), so a run could hold none and prove nothing; at
T=0.3 three quarters do (24 of 32 in an eval; 5 and 6 of 8 in two runs of 2 steps of 4): none
of 6 has odds of ~1 in 4,000. The test asserts that code was submitted before it counts the
containers that ran it.
(--deterministic would pin the rollouts, but each group then decodes alone and A=0 samples
one batch at a time: 73 orchestrator CPU-s against 27.)"""
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


@pytest.mark.slow  # SmolLM2 writing code for a step, each answer run in a container
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
            *PYTHON_CODE, "--max-steps", "1", "-o", str(tmp_path / "out"), "--output", "json",
            cwd=tmp_path,
        )  # fmt: skip
    finally:
        events.terminate()
        started, _ = events.communicate(timeout=10)
    assert result.returncode == 0, result.stderr[-3000:]
    run = Path(json.loads(result.stdout)["run_dir"])
    assert [r["step"] for r in metrics(run)] == [0]
    records = [
        json.loads(line)
        for path in sorted((run / "rollouts").glob("step_*.jsonl"))
        for line in path.read_text().splitlines()
    ]
    with_code = [r for r in records if r["error"] is None and submitted_code(r)]
    assert with_code, "no rollout submitted code: nothing reached a sandbox"
    assert len(set(started.split())) >= len(with_code)  # one container per submitted answer
    assert labelled() == []  # none left after exit
    print(
        f"{len(records)} rollouts, {len(with_code)} with code, {len(set(started.split()))} containers"
    )


def records_of(run: Path) -> list[dict[str, Any]]:
    return [
        json.loads(line)
        for path in sorted((run / "rollouts").glob("step_*.jsonl"))
        for line in path.read_text().splitlines()
    ]


def owned_by(pid: int) -> list[str]:
    """Sandbox containers (any state) whose owner label names process `pid`."""
    out = subprocess.run(
        ["docker", "ps", "-a", "--filter", f"label={LABEL}",
         "--format", f'{{{{.ID}}}} {{{{.State}}}} {{{{.Label "{OWNER}"}}}}'],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    rows = [line.split() for line in out.splitlines() if line.strip()]
    return [f"{row[0]} {row[1]}" for row in rows if row[-1].split(":")[0] == str(pid)]


@pytest.mark.slow  # two short tiny-model runs, containers started for each rollout
@pytest.mark.docker
def test_sigkill_with_live_containers_then_the_next_start_leaves_none(
    tmp_path: Path,
    tiny_model_dir: Path,  # noqa: F811
) -> None:
    require(docker_ok(), "a Docker daemon")
    proc = subprocess.Popen(
        [str(PRIME), "train", str(SANDBOXED_ENV), "-m", str(tiny_model_dir),
         "-a", json.dumps({"hold_s": 60}), "--max-steps", "3", "-o", str(tmp_path / "out"),
         *FAST, *NO_EVAL],
        cwd=tmp_path, env=prime_env(), text=True,
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    live: list[str] = []
    try:
        deadline = time.monotonic() + 240
        while not live and proc.poll() is None and time.monotonic() < deadline:
            live = [c for c in owned_by(proc.pid) if c.endswith("running")]
            time.sleep(0.1)
        assert live, "the run never had a sandbox container running"
        proc.send_signal(signal.SIGKILL)  # no handler of ours runs: the containers stay behind
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
        assert proc.stderr is not None
        proc.stderr.close()
    left_at_kill = owned_by(proc.pid)
    # The next start: a short run of another env, which starts no sandbox of its own.
    result = prime(
        "train", str(VOWELS_ENV), "-m", str(tiny_model_dir), "--max-steps", "1",
        "-o", str(tmp_path / "next"), "--output", "json", *FAST, *NO_EVAL, cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert owned_by(proc.pid) == []
    print(f"{len(live)} running at the kill; {len(left_at_kill)} left then: {left_at_kill}")


@pytest.mark.slow  # a tiny-model run that stops at its first group
@pytest.mark.docker
def test_unreachable_daemon_gives_error_records_and_stops_the_run(
    tmp_path: Path,
    tiny_model_dir: Path,  # noqa: F811
) -> None:
    """DOCKER_HOST at a dead socket (the shared daemon keeps running): each rollout (each
    reaches the sandbox) becomes a `sandbox_unavailable` record (never a 0), none is batched,
    metrics count them, and the run stops saying why instead of training on nothing."""
    dead = prime_env(DOCKER_HOST=f"unix://{tmp_path}/no-docker.sock")
    result = prime(
        "train", str(SANDBOXED_ENV), "-m", str(tiny_model_dir), "--max-steps", "3",
        "-o", str(tmp_path / "out"), "--output", "json", *FAST, *NO_EVAL, cwd=tmp_path, env=dead,
    )  # fmt: skip
    assert result.returncode == 1, result.stderr[-3000:]
    assert "stopped:" in result.stderr and "sandbox_unavailable" in result.stderr
    assert "cannot reach the Docker daemon" in result.stderr
    (run,) = train_dirs(tmp_path / "out")
    info = json.loads((run / "run.json").read_text())
    assert info["status"] == "failed" and "sandbox_unavailable" in info["error"]
    records = records_of(run)
    assert records, "no rollout was recorded"
    assert all(r["error"] is not None for r in records), "a rollout scored without its sandbox"
    assert {r["error"]["type"] for r in records} == {"sandbox_unavailable"}
    assert all(r["reward"] is None for r in records)  # an error, never a score of 0
    rows = metrics(run)
    assert sum(r.get("errors/sandbox_unavailable", 0) for r in rows) == len(records)
    assert rows and "sandbox_unavailable" in rows[-1]["stopped"]
    for batch in (run / "batches").glob("step_*/samples.jsonl"):  # none batched
        assert all(json.loads(x)["reward"] is not None for x in batch.read_text().splitlines())
    assert not any("trainer/loss" in r for r in rows)
    print(f"{len(records)} rollouts, all sandbox_unavailable")
