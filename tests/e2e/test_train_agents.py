"""`prime train` for a step on CPU (a tiny random-init model with SmolLM2's tokenizer, the
torch backend) on the agent harnesses: an MCP-tool environment, the three unchanged agent
programs in sandboxes through the interception server, and the twenty-questions built-in
with its scripted user. What the trainer read holds the sampled ids exactly: Σ mask = Σ
sampled tokens, the subagent's rollout is two samples (one per branch), and no token of a
simulated user's turn is trained."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.eval_support import ROOT, prime
from tests.e2e.train_support import FAST, NO_EVAL, metrics
from tests.trainer_bridge.conftest import smollm2_tokenizer_dir, tiny_model_dir  # noqa: F401

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("train_agents")]
AGENT_ENV = ROOT / "tests" / "prime_env" / "agents" / "agent_env.py"
MCP_ENV = ROOT / "testing" / "envs" / "mcp_env.py"
TWENTY_QUESTIONS = ROOT / "builtin_envs" / "twenty-questions"
ALL_GROUPS = ["--orchestrator.filter-zero-advantages", "false"]
"""A random-init model rarely scores: train on every group, advantage 0 or not."""


def train(env: Path, tmp_path: Path, model: Path, args: dict[str, Any]) -> Path:
    out = tmp_path / "out"
    result = prime(
        "train",
        str(env),
        "-m",
        str(model),
        "--max-steps",
        "1",
        "-o",
        str(out),
        "-a",
        json.dumps(args),
        "--output",
        "json",
        *FAST,
        *NO_EVAL,
        *ALL_GROUPS,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    run = Path(json.loads(result.stdout)["run_dir"])
    rows = metrics(run)
    assert [r["step"] for r in rows] == [0]
    for row in rows:
        assert row["errors/total"] == 0 and isinstance(row["trainer/loss"], float)
    return run


def step0(run: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    samples = [json.loads(x) for x in (run / "batches" / "step_0" / "samples.jsonl").open()]
    records = [json.loads(x) for x in (run / "rollouts" / "step_0.jsonl").open()]
    return samples, records


def sampled_ids(sample: dict[str, Any]) -> list[int]:
    return [i for i, m in zip(sample["input_ids"], sample["loss_mask"]) if m]


def by_rollout(samples: list[dict[str, Any]]) -> dict[tuple[str, str, int], list[dict[str, Any]]]:
    grouped: dict[tuple[str, str, int], list[dict[str, Any]]] = defaultdict(list)
    for sample in samples:
        grouped[(sample["group"], sample["task_id"], sample["rollout_index"])].append(sample)
    return grouped


def check_masks(samples: list[dict[str, Any]], records: list[dict[str, Any]]) -> None:
    """Every trained token was sampled, every sampled token of a trained rollout is trained."""
    records_of = {(r["task_id"], r["rollout_index"]): r for r in records}
    for (_, task, index), own in by_rollout(samples).items():
        record = records_of[(task, index)]
        completions = sorted(i for t in record["turns"] for i in t["completion_token_ids"])
        assert sorted(i for s in own for i in sampled_ids(s)) == completions


def test_train_an_mcp_tool_environment(tmp_path: Path, tiny_model_dir: Path) -> None:  # noqa: F811
    run = train(MCP_ENV, tmp_path, tiny_model_dir, {"num_tasks": 8})
    samples, records = step0(run)
    check_masks(samples, records)
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    prompt = tokenizer.decode(records[0]["turns"][0]["prompt_token_ids"])
    assert '"name": "divide"' in prompt  # the MCP server's tools reached the model


@pytest.mark.parametrize("agent", ["responses", "anthropic"])
def test_train_an_unchanged_agent_program(
    tmp_path: Path,
    tiny_model_dir: Path,  # noqa: F811
    agent: str,
) -> None:
    run = train(AGENT_ENV, tmp_path, tiny_model_dir, {"agent": agent})
    samples, records = step0(run)
    check_masks(samples, records)
    assert all(r["trace"] and r["trace"]["calls"] for r in records)


def test_train_the_subagent_program_one_sample_per_branch(
    tmp_path: Path,
    tiny_model_dir: Path,  # noqa: F811
) -> None:
    """The main agent's two calls are one branch (the second prompt is the first call's ids
    bridged, never re-tokenised), the subagent's call another: 2 samples per rollout, whose
    masks are exactly the branch's sampled tokens."""
    run = train(AGENT_ENV, tmp_path, tiny_model_dir, {"agent": "subagent"})
    samples, records = step0(run)
    records_of = {(r["task_id"], r["rollout_index"]): r for r in records}
    grouped = by_rollout(samples)
    assert grouped
    for (_, task, index), own in grouped.items():
        record = records_of[(task, index)]
        assert [c["parent"] for c in record["trace"]["calls"]] == [None, None, 0]
        main1, sub, main2 = record["turns"]
        assert (
            main2["prompt_token_ids"][: len(main1["prompt_token_ids"])]
            == (main1["prompt_token_ids"])
        )
        assert len(own) == 2
        branches = sorted(sampled_ids(s) for s in own)
        expected = sorted(
            [
                sub["completion_token_ids"],
                main1["completion_token_ids"] + main2["completion_token_ids"],
            ]
        )
        assert branches == expected


def test_train_twenty_questions_masks_the_simulated_user(
    tmp_path: Path,
    tiny_model_dir: Path,  # noqa: F811
) -> None:
    run = train(TWENTY_QUESTIONS, tmp_path, tiny_model_dir, {"max_questions": 3})
    samples, records = step0(run)
    check_masks(samples, records)
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    for record in records:
        messages = record["prompt"] + record["completion"]
        last_reply = record["trace"]["calls"][-1]["reply"]
        said = [messages[i]["content"] for i in record["trace"]["simulated"] if i < last_reply]
        assert said, "the user answered before the model's last turn"
        for sample in samples:
            if (sample["task_id"], sample["rollout_index"]) != (
                record["task_id"],
                record["rollout_index"],
            ):
                continue
            trained = tokenizer.decode(sampled_ids(sample))
            unmasked = tokenizer.decode(sample["input_ids"])
            for text in said:
                assert text in unmasked and text not in trained
