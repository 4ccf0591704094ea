"""The declared floors are tested: in .venv/floors (scripts/floors_venv.sh: the lowest versions
sdk/pyproject.toml and pyproject.toml allow for transformers, peft, accelerate, gguf, numpy,
torch at this machine's one CPU wheel), the trainer/sampler tests that touch transformers' API
pass, and so does `prime train builtin_envs/arithmetic --max-steps 1`.

The transformers floor is 5.17, the version a GPU image trained with (and died with at step 0
before `local_model.transformers_compat`): this module is also that release's test. A small
selection of tests runs, not the suite twice: the prefix-sharing gradient test (the cache's
name), one LoRA trainer step in process (step 0 against the sampler, the broadcast), the decode
step, the conversion of the shipped GGUF (its special tokens), the torch backend. Then the CLI
itself, as the GPU image ran it, shrunk by its own flags to one step of 2 groups x 4 rollouts
kept whatever their rewards (so the trainer always runs its forward and backward) and a 2-problem
eval at the end (its time: docs/benchmarks.md, "Engines").
"""

from __future__ import annotations

import json
import os
import subprocess
import tomllib
from pathlib import Path

import pytest

from tests.support import require

ROOT = Path(__file__).resolve().parents[1]
VENV = ROOT / ".venv" / "floors"
SELECTION = [
    "tests/trainer_bridge/trainer/test_modeling.py",
    (
        "tests/trainer_bridge/trainer/test_trainer.py::"
        "test_a_groups_shared_prompt_runs_once_and_gives_the_same_gradient"
    ),
    (
        "tests/trainer_bridge/trainer/test_trainer.py::"
        "test_one_lora_step_scores_what_the_sampler_sampled_and_publishes_policy_1"
    ),
    "tests/local_model/test_llama_step.py",
    "tests/local_model/test_models.py::test_first_load_converts_and_later_loads_read_the_same_weights",
    "tests/trainer_bridge/inference/test_torch_backend.py",
]

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("floors_venv")]


def declared_floor(name: str) -> str:
    """The `>=` version sdk/pyproject.toml or pyproject.toml declares for `name`."""
    for file in (ROOT / "sdk" / "pyproject.toml", ROOT / "pyproject.toml"):
        project = tomllib.loads(file.read_text())["project"]
        specs = list(project["dependencies"])
        for extra in project.get("optional-dependencies", {}).values():
            specs += extra
        for spec in specs:
            head, _, floor = spec.partition(">=")
            if head.strip().lower() == name and floor:
                return floor.split(",")[0].split(";")[0].strip()
    raise AssertionError(f"no floor declared for {name}")


@pytest.fixture(scope="module")
def floors_python() -> Path:
    build = subprocess.run(
        ["bash", str(ROOT / "scripts" / "floors_venv.sh")],
        check=False,
        capture_output=True,
        text=True,
        timeout=900,
    )
    require(
        build.returncode == 0, f"the floors venv (scripts/floors_venv.sh: {build.stderr[-800:]})"
    )
    return VENV / "bin" / "python"


def installed(python: Path, name: str) -> str:
    out = subprocess.run(
        [str(python), "-c", f"import importlib.metadata as m; print(m.version({name!r}))"],
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip()


def test_the_floors_venv_has_the_declared_lowest_versions(floors_python: Path) -> None:
    for name in ("transformers", "peft", "accelerate", "gguf", "numpy"):
        floor = declared_floor(name)
        assert installed(floors_python, name).split("+")[0] in (floor, f"{floor}.0"), name
    assert installed(floors_python, "transformers") == "5.17.0"  # the GPU image's release


def test_the_trainer_and_sampler_tests_pass_at_the_floors(floors_python: Path) -> None:
    run = subprocess.run(
        [
            str(floors_python),
            "-m",
            "pytest",
            "-p",
            "no:xdist",
            "-p",
            "no:cacheprovider",
            "-q",
            *SELECTION,
        ],
        cwd=ROOT,
        check=False,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]


def test_prime_train_runs_a_step_at_the_floors(floors_python: Path, tmp_path: Path) -> None:
    """The GPU image's failure (step 0's shared-prefix forward reading a cache name 5.17 lacks)
    as a user meets it: `prime train` from the repository root, its settings in `tmp_path`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PRIME_")}
    env["XDG_CONFIG_HOME"] = str(tmp_path / "config")  # the user's `prime` settings untouched
    run = subprocess.run(
        [
            str(floors_python.with_name("prime")), "train", "builtin_envs/arithmetic",
            "--max-steps", "1", "-o", str(tmp_path / "out"), "--output", "json",
            "--monitors.live", "false",
            "--orchestrator.batch-size", "8", "--orchestrator.rollouts-per-example", "4",
            "--orchestrator.filter-zero-advantages", "false",
            "--orchestrator.eval.at-start", "false", "--orchestrator.eval.num-examples", "2",
        ],
        cwd=ROOT, env=env, check=False, capture_output=True, text=True, timeout=540,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    answer = json.loads(run.stdout)
    assert (answer["status"], answer["steps"]) == ("completed", 1)
    directory = Path(answer["run_dir"])
    assert (directory / "checkpoints" / "step_1" / "STABLE").is_file()
    [step] = [json.loads(line) for line in (directory / "metrics.jsonl").read_text().splitlines()]
    assert step["step"] == 0 and step["errors/total"] == 0
    assert step["trainer/samples"] == 8 and step["trainer/loss_tokens"] > 0
    [held_out] = answer["outcome"]["held_out"]
    assert held_out["step"] == 1
