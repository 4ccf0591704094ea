"""vLLM (the engine `prime engine install vllm` installs) serving training and evals for real,
on CPU: one server for the whole module (a start costs 1-3 minutes on two cores), started as
`prime eval run --backend vllm` starts one (tests/e2e/vllm_host.py) and used by the runs as
an `external` server (the same backend as `--backend vllm`, which only adds the start).

In order: two training steps of prime/arithmetic's recipe hot-load policy LoRAs that pass the
fp32 probe (at 1e-3: vLLM's CPU kernels sum in another order than torch); the engine's greedy
answers agree with the torch engine's; a multi-turn game continues every turn token for token; SIGKILL of the process holding the server leaves no
vLLM process (its engine and worker processes included).
"""

from __future__ import annotations

import json
import os
import re
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from prime_env.run_status import process_running
from tests.e2e.eval_support import ROOT, prime, prime_env
from tests.e2e.train_support import NO_EVAL, metrics, train_dirs
from tests.support import require, vllm_installed

MODEL = "local/smollm2-135m"
ARITHMETIC = ROOT / "builtin_envs" / "arithmetic"
TWENTY_QUESTIONS = ROOT / "builtin_envs" / "twenty-questions"


@dataclass
class Host:
    proc: subprocess.Popen[str]
    url: str
    log: Path
    server_pid: int


@pytest.fixture(scope="module")
def vllm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Host]:
    require(vllm_installed(), "the vLLM engine (prime engine install vllm)")
    errors = tmp_path_factory.mktemp("vllm") / "host.err"
    with errors.open("w") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.e2e.vllm_host", MODEL, "16"],
            cwd=ROOT,
            env=prime_env(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
        )
    assert proc.stdout is not None and proc.stdin is not None
    try:
        ready, _, _ = select.select([proc.stdout], [], [], 1200)
        line = proc.stdout.readline() if ready else ""
        if not line:
            pytest.fail(f"the vLLM server did not start:\n{errors.read_text()[-3000:]}")
        info = json.loads(line)
        yield Host(proc, info["url"], Path(info["log"]), int(info["pid"]))
    finally:
        if proc.poll() is None:
            proc.stdin.close()  # the host stops its server on the way out
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()


def loaded_adapters(log: Path) -> list[str]:
    return re.findall(r"Loaded new LoRA adapter: name '([^']+)'", log.read_text(errors="replace"))


@pytest.mark.slow  # two trainer steps of the recipe (32 rollouts each) beside the server
def test_training_hot_loads_each_policy_and_the_probe_holds(vllm: Host, tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = prime(
        "train", str(ARITHMETIC), "--backend", "external", "--inference.urls",
        json.dumps([vllm.url]), "--max-steps", "2", "-o", str(out), "--output", "json",
        "--orchestrator.probe-tolerance", "1e-3", *NO_EVAL, cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    (run,) = train_dirs(out)
    assert (run / "checkpoints" / "step_2" / "STABLE").is_file()
    run_id = json.loads((run / "run.json").read_text())["run_id"]
    names = loaded_adapters(vllm.log)
    assert f"{run_id}-policy-1" in names and f"{run_id}-policy-2" in names, names
    rows = metrics(run)
    assert [r["step"] for r in rows] == [0, 1]
    records = [
        json.loads(line)
        for path in sorted((run / "rollouts").glob("step_*.jsonl"))
        for line in path.read_text().splitlines()
    ]
    assert records and all(r["error"] is None for r in records)
    for record in records:
        (turn,) = record["turns"]
        assert len(turn["completion_token_ids"]) == len(turn["completion_logprobs"]) > 0
    assert {r["policy_version"] for r in records} <= {0, 1}


async def _answers(client: object, prompts: list[list[dict[str, str]]]) -> list[str]:
    import asyncio

    from prime_env.clients.base import SamplingArgs

    greedy = SamplingArgs(max_tokens=64, temperature=0.0)
    replies = await asyncio.gather(*(client.chat(p, sampling=greedy) for p in prompts))  # type: ignore[attr-defined]
    return [str(r.message["content"]) for r in replies]


@pytest.mark.slow  # 20 greedy answers from each engine
def test_greedy_answers_agree_with_the_torch_engine(vllm: Host) -> None:
    import asyncio

    from engines.vllm_client import TokenWire
    from local_model.client import LocalClient
    from local_model.models import load_tokenizer
    from prime_env.evaluation import load_env

    env = load_env(str(ARITHMETIC), {"num_eval_examples": 20})
    prompts = [env.harness.build_prompt(task) for task in list(env.get_eval_tasks())[:20]]
    torch_client = LocalClient("smollm2-135m")
    wire = TokenWire(vllm.url, load_tokenizer(MODEL))

    class Wire:
        async def chat(self, messages: list[dict[str, str]], *, sampling: object) -> object:
            ids = wire.render(messages, None)  # type: ignore[arg-type]
            return await wire.complete(MODEL, ids, None, sampling)  # type: ignore[arg-type]

    async def both() -> tuple[list[str], list[str]]:
        try:
            return await _answers(Wire(), prompts), await _answers(torch_client, prompts)
        finally:
            await wire.aclose()
            await torch_client.aclose()

    served, local = asyncio.run(both())
    same = sum(a == b for a, b in zip(served, local))
    assert same >= 19, list(zip(served, local))


@pytest.mark.slow  # one step of 4 games of up to 4 questions
def test_multi_turn_games_continue_token_for_token(vllm: Host, tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = prime(
        "train", str(TWENTY_QUESTIONS), "--backend", "external", "--inference.urls",
        json.dumps([vllm.url]), "--max-steps", "1", "-o", str(out), "--output", "json",
        "-a", json.dumps({"max_questions": 4, "num_eval_examples": 2}),
        "--orchestrator.batch-size", "4", "--orchestrator.rollouts-per-example", "2",
        *NO_EVAL, cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    (run,) = train_dirs(out)
    records = [
        json.loads(line)
        for path in sorted((run / "rollouts").glob("step_*.jsonl"))
        for line in path.read_text().splitlines()
    ]
    multi = [r for r in records if r["error"] is None and len(r["turns"]) > 1]
    assert multi, "no game lasted two turns"
    for record in multi:
        for before, after in zip(record["turns"], record["turns"][1:]):
            head = before["prompt_token_ids"] + before["completion_token_ids"]
            assert after["prompt_token_ids"][: len(head)] == head


def _descendants(pid: int) -> list[int]:
    found, frontier = [], [pid]
    while frontier:
        parent = frontier.pop()
        for task in Path(f"/proc/{parent}/task").glob("*/children"):
            for child in task.read_text().split():
                found.append(int(child))
                frontier.append(int(child))
    return found


def test_sigkill_of_the_holder_leaves_no_vllm_process(vllm: Host) -> None:
    """Last in the module: it ends the module's server."""
    tree = [vllm.server_pid, *_descendants(vllm.server_pid)]
    assert len(tree) >= 3, tree  # the API server, its engine core, the engine's worker
    os.kill(vllm.proc.pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and any(process_running(pid) for pid in tree):
        time.sleep(0.5)
    assert not [pid for pid in tree if process_running(pid)]
