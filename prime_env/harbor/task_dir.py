"""Harbor task directories, read: the format is files, so nothing of the `harbor` package
(Python >= 3.12) is needed.

    task-name/
      task.toml            [metadata], [agent] / [verifier] timeout_sec, [environment]
      instruction.md       the prompt
      environment/         the container's build context (Dockerfile), or
                           [environment].docker_image naming an image already here
      tests/test.sh        the verifier: writes /logs/verifier/reward.json or reward.txt
      solution/solve.sh    the reference solution (optional)

A directory holding task.toml is one task; any other directory is searched for them (as
Harbor's datasets and verifiers' harbor taskset do). Each problem is a `HarborFormatError`
naming the file and what to do.
"""

from __future__ import annotations

import hashlib
import math
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_VERIFIER_TIMEOUT_S = 600.0


class HarborFormatError(ValueError):
    """A directory is not a Harbor task (set) this hub can read; the message says why."""


@dataclass(frozen=True)
class HarborTask:
    """One task directory, read."""

    name: str
    path: Path
    instruction: str
    verifier_timeout_s: float
    docker_image: str | None
    """[environment].docker_image, when the task names an image instead of a Dockerfile."""
    cpus: float | None
    memory_mb: int | None
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def environment_dir(self) -> Path:
        return self.path / "environment"

    @property
    def tests_dir(self) -> Path:
        return self.path / "tests"

    @property
    def solution_dir(self) -> Path | None:
        solution = self.path / "solution"
        return solution if (solution / "solve.sh").is_file() else None

    def image_tag(self) -> str:
        """The tag its built image gets: the task's name and a hash of the build context, so
        a changed Dockerfile or file is built again and an unchanged one never is."""
        digest = hashlib.sha256()
        for item in sorted(self.environment_dir.rglob("*")):
            if item.is_file():
                digest.update(item.relative_to(self.environment_dir).as_posix().encode() + b"\0")
                digest.update(item.read_bytes() + b"\0")
        slug = re.sub(r"[^a-z0-9._-]+", "-", self.name.lower()).strip(".-") or "task"
        return f"prime-harbor/{slug[:100]}:{digest.hexdigest()[:16]}"


def read_task(path: Path) -> HarborTask:
    """The task in `path` (which holds task.toml)."""
    config_file = path / "task.toml"
    try:
        config = tomllib.loads(config_file.read_text("utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise HarborFormatError(f"{config_file}: not readable TOML: {exc}") from None
    instruction_file = path / "instruction.md"
    if not instruction_file.is_file():
        raise HarborFormatError(f"{path}: no instruction.md (the task's prompt)")
    instruction = instruction_file.read_text("utf-8").strip()
    if not instruction:
        raise HarborFormatError(f"{instruction_file} is empty")
    if not (path / "tests" / "test.sh").is_file():
        raise HarborFormatError(
            f"{path}: no tests/test.sh (the verifier, which writes /logs/verifier/reward.txt)"
        )
    environment = _table(config, "environment", config_file)
    image = environment.get("docker_image") or None
    if image is not None and not isinstance(image, str):
        raise HarborFormatError(f"{config_file}: [environment].docker_image must be a string")
    if image is None and not (path / "environment" / "Dockerfile").is_file():
        raise HarborFormatError(
            f"{path}: no environment/Dockerfile and no [environment].docker_image: the task "
            "names no container to run in"
        )
    task_table = _table(config, "task", config_file)
    name = str(task_table.get("name") or path.name).strip()
    return HarborTask(
        name=name,
        path=path,
        instruction=instruction,
        verifier_timeout_s=_positive(
            _table(config, "verifier", config_file).get("timeout_sec"),
            DEFAULT_VERIFIER_TIMEOUT_S,
            f"{config_file}: [verifier].timeout_sec",
        ),
        docker_image=image,
        cpus=_positive(environment.get("cpus"), None, f"{config_file}: [environment].cpus"),
        memory_mb=_memory_mb(environment, config_file),
        metadata=dict(_table(config, "metadata", config_file)),
    )


def read_tasks(root: Path, names: list[str] | None = None) -> list[HarborTask]:
    """Every task in `root` (itself a task, or a directory of them) by name, or the `names`
    asked for (an unknown one is an error listing those there are)."""
    if not root.is_dir():
        raise HarborFormatError(f"{root} is not a directory of Harbor tasks")
    dirs = (
        [root]
        if (root / "task.toml").is_file()
        else sorted(p.parent for p in root.rglob("task.toml"))
    )
    if not dirs:
        raise HarborFormatError(f"no Harbor task (a directory with task.toml) in {root}")
    tasks = [read_task(d) for d in dirs]
    seen: dict[str, Path] = {}
    for task in tasks:
        if task.name in seen:
            raise HarborFormatError(
                f"two tasks are named {task.name!r}: {seen[task.name]} and {task.path}"
            )
        seen[task.name] = task.path
    if names is None:
        return tasks
    missing = [n for n in names if n not in seen]
    if missing:
        raise HarborFormatError(f"no task named {missing} in {root}; there are {sorted(seen)}")
    return [t for t in tasks if t.name in names]


def _table(config: dict[str, Any], key: str, where: Path) -> dict[str, Any]:
    value = config.get(key, {})
    if not isinstance(value, dict):
        raise HarborFormatError(f"{where}: [{key}] must be a table")
    return value


def _positive(value: Any, default: float | None, what: str) -> Any:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise HarborFormatError(f"{what} must be a positive number, got {value!r}")
    if not math.isfinite(value):
        raise HarborFormatError(f"{what} must be finite, got {value!r}")
    return float(value)


def _memory_mb(environment: dict[str, Any], where: Path) -> int | None:
    """[environment].memory_mb, or the older `memory = "2G"` form."""
    if "memory_mb" in environment:
        value = _positive(environment["memory_mb"], None, f"{where}: [environment].memory_mb")
        return int(value)
    text = environment.get("memory")
    if text is None:
        return None
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([MG])i?B?\s*", str(text), re.IGNORECASE)
    if match is None:
        raise HarborFormatError(f"{where}: [environment].memory {text!r} is not like '2G'")
    scale = 1024 if match.group(2).upper() == "G" else 1
    return int(float(match.group(1)) * scale)
