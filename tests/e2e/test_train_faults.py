"""Acceptance 5 and 6: SIGKILL and resume, a dead trainer, a crashing or hanging sampler."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from prime_env.clients.base import ChatResponse
from prime_env.evaluation import load_env
from prime_env.run_status import process_running
from tests.e2e.eval_support import PRIME, prime, prime_env
from tests.e2e.train_support import FAST, VOWELS_ENV, children_of_run, metrics, train_dirs
from tests.trainer_bridge.conftest import smollm2_tokenizer_dir, tiny_model_dir  # noqa: F401
from trainer_bridge import launch
from trainer_bridge.config_loader import build_config, parse_flags
from trainer_bridge.inference.torch_backend import TorchBackend
from trainer_bridge.protocol.run_dir import RunDir
from trainer_bridge.protocol.stable import stable_steps


def wait_for(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def start_training(tmp_path: Path, model: Path, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [str(PRIME), "train", str(VOWELS_ENV), "-m", str(model), "-o", str(tmp_path / "out"),
         "--orchestrator.eval.at-start", "false", "--orchestrator.eval.at-end", "false",
         *FAST, *extra],
        cwd=tmp_path, env=prime_env(), text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip


def adapter(run: Path, step: int) -> dict[str, Any]:
    from safetensors.torch import load_file

    (path,) = (run / "broadcasts" / f"step_{step}").glob("*.safetensors")
    return load_file(str(path))


def completions(run: Path, step: int) -> list[str]:
    lines = (run / "rollouts" / f"step_{step}.jsonl").read_text().splitlines()
    return [json.dumps(json.loads(line)["completion"]) for line in lines]


@pytest.mark.slow  # two 2-step runs side by side and a resume, ~1-2 min on 2 shared cores
def test_sigkill_then_resume_equals_an_uninterrupted_run(
    tmp_path: Path,
    tiny_model_dir: Path,  # noqa: F811
) -> None:
    """Acceptance 5: a run SIGKILLed right after its step-1 checkpoint (in step 1: no handler of
    ours runs) takes its trainer down with it, reads as interrupted, and resumes from that
    checkpoint, each step once. With --deterministic (A=0, per-rollout seeds) the resumed
    adapters (weights, AdamW moments, scheduler and RNG restored) are bit-identical to an
    uninterrupted run's. Both runs share the machine, so their timing differs throughout."""
    flags = ("--deterministic", "--orchestrator.max-async-level", "0",
             "--max-steps", "2", "--ckpt.interval", "1")  # fmt: skip
    whole_dir, killed_dir = tmp_path / "whole", tmp_path / "killed"
    whole_dir.mkdir()
    killed_dir.mkdir()
    whole = start_training(whole_dir, tiny_model_dir, *flags)
    killed = start_training(killed_dir, tiny_model_dir, *flags)
    try:
        wait_for(lambda: len(train_dirs(killed_dir / "out")) == 1, 120, "the run dir")
        run = train_dirs(killed_dir / "out")[0]
        stable = run / "checkpoints" / "step_1" / "STABLE"
        wait_for(stable.exists, 300, "the step-1 checkpoint")
        trainer = children_of_run(run)
        assert trainer, "the trainer child is running"
        killed.send_signal(signal.SIGKILL)  # sampling (or training) step 1
        killed.wait(10)
        killed_at = time.monotonic()
        assert len(metrics(run)) < 2, "the run finished before the kill"
        wait_for(
            lambda: not any(process_running(pid) for pid in trainer),
            10,
            "the trainer to die with its parent",
        )
        assert time.monotonic() - killed_at <= 10
        _, stderr = whole.communicate(timeout=300)
        assert whole.returncode == 0, stderr[-3000:]
    finally:
        for proc in (whole, killed):
            if proc.poll() is None:
                proc.kill()
    assert json.loads((run / "run.json").read_text())["status"] == "running"  # nothing wrote it
    assert RunDir(run).status() == "interrupted"  # what every reader says
    assert stable_steps(run / "checkpoints")[-1] == 1  # marked by the killed orchestrator
    result = prime("train", "resume", str(run), "--output", "json", cwd=killed_dir)
    assert result.returncode == 0, result.stderr[-3000:]
    # One line from "resuming" to "at step N", the run's directory in it: its path is over 80
    # characters, which rich folded onto the next lines where stderr is not a terminal.
    assert any(
        text.startswith("resuming ") and text.endswith(" at step 1") and run.name in text
        for text in result.stderr.splitlines()
    ), result.stderr[:3000]
    reference = train_dirs(whole_dir / "out")[0]
    assert [r["step"] for r in metrics(run)] == [0, 1]  # each step exactly once
    trainer_steps = [
        json.loads(x)["step"] for x in (run / "trainer_metrics.jsonl").read_text().splitlines()
    ]
    assert trainer_steps == [0, 1]
    assert json.loads((run / "run.json").read_text())["status"] == "completed"
    assert children_of_run(run) == []
    for step in range(2):  # the same samples, hence the same batches
        assert completions(run, step) == completions(reference, step), f"step {step}"
    for step in range(1, 3):
        got, want = adapter(run, step), adapter(reference, step)
        assert got.keys() == want.keys()
        unequal = [name for name in want if not bool((got[name] == want[name]).all())]
        assert unequal == [], f"step {step}: {len(unequal)} of {len(want)} tensors differ"


@pytest.mark.slow
def test_trainer_sigkill_stops_the_run_naming_it(
    tmp_path: Path,
    tiny_model_dir: Path,  # noqa: F811
) -> None:
    proc = start_training(tmp_path, tiny_model_dir, "--max-steps", "20")
    try:
        wait_for(lambda: len(train_dirs(tmp_path / "out")) == 1, 120, "the run dir")
        run = train_dirs(tmp_path / "out")[0]
        wait_for(lambda: len(metrics(run)) >= 1, 300, "a first step")
        (pid,) = children_of_run(run)
        os.kill(pid, signal.SIGKILL)
        # A hang guard, not a timing: the run must not wait out the step's sampling (600 s).
        _, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1
    assert "the trainer process died (killed by SIGKILL)" in stderr
    assert "resume with: prime train resume" in stderr
    assert json.loads((run / "run.json").read_text())["status"] == "failed"


class FlakySampler(TorchBackend):
    """The torch backend with an injected fault: after `ok_calls` good calls the sampler
    crashes (or hangs) and reports itself unhealthy until it is rebuilt."""

    def __init__(self, *args: Any, ok_calls: int, mode: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.calls = 0
        self.ok_calls = ok_calls
        self.mode = mode
        self.broken = False
        inner = self._client.chat

        async def chat(*a: Any, **k: Any) -> ChatResponse:
            self.calls += 1
            if self.calls > self.ok_calls:
                self.broken = True
                if self.mode == "hang":
                    import asyncio

                    await asyncio.sleep(3600)
                raise RuntimeError("injected sampler crash")
            return await inner(*a, **k)

        self._client.chat = chat  # type: ignore[method-assign]

    async def health(self) -> bool:
        return not self.broken and await super().health()


def run_with_faults(
    tmp_path: Path, model: Path, plan: list[int], mode: str, *flags: str
) -> tuple[int, Path, list[FlakySampler]]:
    """Train in this process with a sampler that fails after plan[i] calls in its i-th life."""
    _, overrides = parse_flags([*FAST, *flags, "--orchestrator.sampler-timeout-s", "3"])
    config = build_config(
        [],
        [*overrides, ("model.name", str(model)), ("output_dir", str(tmp_path / "out"))],
        env_id=str(VOWELS_ENV),
    )
    env = load_env(str(VOWELS_ENV), {})
    prepared = launch.start(config, env, str(VOWELS_ENV))
    built: list[FlakySampler] = []

    def factory(config: Any, children: Any, run: Any, say: Any = None) -> Any:
        async def make() -> FlakySampler:
            life = len(built)
            backend = FlakySampler(
                config.model, threads=1, ok_calls=plan[min(life, len(plan) - 1)], mode=mode
            )
            await backend.client().ensure_loaded()
            built.append(backend)
            return backend

        return make

    original = launch.make_backend_factory
    launch.make_backend_factory = factory  # type: ignore[assignment]
    try:
        code = launch.execute(prepared, env, Console(stderr=True))
    finally:
        launch.make_backend_factory = original  # type: ignore[assignment]
    return code, prepared.run.root, built


def sampler_errors(run: Path) -> int:
    count = 0
    for path in (run / "rollouts").glob("step_*.jsonl"):
        for line in path.read_text().splitlines():
            error = json.loads(line)["error"]
            count += bool(error and error["type"] == "sampler_error")
    return count


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["crash", "hang"])
def test_sampler_fault_is_recorded_and_the_sampler_rebuilt(
    tmp_path: Path,
    tiny_model_dir: Path,  # noqa: F811
    mode: str,
) -> None:
    code, run, built = run_with_faults(
        tmp_path, tiny_model_dir, [10, 10_000], mode, "--max-steps", "3"
    )
    assert code == 0
    assert len(built) == 2  # rebuilt once
    assert sampler_errors(run) >= 1
    rows = metrics(run)
    assert [r["step"] for r in rows] == [0, 1, 2]
    assert sum(r.get("errors/sampler_error", 0) for r in rows) == sampler_errors(run)
    assert rows[-1]["sampler/restarts"] == 1
    for step, row in enumerate(rows):  # error records never batched
        batch = (run / "batches" / f"step_{step}" / "samples.jsonl").read_text().splitlines()
        assert len(batch) == row["batch/rollouts"]
        assert all(json.loads(x)["reward"] is not None for x in batch)


@pytest.mark.slow
def test_three_sampler_failures_stop_the_run_resumably(
    tmp_path: Path,
    tiny_model_dir: Path,  # noqa: F811
) -> None:
    code, run, built = run_with_faults(
        tmp_path, tiny_model_dir, [10, 2, 2], "crash", "--max-steps", "10"
    )
    assert code == 1
    assert len(built) == 3
    info = json.loads((run / "run.json").read_text())
    assert info["status"] == "failed" and "the sampler failed 3 times" in info["error"]
    assert (run / "config" / "resolved.toml").is_file()  # `prime train resume` can continue it


@pytest.mark.slow  # a run cut short and its resume on the tiny model, ~1 min on 2 shared cores
def test_sigterm_while_generating_exits_at_once_interrupted_and_resumable(
    tmp_path: Path,
    tiny_model_dir: Path,  # noqa: F811
) -> None:
    """SIGTERM while the sampler is in the middle of a batch: the step-0 eval asks for two
    replies of up to 200 000 tokens at temperature 1, which the tiny model (EOS about 1 in
    49 152) runs to the limit: many minutes of one batch in the worker thread. Exiting within
    30 s is only possible if the generation stops between tokens; the code that let the
    batch finish took minutes. Then the run resumes (without that eval) and completes."""
    proc = start_training(
        tmp_path, tiny_model_dir, "--max-steps", "1",
        "--orchestrator.eval.at-start", "true", "--orchestrator.eval.temperature", "1",
        "--orchestrator.eval.max-tokens", "200000",
    )  # fmt: skip
    try:
        wait_for(lambda: len(train_dirs(tmp_path / "out")) == 1, 120, "the run dir")
        run = train_dirs(tmp_path / "out")[0]
        wait_for(lambda: (run / "evals" / "step_0" / "metadata.json").exists(), 120, "the eval")
        trainer = children_of_run(run)
        assert trainer, "the trainer child is running"
        time.sleep(2)  # the eval's batch is generating
        proc.send_signal(signal.SIGTERM)
        signalled_at = time.monotonic()
        _, stderr = proc.communicate(timeout=120)
        elapsed = time.monotonic() - signalled_at
    finally:
        if proc.poll() is None:
            proc.kill()
    assert elapsed < 30, f"{elapsed:.1f} s from SIGTERM to exit"
    assert proc.returncode == 128 + signal.SIGTERM, stderr[-3000:]
    assert "interrupted by SIGTERM" in stderr and "resume with: prime train resume" in stderr
    info = json.loads((run / "run.json").read_text())
    assert info["status"] == "interrupted" and info["owner"] is None
    # the eval it cut short says so, and is never pushed as a complete run
    step0 = json.loads((run / "evals" / "step_0" / "metadata.json").read_text())
    assert step0["status"] == "interrupted" and step0["owner"] is None
    assert not any(process_running(pid) for pid in trainer)
    assert children_of_run(run) == []
    result = prime(
        "train", "resume", str(run), "--no-eval", "--output", "json", cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert [r["step"] for r in metrics(run)] == [0]
    assert json.loads((run / "run.json").read_text())["status"] == "completed"
    print(f"exited {elapsed:.1f} s after SIGTERM")
