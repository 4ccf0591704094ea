"""`prime train` end to end on CPU: a tiny random-init model (SmolLM2's shape and tokenizer)
on a fast test env, through the real CLI, trainer child and torch backend."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.e2e.eval_support import prime, prime_env
from tests.e2e.train_support import FAST, VOWELS_ENV, metrics, train_dirs
from tests.support import fake_vllm_engine
from tests.trainer_bridge.conftest import smollm2_tokenizer_dir, tiny_model_dir  # noqa: F401


@pytest.mark.slow  # ~100 s on 2 shared cores: 3 steps, 3 evals, plot and two exports
def test_train_three_steps_async(tmp_path: Path, tiny_model_dir: Path) -> None:  # noqa: F811
    out = tmp_path / "out"
    result = prime(
        "train",
        str(VOWELS_ENV),
        "-m",
        str(tiny_model_dir),
        "--max-steps",
        "3",
        "-o",
        str(out),
        "--orchestrator.eval.interval",
        "2",
        "--output",
        "json",
        *FAST,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads(result.stdout)
    run = Path(summary["run_dir"])
    assert [run] == train_dirs(out) and summary["status"] == "completed"
    rows = metrics(run)
    assert [r["step"] for r in rows] == [0, 1, 2]  # each step exactly once
    for row in rows:
        assert row["batch/rollouts"] >= 8 and row["errors/total"] == 0
        assert isinstance(row["trainer/loss"], float) and row["trainer/mismatch_kl"] < 1e-3
        assert row["off_policy/max"] <= 2
    assert rows[0]["probe/max_abs_diff"] <= 1e-3  # the step-0 probe: sampler == trainer
    # evals: base model, every 2 steps, the end; standard eval runs with a training block
    assert sorted(p.name for p in (run / "evals").iterdir()) == ["step_0", "step_2", "step_3"]
    meta = json.loads((run / "evals" / "step_3" / "metadata.json").read_text())
    assert meta["status"] == "completed"
    assert meta["model"] == f"{tiny_model_dir}@{run.name}/step_3"
    assert meta["training"]["step"] == 3 and meta["training"]["run_id"] == run.name
    # the batch the trainer read holds the rollouts' exact ids: Σ mask = Σ sampled tokens
    batch = [json.loads(x) for x in (run / "batches" / "step_0" / "samples.jsonl").open()]
    records = [json.loads(x) for x in (run / "rollouts" / "step_0.jsonl").open()]
    sampled = sum(len(t["completion_token_ids"]) for r in records for t in r["turns"])
    assert sum(sum(s["loss_mask"]) for s in batch) == sampled
    assert (run / "checkpoints" / "step_3" / "STABLE").is_file()
    assert (run / "plots" / "train.png").stat().st_size > 0
    info = json.loads((run / "run.json").read_text())
    assert info["status"] == "completed" and info["config_digest"]

    png = tmp_path / "curve.png"
    plotted = prime("train", "plot", str(run), "-o", str(png), cwd=tmp_path)
    assert plotted.returncode == 0 and png.stat().st_size > 0, plotted.stderr
    adapter = tmp_path / "adapter"
    exported = prime("train", "export", str(run), "-o", str(adapter), cwd=tmp_path)
    assert exported.returncode == 0, exported.stderr
    assert (adapter / "adapter_model.safetensors").is_file()
    merged = tmp_path / "merged"
    exported = prime(
        "train", "export", str(run), "--step", "2", "--merge", "-o", str(merged), cwd=tmp_path
    )
    assert exported.returncode == 0, exported.stderr
    assert (merged / "config.json").is_file() and (merged / "tokenizer_config.json").is_file()


def test_refusals_exit_2_before_any_model_loads(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[orchestrator.sampling]\ntop_p = 0.9\n")
    cases = [
        (["-c", str(bad)], "top_p=0.9 is refused"),
        (["--orchestrator.bogus", "1"], "unknown key 'orchestrator.bogus'"),
        (["--orchestrator.batch-size", "6"], "not a multiple of rollouts_per_example"),
        (["-a", '{"num_tasks": 0}'], "empty train split"),
        (["-a", "{not json"], "--env-args is not valid JSON"),
        (["-a", "[1]"], "--env-args must be a JSON object, got list"),
        (["--orchestrator.reward.weights", "{nope = 1.0}"], "'nope', which"),
    ]
    for args, message in cases:
        started = time.monotonic()
        result = prime("train", str(VOWELS_ENV), "-o", str(tmp_path / "out"), *args, cwd=tmp_path)
        assert result.returncode == 2, (args, result.stderr)
        assert message in result.stderr, (args, result.stderr)
        assert "Traceback" not in result.stderr
        assert time.monotonic() - started < 60
    assert not (tmp_path / "out").exists()  # nothing was written


def test_dry_run_prints_each_hosts_command(tmp_path: Path) -> None:
    result = prime(
        "train",
        str(VOWELS_ENV),
        "-m",
        "HuggingFaceTB/SmolLM2-135M-Instruct",  # vLLM serves a model id or dir, not local/
        "--backend",
        "vllm",
        "--inference.urls",
        '["http://127.0.0.1:8001/v1", "http://gpu-2.example:8000/v1"]',
        "--dry-run",
        "--output",
        "json",
        cwd=tmp_path,
        env=prime_env(PRIME_ENGINES_DIR=str(fake_vllm_engine(tmp_path / "engines").parent)),
    )
    assert result.returncode == 0, result.stderr
    hosts = json.loads(result.stdout)["hosts"]
    assert "trainer_bridge.trainer" in hosts["localhost"]["trainer"]
    assert "vllm.entrypoints.openai.api_server" in hosts["localhost"]["inference[0]"]
    assert "--enable-lora" in hosts["gpu-2.example"]["inference[1]"]
    assert "--return-tokens-as-token-ids" in hosts["gpu-2.example"]["inference[1]"]
    assert "VLLM_ALLOW_RUNTIME_LORA_UPDATING=1" in hosts["gpu-2.example"]["inference[1]"]
