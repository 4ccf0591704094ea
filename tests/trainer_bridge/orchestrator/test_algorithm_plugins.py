"""A package registers its own algorithm under the `prime.algorithms` entry points: pip installs
a tiny one (into a directory of its own, put on the path of a fresh interpreter), and
`orchestrator.algo.type` then names it, builds it from the stage's context and screens groups
with it; without the package the name is refused, listing the ones there are."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

PLUGIN = '''
"""Every scored rollout with advantage = its reward, no baseline (a toy, for the test)."""
from trainer_bridge.orchestrator.groups import Group
from trainer_bridge.orchestrator.samples import samples_from_record


class RewardAsAdvantage:
    def __init__(self, context):
        self.scale = float(context.options.get("scale", 1.0))

    def screen(self, key, version, records, order=0):
        group = Group(key, version, records, order)
        for record in records:
            group.samples += samples_from_record(
                record, advantage=self.scale * record.reward, group=key
            )
            group.rollouts += 1
        return group


def make(context):
    return RewardAsAdvantage(context)
'''

CHECK = """
from prime_env.record import RolloutRecord, Turn
from tests.trainer_bridge.envs.vowels import load_environment
from trainer_bridge.config_loader import build_config
from trainer_bridge.orchestrator.stages import stage_runs

config = build_config([], [("orchestrator.algo.type", "reward_as_advantage"),
                           ("orchestrator.algo.options", {"scale": 2.0})], env_id="vowels")
[stage] = stage_runs(config, load_environment(num_tasks=4))
turn = Turn(prompt_token_ids=[1, 2], completion_token_ids=[3], completion_logprobs=[-1.0])
record = RolloutRecord(run_id="r", env="vowels", task_id="t", example_index=0, rollout_index=0,
                       model="m", prompt=[], reward=0.25, turns=[turn])
group = stage.algorithm.screen("g", 0, [record])
print(type(stage.algorithm).__name__, [s.advantage for s in group.samples])
"""


def run(code: str, path: Path | None) -> subprocess.CompletedProcess[str]:
    root = Path(__file__).resolve().parents[3]
    extra = [str(path)] if path is not None else []
    env = {"PYTHONPATH": ":".join([*extra, str(root)]), "PATH": "/usr/bin:/bin"}
    return subprocess.run(
        [sys.executable, "-c", code], cwd=root, env=env, capture_output=True, text=True, check=False
    )


def test_an_installed_package_registers_an_algorithm(tmp_path: Path) -> None:
    package = tmp_path / "src"
    (package / "reward_algo").mkdir(parents=True)
    (package / "reward_algo" / "__init__.py").write_text(PLUGIN)
    (package / "pyproject.toml").write_text(
        textwrap.dedent(
            """
            [build-system]
            requires = ["setuptools>=61"]
            build-backend = "setuptools.build_meta"

            [project]
            name = "reward-algo"
            version = "0.1.0"

            [project.entry-points."prime.algorithms"]
            reward_as_advantage = "reward_algo:make"
            """
        )
    )
    site = tmp_path / "site"
    installed = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation",
         "--no-index", "--quiet", "--target", str(site), str(package)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert installed.returncode == 0, installed.stderr
    result = run(CHECK, site)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "RewardAsAdvantage [0.5]"

    missing = run(CHECK, None)  # the same check without the package on the path
    assert missing.returncode == 1
    assert "'reward_as_advantage' is not an algorithm: use one of grpo, sft, rft, opd" in (
        missing.stderr
    )
