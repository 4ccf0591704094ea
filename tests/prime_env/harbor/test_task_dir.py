"""Reading Harbor task directories and their verifiers' reward files: what is accepted, and
the message each mistake gets."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from prime_env.errors import InfraError
from prime_env.harbor import HarborFormatError, read_tasks
from prime_env.harbor.environment import _json_reward
from sandbox.image import base_images
from tests.e2e.foreign_support import FOREIGN

TASKS = FOREIGN / "harbor"


def test_a_directory_of_tasks_and_one_task() -> None:
    tasks = read_tasks(TASKS)
    assert [t.name for t in tasks] == ["no-reward", "shout", "sum-lines"]
    shout = tasks[1]
    assert shout.instruction.startswith("The working directory holds `greeting.txt`.")
    assert (shout.verifier_timeout_s, shout.cpus, shout.memory_mb) == (60.0, 1.0, 512)
    assert shout.metadata["difficulty"] == "easy" and shout.solution_dir is not None
    assert [t.name for t in read_tasks(TASKS / "shout")] == ["shout"]
    assert [t.name for t in read_tasks(TASKS, ["shout"])] == ["shout"]
    with pytest.raises(HarborFormatError, match=r"no task named \['nope'\]"):
        read_tasks(TASKS, ["nope"])


def test_the_image_tag_follows_the_build_context(tmp_path: Path) -> None:
    shutil.copytree(TASKS / "shout", tmp_path / "shout")
    [task] = read_tasks(tmp_path)
    tag = task.image_tag()
    assert (
        tag.startswith("prime-harbor/shout:") and tag == read_tasks(TASKS / "shout")[0].image_tag()
    )
    (tmp_path / "shout" / "environment" / "greeting.txt").write_text("changed\n")
    assert read_tasks(tmp_path)[0].image_tag() != tag


@pytest.mark.parametrize(
    ("remove", "config", "message"),
    [
        ("instruction.md", None, "no instruction.md"),
        ("tests/test.sh", None, "no tests/test.sh"),
        ("environment/Dockerfile", None, "no environment/Dockerfile and no"),
        (None, "[verifier]\ntimeout_sec = -1\n", r"\[verifier\].timeout_sec must be a positive"),
        (None, "[environment]\nmemory = 'lots'\n", "is not like '2G'"),
        (None, "not = toml = here", "not readable TOML"),
    ],
)
def test_what_is_wrong_is_named(
    tmp_path: Path, remove: str | None, config: str | None, message: str
) -> None:
    task = tmp_path / "shout"
    shutil.copytree(TASKS / "shout", task)
    if remove:
        (task / remove).unlink()
    if config is not None:
        (task / "task.toml").write_text(config)
    with pytest.raises(HarborFormatError, match=message):
        read_tasks(tmp_path)


def test_no_tasks_at_all(tmp_path: Path) -> None:
    with pytest.raises(HarborFormatError, match="no Harbor task"):
        read_tasks(tmp_path)


def test_reward_json() -> None:
    [task] = read_tasks(TASKS / "shout")
    assert _json_reward(b'{"reward": 1, "tests": 0.5}', task) == {"reward": 1.0, "tests": 0.5}
    assert _json_reward(b'{"score": 0.25}', task) == {"reward": 0.25}
    for bad in (b"1.0", b"{}", b'{"reward": true}', b'{"reward": "1"}', b"{", b'{"a": 1, "b": 2}'):
        with pytest.raises(InfraError) as caught:
            _json_reward(bad, task)
        assert caught.value.error_type == "harbor_bad_reward"


def test_base_images_of_a_dockerfile() -> None:
    assert base_images("FROM prime-sandbox/python:bookworm\nWORKDIR /app\n") == [
        "prime-sandbox/python:bookworm"
    ]
    multi = (
        "ARG BASE=debian:bookworm\nFROM --platform=linux/amd64 ${BASE} AS build\nRUN true\n"
        "FROM build AS test\nFROM scratch\nCOPY --from=build /x /x\n"
    )
    assert base_images(multi) == ["debian:bookworm"]
    with pytest.raises(ValueError, match="no default"):
        base_images("FROM $NOPE\n")
    with pytest.raises(ValueError, match="no FROM"):
        base_images("RUN true\n")
