"""`prime train ENV --lab URL`: the orchestrator and the env here, a hub's Lab trains and samples.

A Lab (served from this process) on the tiny SmolLM2-shaped model; `prime train` runs as a
subprocess for one step of the vowels env. The policy it publishes is the Lab's (its
broadcast names the `tinker://` sampler weights, and its adapter files are the Lab's
checkpoint), the rollouts were sampled there, the Lab's trainer stepped, and the probe of
policies 0 and 1 (trainer's forward against the sampler's prompt logprobs) passed. A token
without the `train` scope is refused before anything starts, with the Lab's words (exit 2).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import torch

from tests.e2e.eval_support import prime, prime_env
from tests.hub_server.lab.labhub import LabHub, serve_lab
from tests.trainer_bridge.conftest import smollm2_tokenizer_dir, tiny_model_dir  # noqa: F401
from trainer_bridge.lab.engine import TorchLabEngine
from trainer_bridge.protocol.policy import read_policy
from trainer_bridge.protocol.run_dir import RunDir

pytestmark = [pytest.mark.xdist_group("lab"), pytest.mark.timeout(900)]

VOWELS = Path(__file__).resolve().parents[1] / "envs" / "vowels.py"
ONE_STEP = [
    "--max-steps", "1",
    "--orchestrator.batch-size", "4",
    "--orchestrator.rollouts-per-example", "2",
    "--orchestrator.sampling.max-tokens", "8",
    "--orchestrator.eval.at-start", "false",
    "--orchestrator.eval.at-end", "false",
    "--no-monitors.live",
]  # fmt: skip


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory, tiny_model_dir: Path) -> Iterator[LabHub]:  # noqa: F811
    torch.manual_seed(0)
    engine = TorchLabEngine(str(tiny_model_dir))
    with serve_lab(tmp_path_factory.mktemp("lab-hub"), engine) as hub:
        hub.admin_token = hub.add_user("alice")
        yield hub


def train(lab: LabHub, token: str, model: Path, out: Path) -> tuple[int, str]:
    env = prime_env(PRIME_HUB_URL=lab.url, PRIME_API_KEY=token, HOME=str(out))
    result = prime(
        "train", str(VOWELS), "-m", str(model), "--lab", lab.tinker_url, "-o", str(out),
        "--run-name", "lab", *ONE_STEP, cwd=out, env=env, timeout=800,
    )  # fmt: skip
    return result.returncode, result.stdout + result.stderr


def test_one_step_is_trained_and_sampled_on_the_lab(
    lab: LabHub,
    tmp_path: Path,
    tiny_model_dir: Path,  # noqa: F811
) -> None:
    code, output = train(lab, lab.admin_token, tiny_model_dir, tmp_path)
    assert code == 0, output
    run = RunDir(next((tmp_path / "train").glob("*/lab")))
    assert run.read_run_json()["engine"] == "lab"
    ref, probe = read_policy(run.broadcast(1))
    assert ref.lab_path is not None and ref.lab_path.endswith("/sampler_weights/step_1")
    assert (run.broadcast(1) / "adapter_config.json").is_file()
    [trained] = [json.loads(line) for line in run.trainer_metrics.read_text().splitlines()]
    assert trained["step"] == 0 and trained["samples"] > 0 and trained["grad_norm"] > 0
    [row] = [json.loads(line) for line in run.metrics.read_text().splitlines()]
    assert row["step"] == 0 and row["batch/rollouts"] == 4  # sampled by the Lab
    assert row["probe/max_abs_diff"] < 1e-3  # its sampler serves what its trainer trained
    # the Lab holds the policy the run published, as this account's checkpoint
    listing = httpx.get(
        f"{lab.tinker_url}/api/v1/checkpoints",
        headers={"X-API-Key": f"tml-{lab.admin_token}"},
        timeout=30,
    ).json()["checkpoints"]
    assert ref.lab_path in {c["tinker_path"] for c in listing}
    assert len(probe.logprobs) == len(probe.token_ids) - 1


def test_a_token_without_the_train_scope_is_refused_before_anything_starts(
    lab: LabHub,
    tmp_path: Path,
    tiny_model_dir: Path,  # noqa: F811
) -> None:
    code, output = train(lab, lab.token_for("alice", ["read"]), tiny_model_dir, tmp_path)
    assert code == 2, output
    assert "refused the token (403)" in output and "--scope train" in output
    assert "Traceback" not in output
    assert not (tmp_path / "train").exists()
