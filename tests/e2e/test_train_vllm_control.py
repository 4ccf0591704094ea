"""Acceptance 9 (and the probe half of 6): the vLLM backend's control plane on CPU, against two
fake vLLM servers speaking its LoRA routes, with the real CLI and trainer child."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.e2e.eval_support import prime
from tests.e2e.train_support import FAST, VOWELS_ENV, metrics
from tests.trainer_bridge.conftest import smollm2_tokenizer_dir, tiny_model_dir  # noqa: F401
from tests.trainer_bridge.fake_vllm import FakeVLLM


def run_against(
    tmp_path: Path, model: Path, servers: list[FakeVLLM], steps: int, *extra: str
) -> tuple[int, str, Path]:
    out = tmp_path / "out"
    run = out / "train" / f"vowels--{model.name}" / "fixed"
    for server in servers:
        server.base_probe = run / "broadcasts" / "step_0"
        server.start()
    try:
        result = prime(
            "train",
            str(VOWELS_ENV),
            "-m",
            str(model),
            "--max-steps",
            str(steps),
            "-o",
            str(out),
            "--run-name",
            "fixed",
            "--backend",
            "external",
            "--inference.urls",
            json.dumps([s.url for s in servers]),
            "--orchestrator.eval.at-start",
            "false",
            "--orchestrator.eval.at-end",
            "false",
            *FAST,
            *extra,
            cwd=tmp_path,
        )
    finally:
        for server in servers:
            server.stop()
    return result.returncode, result.stderr, run


@pytest.mark.slow  # ~60-90 s: 4 trainer steps of the tiny model on 2 shared cores
def test_two_servers_pinned_loaded_everywhere_never_unloaded_in_use(
    tmp_path: Path,
    tiny_model_dir: Path,  # noqa: F811
) -> None:
    servers = [FakeVLLM(str(tiny_model_dir), delay_s=0.3) for _ in range(2)]
    code, stderr, run = run_against(tmp_path, tiny_model_dir, servers, 4)
    assert code == 0, stderr[-3000:]
    assert [r["step"] for r in metrics(run)] == [0, 1, 2, 3]
    chats = [(i, e) for i, s in enumerate(servers) for e in s.log if e["route"] == "chat"]
    assert {i for i, _ in chats} == {0, 1}  # both servers sampled
    # pinned: every group's session talked to exactly one server
    by_session: dict[str, set[int]] = {}
    for i, entry in chats:
        by_session.setdefault(entry["user"], set()).add(i)
    assert by_session and all(len(v) == 1 for v in by_session.values())
    # each policy loaded on both servers before any request used it
    for version in range(1, 5):
        name = f"policy-{version}"  # each prefixed with the run's id on shared servers
        loads = [
            e["t"]
            for s in servers
            for e in s.log
            if e["route"] == "load" and e["name"].endswith(f"-{name}")
        ]
        used = [e["t"] for _, e in chats if e["model"].endswith(f"-{name}")]
        assert len(loads) == 2, name
        assert not used or min(used) > max(loads), name
    # names never reused; old ones unloaded, never while a request used them
    for server in servers:
        names = [e["name"] for e in server.log if e["route"] == "load"]
        assert len(names) == len(set(names))
        assert server.violations == []
        assert any(e["route"] == "unload" for e in server.log)


@pytest.mark.slow
def test_refused_load_stops_the_run(tmp_path: Path, tiny_model_dir: Path) -> None:  # noqa: F811
    servers = [FakeVLLM(str(tiny_model_dir)), FakeVLLM(str(tiny_model_dir), refuse={"policy-2"})]
    code, stderr, run = run_against(tmp_path, tiny_model_dir, servers, 4)
    assert code == 1
    assert "refused policy 2" in stderr and re.search(r"refused to load \S+-policy-2", stderr)
    assert not any(str(e.get("model")).endswith("-policy-2") for s in servers for e in s.log)
    assert json.loads((run / "run.json").read_text())["status"] == "failed"


@pytest.mark.slow
def test_a_server_ignoring_loads_is_caught_by_the_probe(
    tmp_path: Path,
    tiny_model_dir: Path,  # noqa: F811
) -> None:
    servers = [FakeVLLM(str(tiny_model_dir)), FakeVLLM(str(tiny_model_dir), ignore_loads=True)]
    # a large lr so that one step visibly moves the probe's logprobs
    code, stderr, run = run_against(
        tmp_path, tiny_model_dir, servers, 3, "--trainer.optim.lr", "0.05"
    )
    assert code == 1, stderr[-2000:]
    assert "probe of policy 1 failed" in stderr
    # nothing was sampled with policy 1, so no batch holds a rollout of a policy never checked
    assert not any(
        str(e.get("model")).endswith("-policy-1")
        for s in servers
        for e in s.log
        if e["route"] == "chat"
    )
    for batch in (run / "batches").glob("step_*/samples.jsonl"):
        assert all(json.loads(line)["policy_version"] == 0 for line in batch.open())
