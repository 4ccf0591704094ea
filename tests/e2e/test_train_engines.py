"""The engines `prime train` starts: the trainer under torchrun when trainer.world_size > 1
(gloo on CPU, 2 ranks), and vLLM, which refuses before anything starts what it cannot serve
(an adapter directory, full fine-tuning, an engine not installed); a vLLM that cannot start is
the run's recorded error. vLLM serving for real: tests/e2e/test_vllm_engine.py."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from prime_env.run_status import process_running
from tests.e2e.eval_support import prime, prime_env
from tests.e2e.train_support import (
    FAST,
    NO_EVAL,
    VOWELS_ENV,
    children_of_run,
    metrics,
    train_dirs,
)
from tests.support import fake_vllm_engine
from tests.trainer_bridge.conftest import smollm2_tokenizer_dir, tiny_model_dir  # noqa: F401


@pytest.mark.slow  # torchrun with two gloo ranks beside the sampler: about a minute
def test_world_size_2_trains_under_torchrun_through_prime_train(
    tmp_path: Path,
    tiny_model_dir: Path,  # noqa: F811
) -> None:
    out = tmp_path / "out"
    result = prime(
        "train", str(VOWELS_ENV), "-m", str(tiny_model_dir), "-o", str(out), "--max-steps", "2",
        "--trainer.world-size", "2", "--output", "json", *FAST, *NO_EVAL, cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    (run,) = train_dirs(out)
    assert [r["step"] for r in metrics(run)] == [0, 1]
    assert all(r["trainer/samples"] == r["batch/samples"] for r in metrics(run))
    assert (run / "checkpoints" / "step_2" / "STABLE").is_file()
    assert (run / "checkpoints" / "step_2" / "trainer" / "dcp").is_dir()  # sharded: FSDP2
    log = (run / "logs" / "trainer.log").read_text()
    assert "Traceback" not in log
    assert not [pid for pid in children_of_run(run) if process_running(pid)]  # both ranks are gone


def test_dry_run_shows_torchrun_and_vllm_refuses_what_it_cannot_serve(tmp_path: Path) -> None:
    shown = prime(
        "train", str(VOWELS_ENV), "--trainer.world-size", "2", "--dry-run", "--output", "json",
        cwd=tmp_path,
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    trainer = json.loads(shown.stdout)["hosts"]["localhost"]["trainer"]
    assert (
        "torch.distributed.run --standalone --nproc-per-node 2 -m trainer_bridge.trainer" in trainer
    )
    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text("{}")
    refused = prime(
        "train", str(VOWELS_ENV), "--backend", "vllm", "-m", str(adapter), "--dry-run", cwd=tmp_path
    )
    assert refused.returncode == 2 and "is a LoRA adapter, not a model" in refused.stderr
    full = prime(
        "train", str(VOWELS_ENV), "--backend", "vllm", "--model.lora", "false", "--dry-run",
        cwd=tmp_path,
    )  # fmt: skip
    assert full.returncode == 2 and "full fine-tuning (model.lora = false)" in full.stderr
    assert "Traceback" not in refused.stderr + full.stderr
    assert not (tmp_path / "outputs").exists()


def test_a_missing_engine_is_one_line_naming_the_install_command(tmp_path: Path) -> None:
    environ = prime_env(
        PATH=str(Path(sys.executable).parent) + ":/usr/bin:/bin",
        PRIME_ENGINES_DIR=str(tmp_path / "engines"),
    )
    result = prime(
        "train", str(VOWELS_ENV), "--backend", "vllm", "-o", str(tmp_path / "out"),
        cwd=tmp_path, env=environ,
    )  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert "vLLM is not installed: run `prime engine install vllm`" in result.stderr
    assert "Traceback" not in result.stderr and not (tmp_path / "out").exists()


def test_a_vllm_that_cannot_start_is_the_runs_recorded_error(
    tmp_path: Path,
    tiny_model_dir: Path,  # noqa: F811
) -> None:
    """An engine whose interpreter exits at once: the start fails, run.json says why, exit 1."""
    python = tmp_path / "python"
    python.write_text("#!/bin/sh\necho 'vllm: broken install' >&2\nexit 3\n")
    python.chmod(0o755)
    fake_vllm_engine(tmp_path / "engines", python)
    environ = prime_env(PRIME_ENGINES_DIR=str(tmp_path / "engines"))
    out = tmp_path / "out"
    result = prime(
        "train", str(VOWELS_ENV), "-m", str(tiny_model_dir), "--backend", "vllm", "-o", str(out),
        "--max-steps", "1", "--output", "json", *NO_EVAL, cwd=tmp_path, env=environ,
    )  # fmt: skip
    assert result.returncode == 1, result.stderr[-3000:]
    (run,) = train_dirs(out)
    info = json.loads((run / "run.json").read_text())
    assert info["status"] == "failed"
    assert info["error"] and "the vllm[0] process died (exit status 3)" in info["error"]
    assert "vllm: broken install" in info["error"]
    assert json.loads(result.stdout)["error"] == info["error"]
    assert "Traceback" not in result.stderr
    assert not [pid for pid in children_of_run(run) if process_running(pid)]
