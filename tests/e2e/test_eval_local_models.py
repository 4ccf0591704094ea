"""Any local model: a trained policy's export evaluates with `prime eval run -m DIR` (merged)
and `-m BASE --adapter DIR` (the LoRA adapter), in-process, and their greedy completions are
the trainer's own eval of that policy, token for token."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.cli_support import one_line_error
from tests.e2e.eval_support import prime, records, run_dirs
from tests.e2e.train_support import FAST, VOWELS_ENV, train_dirs
from tests.trainer_bridge.conftest import smollm2_tokenizer_dir, tiny_model_dir  # noqa: F401

pytestmark = pytest.mark.timeout(1200)

EVAL_TOKENS = "8"  # FAST's --orchestrator.eval.max-tokens


def _by_example(rows: list[dict[str, Any]]) -> dict[int, tuple[list[int], list[float], str]]:
    """example -> (completion token ids, their logprobs, the reply text)."""
    out = {}
    for row in rows:
        assert row["error"] is None, row["error"]
        [turn] = row["turns"]
        out[row["example_index"]] = (
            turn["completion_token_ids"],
            turn["completion_logprobs"],
            row["completion"][-1]["content"],
        )
    return out


def _eval(tmp_path: Path, out: str, *model: str) -> list[dict[str, Any]]:
    result = prime(
        "eval", "run", str(VOWELS_ENV), *model, "-n", "2", "-r", "1", "-t", EVAL_TOKENS,
        "-T", "0", "-o", str(tmp_path / out), cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    [run] = run_dirs(tmp_path / out)
    meta = json.loads((run / "metadata.json").read_text())
    assert meta["status"] == "completed" and meta["model_info"]["client"] == "local"
    return records(run)


@pytest.mark.slow  # trains a tiny policy two steps, exports it twice, evaluates three models
def test_exported_policy_and_adapter_reproduce_the_trainers_eval(
    tmp_path: Path,
    tiny_model_dir: Path,  # noqa: F811
) -> None:
    trained = prime(
        "train", str(VOWELS_ENV), "-m", str(tiny_model_dir), "--max-steps", "2",
        "-o", str(tmp_path / "train"), "--trainer.optim.lr", "0.02",
        "--no-orchestrator.filter-zero-advantages", *FAST,
        # The sampler's evals on one thread, as `prime eval run`'s are: a lent second thread
        # (on a quiet machine) sums in another order, and a tiny model's near-ties can flip.
        "--inference.idle-trainer-threads", "1", cwd=tmp_path,
    )  # fmt: skip
    assert trained.returncode == 0, trained.stderr[-3000:]
    [run] = train_dirs(tmp_path / "train")
    trainer_base = _by_example(records(run / "evals" / "step_0"))
    trainer_final = _by_example(records(run / "evals" / "step_2"))
    # training moved the policy: its greedy replies' logprobs are not the base model's
    assert any(trainer_base[e][1] != trainer_final[e][1] for e in trainer_final)

    merged, adapter = tmp_path / "merged", tmp_path / "adapter"
    for args in (["--merge", "-o", str(merged)], ["-o", str(adapter)]):
        exported = prime("train", "export", str(run), "--step", "2", *args, cwd=tmp_path)
        assert exported.returncode == 0, exported.stderr

    by_dir = _by_example(_eval(tmp_path, "merged-out", "-m", str(merged)))
    by_adapter = _by_example(
        _eval(tmp_path, "adapter-out", "-m", str(tiny_model_dir), "--adapter", str(adapter))
    )
    base = _by_example(_eval(tmp_path, "base-out", "-m", str(tiny_model_dir)))
    for example, (ids, logprobs, text) in trainer_final.items():
        # the adapter runs through the same LoRA layers as the trainer's sampler: identical
        assert by_adapter[example] == (ids, logprobs, text)
        # merged weights (W + BA) are the same function up to float rounding
        assert by_dir[example][0] == ids and by_dir[example][2] == text
        assert by_dir[example][1] == pytest.approx(logprobs, abs=1e-4)
        assert base[example][0] == trainer_base[example][0]
        assert base[example][1] == pytest.approx(trainer_base[example][1], abs=1e-5)


def test_wrong_directories_are_refused_before_anything_runs(
    tmp_path: Path,
    tiny_model_dir: Path,  # noqa: F811
) -> None:
    adapter_like = tmp_path / "an-adapter"
    adapter_like.mkdir()
    (adapter_like / "adapter_config.json").write_text("{}")
    cases = [
        (["-m", str(tmp_path / "missing")], "does not exist"),
        (["-m", str(tmp_path)], "is not a Hugging Face model directory"),
        (["-m", str(adapter_like)], f"--adapter {adapter_like}"),
        (["-m", str(tiny_model_dir), "--adapter", str(tiny_model_dir)], "it is a whole model"),
        (
            ["-m", "fake", "-b", "http://127.0.0.1:9/v1", "--adapter", str(adapter_like)],
            "--lora-modules",
        ),
    ]
    for args, message in cases:
        result = prime(
            "eval", "run", str(VOWELS_ENV), *args, "-o", str(tmp_path / "out"), cwd=tmp_path
        )
        one_line_error(result, message)
    assert not (tmp_path / "out").exists()
