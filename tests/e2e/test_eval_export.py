"""`prime eval export`: runs on disk and on a real hub become SFT JSONL that `datasets` loads
unchanged and TRL's SFTTrainer trains on (a tiny random model of SmolLM2's layout, on CPU)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from testing.server import FakeServer
from tests.e2e.eval_support import ROOT, SAY_ENV, prime, prime_env, records, run_dirs
from tests.e2e.test_eval_hub import publish_say_env
from tests.hub_server.hubproc import HubProcess
from tests.support import distributions_installed, require
from tests.trainer_bridge.conftest import smollm2_tokenizer_dir, tiny_model_dir  # noqa: F401

pytestmark = pytest.mark.timeout(900)

WIKI = str(ROOT / "builtin_envs" / "wiki-search")


def ok(result: Any) -> str:
    assert result.returncode == 0, f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    return str(result.stdout)


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture(scope="module")
def reference_runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two reference runs of wiki-search (tool calls in SmolLM2's format) under out/."""
    work = tmp_path_factory.mktemp("wiki")
    for n in ("3", "4"):
        ok(prime("eval", "run", WIKI, "-m", "reference", "-n", n, "-r", "2", "-o", "out", cwd=work))
    return work


def test_filters_and_dedup_across_runs(reference_runs: Path) -> None:
    first, second = run_dirs(reference_runs / "out")
    out = reference_runs / "sft.jsonl"
    result = prime(
        "eval", "export", first.name, str(second), "-o", str(out), "--runs-dir", "out",
        "--output", "json", cwd=reference_runs,
    )  # fmt: skip
    summary = json.loads(ok(result))
    # 14 rollouts of 4 distinct tasks; the reference plays each task the same way every time
    assert (summary["read"], summary["written"], summary["duplicates"]) == (14, 4, 10)
    rows = lines(out)
    assert len({row["source"]["task_id"] for row in rows}) == 4
    row = rows[0]
    assert set(row) == {"messages", "tools", "source"} and row["source"]["model"] == "reference"
    names = [m["tool_calls"][0]["function"]["name"] for m in row["messages"] if m.get("tool_calls")]
    assert names == ["search_pages", "view_sections", "read_section"]
    assert [t["function"]["name"] for t in json.loads(row["tools"])] == names
    again = prime("eval", "export", str(first), "-o", str(out), "--min-reward", "1.1",
                  cwd=reference_runs)  # fmt: skip
    read = len(records(first))
    assert again.returncode == 1 and f"no rollout of {read} passes the filters" in again.stderr
    assert "Traceback" not in again.stderr and len(lines(out)) == 4  # the old file is untouched


def test_bad_runs_and_options_are_refused_without_writing(reference_runs: Path) -> None:
    out = reference_runs / "never.jsonl"
    missing = prime("eval", "export", "./no/such/run", "-o", str(out), cwd=reference_runs)
    assert missing.returncode == 1 and "is not an eval run directory" in missing.stderr
    unknown = prime("eval", "export", "feedbeef", "-o", str(out), cwd=reference_runs,
                    env=prime_env(PRIME_HUB_URL="http://127.0.0.1:9"))  # fmt: skip
    assert unknown.returncode == 1 and "no run 'feedbeef' under outputs/evals" in unknown.stderr
    needs = prime("eval", "export", "out", "-o", str(out), "--tokens", cwd=reference_runs)
    assert needs.returncode == 2 and "pass --tokenizer" in needs.stderr
    bad = prime(
        "eval", "export", str(run_dirs(reference_runs / "out")[0]), "-o", str(out), "--tokens",
        "--tokenizer", "local/nope", cwd=reference_runs,
    )  # fmt: skip
    assert bad.returncode == 1 and "unknown local model 'local/nope'" in bad.stderr
    assert not out.exists() and not list(reference_runs.glob(".never.jsonl*"))


def test_a_hub_evaluation_exports_as_its_local_run_does(hub: HubProcess, tmp_path: Path) -> None:
    token = hub.add_user("alice")
    publish_say_env(hub, token, tmp_path / "dist")
    env = prime_env(PRIME_HUB_URL=hub.url, PRIME_API_KEY=token, HOME=str(tmp_path))

    def cli(*args: str) -> dict[str, Any]:
        return dict(json.loads(ok(prime(*args, "--output", "json", cwd=tmp_path, env=env))))

    with FakeServer("openai") as server:
        cli("eval", "run", str(SAY_ENV), "-m", "fake", "--base-url", server.url, "-n", "6",
            "-r", "2", "-a", '{"wrong_every": 3}', "-o", "out")  # fmt: skip
    (run_dir,) = run_dirs(tmp_path / "out")
    pushed = cli("eval", "push", str(run_dir), "--env", "alice/say-env")
    evaluation_id = pushed["pushed"][0]["evaluation_id"]
    options = ["--min-reward", "1", "--best-of", "1", "--no-dedup"]
    local = cli("eval", "export", str(run_dir), "-o", "local.jsonl", *options)
    remote = cli("eval", "export", evaluation_id[:8], "-o", "hub.jsonl", *options)
    # 6 tasks x 2 rollouts; tasks 0 and 3 ask for the wrong word (reward 0); one of each other
    assert (remote["read"], remote["zero_reward"], remote["written"]) == (12, 4, 4)
    assert remote == {**local, "file": remote["file"]}
    assert (tmp_path / "hub.jsonl").read_bytes() == (tmp_path / "local.jsonl").read_bytes()
    tasks = {row["source"]["task_id"] for row in lines(tmp_path / "hub.jsonl")}
    assert tasks == {"t1", "t2", "t4", "t5"}


@pytest.mark.slow
def test_the_export_trains_with_trl_unchanged(
    reference_runs: Path,
    tmp_path: Path,
    tiny_model_dir: Path,  # noqa: F811
) -> None:
    require(distributions_installed("trl"), "TRL (the dev extra)")
    chats, tokens = tmp_path / "chats.jsonl", tmp_path / "tokens.jsonl"
    runs = [str(d) for d in run_dirs(reference_runs / "out")]
    ok(prime("eval", "export", *runs, "-o", str(chats), "--tools-as", "text", cwd=tmp_path))
    ok(prime("eval", "export", *runs, "-o", str(tokens), "--tokens", "--tokenizer",
             "local/smollm2-135m", cwd=tmp_path))  # fmt: skip

    import datasets
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import SFTConfig, SFTTrainer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)

    def train(path: Path, steps: int) -> tuple[Any, list[float]]:
        dataset = datasets.load_dataset("json", data_files=str(path), split="train")
        config = SFTConfig(
            output_dir=str(tmp_path / f"trl-{path.stem}"), max_steps=steps, learning_rate=3e-3,
            per_device_train_batch_size=1, logging_steps=1, save_strategy="no", report_to=[],
            use_cpu=True, max_length=2048, seed=0, dataloader_num_workers=0,
            # TRL's defaults are for a GPU: bf16 autocast and gradient checkpointing made a
            # step of this tiny model ~7 CPU-s here (fp32 without recomputation: a fraction)
            bf16=False, gradient_checkpointing=False,
        )  # fmt: skip
        model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
        trainer = SFTTrainer(model, args=config, train_dataset=dataset, processing_class=tokenizer)
        trainer.train()
        losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
        return trainer, losses

    chat_trainer, chat_losses = train(chats, 2)
    token_trainer, token_losses = train(tokens, 4)
    assert len(chat_losses) == 2 and len(token_losses) == 4
    assert token_losses[-1] < token_losses[0]  # it learns the reference's turns
    # TRL renders the text-form chats with SmolLM2's template into exactly the exported ids,
    # and builds its labels from the exported mask: the assistant turns, through <|im_end|>.
    rendered = chat_trainer.train_dataset["input_ids"]
    exported = lines(tokens)
    assert rendered == [row["input_ids"] for row in exported]
    labels = token_trainer.train_dataset["labels"]
    for row, label in zip(exported, labels):
        assert [t != -100 for t in label] == [bool(m) for m in row["assistant_masks"]]
    trained = [t for t, m in zip(exported[0]["input_ids"], exported[0]["assistant_masks"]) if m]
    text = tokenizer.decode(trained)
    assert text.startswith('<tool_call>{"name": "search_pages"') and text.endswith(
        "</answer><|im_end|>"
    )
