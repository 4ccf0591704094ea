"""Harbor task directories on this hub: `prime env import harbor` packages the three tasks of
tests/foreign/harbor (one whose solution passes, one whose solution fails, one whose test writes
no reward), `prime eval validate` runs their reference solutions, and `prime eval run` scores a
model's work in each task's own container: 1, 0, and an error record (never a 0). A task whose
base image is not here is refused, naming it, and nothing is pulled."""

from __future__ import annotations

import os
import shutil
import subprocess
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from testing.server import FakeServer
from tests.e2e.cli_support import PRIME, one_line_error
from tests.e2e.eval_support import records, run_dirs
from tests.e2e.foreign_support import FOREIGN

pytestmark = [pytest.mark.timeout(900), pytest.mark.xdist_group("docker")]

TASKS = FOREIGN / "harbor"
ENVIRON = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}


def prime(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(PRIME), *args], cwd=cwd, text=True, capture_output=True, timeout=600, check=False,
        env={**ENVIRON, "NO_COLOR": "1", "COLUMNS": "200"},
    )  # fmt: skip


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, f"stdout:\n{result.stdout}\nstderr:\n{result.stderr[-4000:]}"
    return result.stdout


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory, docker_images: set[str]) -> Iterator[Path]:
    """tests/foreign/harbor imported as the environment harbor-demo."""
    root = tmp_path_factory.mktemp("harbor")
    out = ok(
        prime("env", "import", "harbor", str(TASKS), "-o", str(root / "harbor-demo"), cwd=root)
    )
    assert "Imported 3 Harbor task(s) as environment harbor-demo" in out
    yield root / "harbor-demo"


@pytest.fixture(scope="module")
def docker_images() -> set[str]:
    """The image tags here before the module (to show that nothing was pulled)."""
    from sandbox.backends.docker import docker_available, docker_client
    from tests.support import require

    require(docker_available(), "a Docker daemon")
    return {tag for image in docker_client().images.list() for tag in image.tags}


def test_import_packages_the_tasks_unchanged(imported: Path) -> None:
    module = imported / "harbor_demo"
    for task in ("shout", "sum-lines", "no-reward"):
        for name in ("instruction.md", "task.toml", "tests/test.sh", "environment/Dockerfile"):
            assert (module / "tasks" / task / name).read_bytes() == (
                TASKS / task / name
            ).read_bytes()
    ok(prime("env", "build", str(imported), cwd=imported.parent))
    [wheel] = (imported / "dist").glob("*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    assert "harbor_demo/tasks/shout/environment/greeting.txt" in names
    assert "harbor_demo/tasks/sum-lines/tests/test.sh" in names


def test_a_base_image_not_here_is_refused_and_nothing_is_pulled(
    tmp_path: Path, docker_images: set[str]
) -> None:
    source = tmp_path / "tasks"
    shutil.copytree(TASKS / "shout", source / "shout")
    dockerfile = source / "shout" / "environment" / "Dockerfile"
    dockerfile.write_text(
        dockerfile.read_text().replace("prime-sandbox/python:bookworm", "ubuntu:24.04")
    )
    result = prime(
        "env", "import", "harbor", str(source), "-o", str(tmp_path / "pulled"), cwd=tmp_path
    )
    one_line_error(result, "ubuntu:24.04", "never pulled")
    assert not (tmp_path / "pulled").exists()
    from sandbox.backends.docker import docker_client

    tags = {tag for image in docker_client().images.list() for tag in image.tags}
    assert not any(tag.startswith("ubuntu") for tag in tags - docker_images)


def test_validate_runs_the_reference_solutions(imported: Path) -> None:
    """shout's solution passes (no shortfall named for it); sum-lines' scores 0 and no-reward's
    test writes no reward: the two shortfalls."""
    every = prime("eval", "validate", str(imported), cwd=imported)
    assert every.returncode == 1
    assert "task sum-lines (example 2): reward 0 < min_reward 1" in every.stdout
    assert "task no-reward (example 0): harbor_no_reward" in every.stdout
    assert "shout" not in every.stdout.replace("harbor-demo", "")
    assert "falls short on 2 check(s) of 3 task(s)" in every.stderr


def test_eval_scores_a_models_work_in_each_container(imported: Path) -> None:
    """The fake model runs the command each instruction names (`call: bash {...}`): right for
    shout, wrong for sum-lines; no-reward's test writes no reward."""
    out = imported.parent / "eval"
    with FakeServer("openai") as fake:
        ok(prime(
            "eval", "run", str(imported), "-m", "fake", "-b", fake.url, "-n", "-1", "-r", "1",
            "--max-error-share", "0.5", "-o", str(out), cwd=imported.parent,
        ))  # fmt: skip
    [run] = run_dirs(out)
    got = {r["task_id"]: r for r in records(run)}
    assert got["shout"]["reward"] == 1.0 and got["shout"]["error"] is None
    assert got["sum-lines"]["reward"] == 0.0
    assert got["sum-lines"]["metrics"] == {"answered": 1.0}
    failed = got["no-reward"]
    assert failed["reward"] is None and failed["rewards"] == {}
    assert failed["error"]["type"] == "harbor_no_reward"
    assert "wrote neither /logs/verifier/reward.json" in failed["error"]["message"]
    shout = got["shout"]["completion"]
    assert shout[0]["tool_calls"][0]["function"]["name"] == "bash"
    assert shout[1]["role"] == "tool" and shout[1]["content"] == "[exit code 0]"
