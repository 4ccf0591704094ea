"""Acceptance 7: `prime hub serve` + `prime hub seed`, then `prime train prime/arithmetic@V`
in a fresh venv installs the environment with `prime env install`'s code and trains; an
unknown name exits 2 before anything loads."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from prime_env.uv_binary import find_uv
from tests.e2e.cli_support import fresh_venv, venv_cli
from tests.e2e.eval_support import ROOT, prime_env
from tests.e2e.train_support import FAST, metrics
from tests.hub_server.hubproc import HubProcess, start_hub
from tests.trainer_bridge.conftest import smollm2_tokenizer_dir, tiny_model_dir  # noqa: F401

pytestmark = pytest.mark.timeout(1500)


@pytest.fixture(scope="module")
def seeded_hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HubProcess]:
    with start_hub(tmp_path_factory.mktemp("hub")) as hub:
        seeded = subprocess.run(
            [str(Path(__import__("sys").executable).with_name("prime")), "hub", "seed",
             "--url", hub.url, "--data-dir", str(hub.data_dir)],
            env=hub.env, text=True, capture_output=True, timeout=900, check=False,
        )  # fmt: skip
        assert seeded.returncode == 0, seeded.stderr
        yield hub


def python_with_sdk(path: Path) -> Path:
    """A venv that sees this checkout, with the SDK the checkout runs with installed into it
    (not only visible through the `.pth`), so the installer resolves an environment's SDK
    requirement there."""
    python = fresh_venv(path, sees_suite=True)
    subprocess.run(
        [str(find_uv()), "pip", "install", "-q", "--python", str(python), "--no-deps",
         "-e", str(ROOT / "sdk")],
        check=True,
    )  # fmt: skip
    return python


@pytest.mark.slow  # seeds five environments with uv, then installs and trains
def test_train_installs_from_the_hub_and_trains(
    seeded_hub: HubProcess,
    tmp_path: Path,
    tiny_model_dir: Path,  # noqa: F811
) -> None:
    version = httpx.get(
        f"{seeded_hub.url}/api/v1/environmentshub/prime/arithmetic/@latest", timeout=30
    ).json()["data"]["semantic_version"]
    python = python_with_sdk(tmp_path / "venv")
    token = seeded_hub.add_user("alice")
    env = prime_env(PRIME_HUB_URL=seeded_hub.url, PRIME_API_KEY=token, HOME=str(tmp_path))
    prime = venv_cli(python, env, tmp_path, timeout=900)

    started = time.monotonic()
    unknown = prime("train", "prime/no-such-env", "--max-steps", "2")
    unknown_s = time.monotonic() - started
    assert unknown.returncode == 2, unknown.stderr
    assert "no-such-env" in unknown.stderr and "Traceback" not in unknown.stderr
    assert not (tmp_path / "outputs").exists()
    print(f"unknown name: exit 2 after {unknown_s:.1f} s")

    # the random-init model never answers correctly, so every group has equal rewards:
    # train on them anyway (zero-advantage filter off) to exercise the whole path
    result = prime(
        "train", f"prime/arithmetic@{version}", "-m", str(tiny_model_dir), "--max-steps", "2",
        "--no-orchestrator.filter-zero-advantages", "--push", "--public", "--output", "json",
        *FAST,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert "is not installed here; installing it from" in result.stderr
    summary = json.loads(result.stdout)
    run = Path(summary["run_dir"])
    assert [p["step"] for p in summary["pushes"]] == ["0", "2"]  # before and after
    board = httpx.get(
        f"{seeded_hub.url}/api/v1/evaluations/", params={"environment": "prime/arithmetic"},
        timeout=30,
    )  # fmt: skip
    assert board.status_code == 200, board.text
    assert [r["step"] for r in metrics(run)] == [0, 1]
    installed = subprocess.run(
        [str(python), "-c", "import importlib.metadata as m; print(m.version('arithmetic'))"],
        text=True, capture_output=True, check=True,
    )  # fmt: skip
    assert installed.stdout.strip() == version
    meta = json.loads((run / "evals" / "step_2" / "metadata.json").read_text())
    assert meta["hub_env"] == "prime/arithmetic" and meta["training"]["step"] == 2


def _verbatim_call_questions(path: Path) -> Path:
    """wiki-search questions (its `questions=` argument) that ask for a search_pages call.

    SmolLM2-135M never calls a tool on the shipped questions: its chat template ignores `tools`,
    and 0 of 40 samples had a parseable call (the prose tool list, a Hermes-style tool block, or
    SmolLM2's function-calling prompt). Asked to output a call verbatim it makes one in most
    rollouts at T=0.5: 13 of 18 in an eval with this wording (12 of 21 with a "Text: " before
    the call, 7 of 21 with "Repeat this line exactly"), so one batch of 2 groups of 2 holds
    multi-turn ones, and --deterministic pins which (the same rollouts every run on one
    machine); every token of them is still sampled by the model, and the search runs over the
    real corpus. The cost is the trainer's: each turn is a sample of ~550-1000 tokens (the tool
    list, then the search results), 12-15 CPU-s each, so the batch is small and the search
    lists one hit with a short snippet."""
    subjects = [
        "Queen",
        "Eiffel Tower",
        "Albert Einstein",
        "Apollo 11",
        "Titanic",
        "Mozart",
        "Rome",
    ]
    with path.open("w") as out:
        for subject in subjects:
            call = json.dumps({"name": "search_pages", "arguments": {"query": subject}})
            question = f"Output the following text verbatim.\n<tool_call>{call}</tool_call>"
            out.write(json.dumps({"question": question, "answer": subject}) + "\n")
    return path


@pytest.mark.slow  # SmolLM2 samples and trains a step of multi-turn rollouts on CPU
def test_train_wiki_search_masks_tool_results(
    seeded_hub: HubProcess,
    tmp_path: Path,
    smollm2_tokenizer_dir: Path,  # noqa: F811
) -> None:
    """Acceptance 7, multi-turn: `prime train prime/wiki-search` (ToolLoop) installs from the hub
    and trains a step; the saved batch carries exactly the sampled tokens with mask 1 and the
    tool results, template and prompt with mask 0."""
    from transformers import AutoTokenizer

    python = python_with_sdk(tmp_path / "venv")
    token = seeded_hub.add_user("bob")
    env = prime_env(PRIME_HUB_URL=seeded_hub.url, PRIME_API_KEY=token, HOME=str(tmp_path))
    questions = _verbatim_call_questions(tmp_path / "questions.jsonl")
    env_args = {
        "questions": str(questions), "num_eval_examples": 1, "max_turns": 2,
        "search_results": 1, "snippet_chars": 80,
    }  # fmt: skip
    result = subprocess.run(
        [str(python), "-m", "prime_cli.main", "train", "prime/wiki-search",
         "-a", json.dumps(env_args), "--max-steps", "1", "--output", "json",
         "--orchestrator.batch-size", "4", "--orchestrator.rollouts-per-example", "2",
         "--orchestrator.sampling.max-tokens", "40", "--orchestrator.sampling.temperature", "0.5",
         "--orchestrator.reward.weights", "{tool_calls = 0.5}", "--no-env-recipe",
         "--deterministic", "--orchestrator.max-async-level", "0",
         "--no-orchestrator.filter-zero-advantages",
         "--no-orchestrator.eval.at-start", "--no-orchestrator.eval.at-end"],
        cwd=tmp_path, env=env, text=True, capture_output=True, timeout=1200, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert "is not installed here; installing it from" in result.stderr
    assert "GGUF" not in result.stderr and "Traceback" not in result.stderr
    run = Path(json.loads(result.stdout)["run_dir"])
    assert json.loads((run / "run.json").read_text())["status"] == "completed"
    rows = metrics(run)
    assert [r["step"] for r in rows] == [0]
    trainer_log = (run / "logs" / "trainer.log").read_text()
    assert "gradient_checkpointing_enable" not in trainer_log and "use_cache" not in trainer_log

    tokenizer = AutoTokenizer.from_pretrained(smollm2_tokenizer_dir)
    multi_turn = searched = 0
    for row in rows:
        step = row["step"]
        samples = [
            json.loads(line)
            for line in (run / "batches" / f"step_{step}" / "samples.jsonl")
            .read_text()
            .splitlines()
        ]
        records = [
            json.loads(line)
            for line in (run / "rollouts" / f"step_{step}.jsonl").read_text().splitlines()
        ]
        by_rollout = {(r["task_id"], r["rollout_index"]): r for r in records}
        assert len(by_rollout) == len(records)  # one group per task in a step
        trained: dict[tuple[str, int], list[dict[str, Any]]] = {}
        for sample in samples:
            trained.setdefault((sample["task_id"], sample["rollout_index"]), []).append(sample)
        assert len(trained) == row["batch/rollouts"] == 4  # the whole batch: no filter
        sampled_tokens = 0
        for key, pieces in trained.items():
            record = by_rollout[key]
            turns = record["turns"]
            # Mask 1 exactly on what the backend sampled, turn after turn, with its logprobs.
            on = [
                (tok, lp)
                for s in pieces
                for tok, m, lp in zip(s["input_ids"], s["loss_mask"], s["sampler_logprobs"])
                if m
            ]
            assert [t for t, _ in on] == [t for turn in turns for t in turn["completion_token_ids"]]
            assert [lp for _, lp in on] == [
                lp for turn in turns for lp in turn["completion_logprobs"]
            ]
            sampled_tokens += sum(len(turn["completion_token_ids"]) for turn in turns)
            tool_replies = [m["content"] for m in record["completion"] if m["role"] == "tool"]
            if len(turns) < 2 or not tool_replies:
                continue
            multi_turn += 1
            searched += "page_id" in tool_replies[0]  # hits (a mangled call gets an error reply)
            # The tool result sits in the last sample's context with mask 0, never trained.
            last = pieces[-1]
            context = tokenizer.decode(
                [t for t, m in zip(last["input_ids"], last["loss_mask"]) if not m]
            )
            trained_text = tokenizer.decode(
                [t for t, m in zip(last["input_ids"], last["loss_mask"]) if m]
            )
            assert tool_replies[0] in context and tool_replies[0] not in trained_text
        mask_total = sum(sum(s["loss_mask"]) for s in samples)
        assert mask_total == sampled_tokens == row["batch/loss_tokens"] > 0
        print(f"step {step}: Σ mask {mask_total} = Σ sampled {sampled_tokens}")
    print(f"multi-turn rollouts with tool results in the batches: {multi_turn} ({searched} hits)")
    assert multi_turn >= 1
