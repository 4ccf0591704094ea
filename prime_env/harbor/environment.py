"""Harbor tasks as an environment: the instruction is the prompt, the task's container is the
sandbox, tests/test.sh is the rubric, solution/solve.sh the reference policy.

Each rollout gets a fresh Docker sandbox from the task's image (built here from its
environment/Dockerfile, network off, never pulled; sandbox.image.build_dockerfile), with the
sandbox's hardening (read-only root, no network, a uid of its own) and these places writable:
the image's WORKDIR (with the image's files there), /logs, /tests, /solution. The model works
through one tool, `bash`, run in the WORKDIR. When it stops, /tests and /logs are emptied (it
may have planted a reward file), tests/ is copied into /tests and `bash /tests/test.sh` runs in
the WORKDIR, as Harbor runs it. The reward is /logs/verifier/reward.json's `reward` (its other
numbers are metrics; a file with one number is that number), else reward.txt's number, even
when the script exits non-zero. A script that writes neither (or an unreadable one, or runs
past [verifier].timeout_sec) makes the rollout an error record, never a 0: Harbor's own metric
scores a missing reward as 0, our contract does not.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..clients.base import ModelClient, SamplingArgs
from ..environment import Environment
from ..errors import InfraError
from ..harnesses.tool_loop import ToolLoop
from ..reference import Reference
from ..rubric import Rubric, Scores
from ..state import State
from ..tasks import Task, TaskSet
from .task_dir import HarborFormatError, HarborTask, read_tasks

WRITABLE = ("/logs", "/tests", "/solution")
REWARD_JSON = "/logs/verifier/reward.json"
REWARD_TXT = "/logs/verifier/reward.txt"
NO_REWARD = "harbor_no_reward"
BAD_REWARD = "harbor_bad_reward"
VERIFIER_TIMEOUT = "harbor_verifier_timeout"
OUTPUT_CHARS = 8000
"""How much of a command's output the model sees (the start and the end of it)."""
STAGE = (
    "chmod -R u+rwX /tests /logs 2>/dev/null; find /tests /logs -mindepth 1 -delete && "
    "mkdir -p /logs/verifier"
)
"""Before the verifier: nothing the model left in /tests or /logs (a planted reward file)."""
VERDICT = "harbor_verdict"
"""state key: the verifier's numbers ({"reward": ..., other metrics})."""
SYSTEM_PROMPT = (
    "You are working in a Linux container, in its working directory. Run shell commands with "
    "the bash tool to complete the task. When the task is complete, reply without a tool call."
)


@dataclass(frozen=True)
class Container:
    """How a task's rollouts run: its image, working directory, writable places, limits."""

    image: str
    workdir: str
    writable: tuple[str, ...]
    memory_mb: int
    cpus: float


def prepare_container(task: HarborTask, say: Any = lambda _message: None) -> Container:
    """The task's image, built here when it is not yet (a base image that is not here is an
    ImageUnavailable naming it); its WORKDIR must be a place the sandbox can make writable."""
    from sandbox.backends.base import check_writable_dirs
    from sandbox.backends.docker import image_exists
    from sandbox.image import ImageUnavailable, build_dockerfile, image_workdir

    if task.docker_image is not None:
        if not image_exists(task.docker_image):
            raise ImageUnavailable(
                f"task {task.name} runs in {task.docker_image} ([environment].docker_image), "
                "which is not on this machine, and images are never pulled: build or load it "
                "here first"
            )
        image = task.docker_image
    else:
        image = task.image_tag()
        build_dockerfile(task.environment_dir, image, say=say)
    workdir = os.path.normpath(image_workdir(image) or "/work")
    inside = ("/work", "/tmp", *WRITABLE)
    own = any(workdir == p or workdir.startswith(p + "/") for p in inside)
    writable = WRITABLE if own else (*WRITABLE, workdir)
    try:
        check_writable_dirs(writable)
    except ValueError as exc:
        raise HarborFormatError(
            f"task {task.name}: its WORKDIR {workdir} cannot be made writable ({exc}); set "
            "WORKDIR in environment/Dockerfile to a directory of its own such as /app"
        ) from None
    memory = task.memory_mb or 1024
    return Container(
        image=image,
        workdir=workdir,
        writable=writable,
        memory_mb=max(memory, 256),
        cpus=min(task.cpus or 1.0, float(os.cpu_count() or 1)),
    )


def _clip(text: str) -> str:
    if len(text) <= OUTPUT_CHARS:
        return text
    half = OUTPUT_CHARS // 2
    return (
        f"{text[:half]}\n[... {len(text) - OUTPUT_CHARS} characters left out ...]\n{text[-half:]}"
    )


class HarborHarness(ToolLoop):
    """A `bash` tool in a fresh sandbox of the task's container per rollout, then the task's
    verifier in the same container (the module docstring)."""

    def __init__(
        self,
        tasks: dict[str, HarborTask],
        containers: dict[str, Container],
        *,
        max_turns: int,
        command_timeout: float,
        timeout: float | None,
    ) -> None:
        self.harbor_tasks = tasks
        self.containers = containers
        self.command_timeout = command_timeout

        async def bash(command: str, sandbox: Any, workdir: str) -> str:
            """Run a command with bash in the task's container, in its working directory, and
            return its exit status and output.

            Args:
                command: The command line (bash -c).
            """
            result = await sandbox.exec(
                ["bash", "-c", command], cwd=workdir, timeout=command_timeout
            )
            out = result.stdout.decode(errors="replace") + result.stderr.decode(errors="replace")
            status = (
                f"timed out after {command_timeout:g} s"
                if result.timed_out
                else f"exit code {result.exit_code}"
            )
            return f"{_clip(out)}\n[{status}]".lstrip("\n")

        super().__init__(
            [bash],
            max_turns=max_turns,
            system_prompt=SYSTEM_PROMPT,
            hidden=("sandbox", "workdir"),
            timeout=timeout,
        )

    async def execute(
        self, client: ModelClient, state: State, sampling: SamplingArgs | None = None
    ) -> None:
        """The episode in a fresh sandbox, then the verifier there; the sandbox always goes."""
        from sandbox import SandboxLimits, open_async_sandbox

        task = self.harbor_tasks[state.task.id]
        container = self.containers[task.name]
        limits = SandboxLimits(
            memory_mb=container.memory_mb,
            cpus=container.cpus,
            workdir_mb=max(256, container.memory_mb // 4),
            timeout_s=self.command_timeout,
        )
        sandbox = open_async_sandbox(
            "docker", image=container.image, limits=limits, writable_dirs=container.writable
        )
        try:
            await sandbox.start()
            state.tool_args.update(sandbox=sandbox, workdir=container.workdir)
            await super().execute(client, state, sampling)
            state[VERDICT] = await verify(sandbox, task, container.workdir)
        finally:
            await sandbox.stop()


async def verify(sandbox: Any, task: HarborTask, workdir: str) -> dict[str, float]:
    """Stage tests/ in a clean /tests, run test.sh, read its reward (the module docstring)."""
    staged = await sandbox.exec(STAGE, timeout=60)
    if staged.exit_code != 0:
        raise InfraError(
            "harbor_staging",
            f"cannot empty /tests and /logs for the verifier of {task.name}: "
            f"{staged.stderr.decode(errors='replace')[-500:]}",
        )
    await sandbox.upload_dir(task.tests_dir, "/tests")
    run = await sandbox.exec(
        ["bash", "/tests/test.sh"], cwd=workdir, timeout=task.verifier_timeout_s
    )
    output = (run.stdout + run.stderr).decode(errors="replace").strip()[-1000:]
    if run.timed_out:
        raise InfraError(
            VERIFIER_TIMEOUT,
            f"tests/test.sh of {task.name} ran past {task.verifier_timeout_s:g} s "
            "([verifier].timeout_sec)",
        )
    try:
        data = await sandbox.read_file(REWARD_JSON)
    except FileNotFoundError:
        data = None
    if data is not None:
        return _json_reward(data, task)
    try:
        text = (await sandbox.read_file(REWARD_TXT)).decode(errors="replace").strip()
    except FileNotFoundError:
        raise InfraError(
            NO_REWARD,
            f"tests/test.sh of {task.name} exited with {run.exit_code} and wrote neither "
            f"{REWARD_JSON} nor {REWARD_TXT}; a missing reward is an error, never a 0"
            + (f"; its output ended: {output}" if output else ""),
        ) from None
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise InfraError(BAD_REWARD, f"{REWARD_TXT} of {task.name} is not a number: {text[:80]!r}")
    return {"reward": value}


def _json_reward(data: bytes, task: HarborTask) -> dict[str, float]:
    try:
        values = json.loads(data)
    except ValueError as exc:
        raise InfraError(BAD_REWARD, f"{REWARD_JSON} of {task.name} is not JSON: {exc}") from None
    if (
        not isinstance(values, dict)
        or not values
        or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
            for v in values.values()
        )
    ):
        raise InfraError(
            BAD_REWARD,
            f"{REWARD_JSON} of {task.name} must be an object of finite numbers, got {data[:120]!r}",
        )
    if "reward" not in values:
        if len(values) != 1:
            raise InfraError(
                BAD_REWARD,
                f"{REWARD_JSON} of {task.name} has no 'reward' among {sorted(values)}",
            )
        [values] = [{"reward": v} for v in values.values()]
    return {str(k): float(v) for k, v in values.items()}


def _reward(state: State) -> float:
    return float(state[VERDICT]["reward"])


class HarborRubric(Rubric):
    """The verifier's reward; the other numbers of its reward.json are metrics."""

    def __init__(self) -> None:
        super().__init__()
        self.add_reward(_reward, 1.0, "reward")

    async def score_rollout(self, state: State) -> Scores:
        verdict: dict[str, float] = state[VERDICT]
        return Scores(
            rewards={"reward": verdict["reward"]},
            metrics={k: v for k, v in verdict.items() if k != "reward"},
        )


def _reference(tasks: dict[str, HarborTask]) -> Reference:
    """solution/solve.sh as the policy: copied into /solution, then run with the bash tool (so
    its trace is what a model solving the task would send)."""

    async def solve(messages: list[dict[str, Any]], state: State) -> str | dict[str, Any]:
        if messages and messages[-1].get("role") == "tool":
            return "The solution ran."
        task = tasks[state.task.id]
        if task.solution_dir is None:
            raise HarborFormatError(f"task {task.name} ships no solution/solve.sh")
        await state.tool_args["sandbox"].upload_dir(task.solution_dir, "/solution")
        call = {"command": "bash /solution/solve.sh"}
        return {
            "content": "",
            "tool_calls": [
                {
                    "id": "call_solve",
                    "type": "function",
                    "function": {"name": "bash", "arguments": json.dumps(call)},
                }
            ],
        }

    return Reference(solve, min_reward=1.0)


def load_harbor(
    root: str | os.PathLike[str],
    *,
    name: str | None = None,
    tasks: Sequence[str] | None = None,
    max_turns: int = 30,
    command_timeout: float = 120.0,
    timeout: float | None = None,
    say: Any = lambda _message: None,
) -> Environment:
    """The Harbor tasks in `root` (a task, or a directory of them) as an environment.

    `tasks`: names of the tasks to take (default all); `max_turns`: model turns per rollout;
    `command_timeout`: seconds one bash command may run; `timeout`: seconds per episode (none:
    Harbor's per-task agent timeouts are left out, as verifiers does, since they measure the
    inference speed of the machine they were written on). Each task's image is built now when
    it is not yet (`say` reports it); a missing base image refuses the whole set, naming it.
    """
    if max_turns < 1 or not command_timeout > 0:
        raise ValueError("max_turns must be >= 1 and command_timeout > 0")
    found = read_tasks(Path(root), list(tasks) if tasks is not None else None)
    by_name = {t.name: t for t in found}
    containers = {t.name: prepare_container(t, say) for t in found}
    task_list = [
        Task(
            prompt=[{"role": "user", "content": t.instruction}],
            info={"harbor": {"name": t.name, **t.metadata}},
            id=t.name,
        )
        for t in found
    ]
    with_solution = any(t.solution_dir is not None for t in found)
    return Environment(
        TaskSet(task_list),
        HarborHarness(
            by_name,
            containers,
            max_turns=max_turns,
            command_timeout=command_timeout,
            timeout=timeout,
        ),
        HarborRubric(),
        name=name,
        reference=_reference(by_name) if with_solution else None,
    )
