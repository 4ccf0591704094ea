"""python-code: write a Python function that passes hidden unit tests, run in a sandbox.

The template for code-execution environments: the model's code runs only inside a `sandbox`
(Docker when the daemon and image are there, else the local bubblewrap backend), each hidden
test in its own process. Reward = fraction of tests passed; the candidate's timeouts and
crashes fail its tests (reward 0 for them), while a sandbox failure propagates as a
`SandboxError`, which the runner records as an error instead of a score. Its reference policy
submits each problem's reference solution: it passes every hidden test (reward 1.0), so
`prime eval validate` shows the tests, the sandbox image and the harness agree.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from importlib import resources
from typing import Any

from prime_env import Environment, Parser, Reference, Rubric, SingleTurn, State, Task, TaskSet
from sandbox.factory import BACKENDS

from .execution import Executor, TestOutcome

__all__ = ["CodeBlockParser", "Executor", "TestOutcome", "load_environment", "problems"]

SYSTEM_PROMPT = (
    "You are an expert Python programmer. Write the requested function. You may use the "
    "standard library and define helpers. Reply with the complete code in one ```python block."
)


class CodeBlockParser(Parser):
    """The last complete ```python (or bare ```) fenced block; an unclosed fence is no match."""

    _block = re.compile(r"```(?:python|py)?[ \t]*\n(.*?)\n```", re.DOTALL)

    def parse_text(self, text: str) -> str | None:
        blocks = self._block.findall(text)
        if not blocks or text.count("```") % 2:
            return None
        code = blocks[-1].strip("\n")
        return code if code.strip() else None


PARSER = CodeBlockParser()


@lru_cache(maxsize=1)
def problems() -> tuple[dict[str, Any], ...]:
    """All problems with their hidden tests and reference solutions (package data)."""
    text = (
        resources.files("python_code")
        .joinpath("data")
        .joinpath("problems.jsonl")
        .read_text("utf-8")
    )
    return tuple(json.loads(line) for line in text.splitlines() if line)


def _hidden_tests(task_id: str) -> list[str]:
    # Tests stay out of Task.info: info is shown to Program-harness agents, tests must not be.
    return next(p["tests"] for p in problems() if p["id"] == task_id)


def reference_solution(messages: list[dict[str, Any]], state: State) -> str:
    """The reference policy's reply: the problem's reference solution in one code block."""
    code = next(p["reference"] for p in problems() if p["id"] == state.task.id)
    return f"```python\n{code}\n```"


def _task(problem: dict[str, Any]) -> Task:
    text = (
        f"Write a Python function `{problem['signature']}`.\n\n{problem['description']}\n\n"
        "Reply with the complete function in a ```python code block."
    )
    return Task(
        prompt=[{"role": "user", "content": text}],
        answer=None,
        info={"entry_point": problem["entry_point"], "num_tests": len(problem["tests"])},
        id=problem["id"],
    )


def load_environment(
    backend: str = "auto",
    per_test_timeout: float = 5.0,
    num_eval_examples: int = 16,
    seed: int = 0,
) -> Environment:
    """`backend`: "auto" (Docker if its image is built, else local with bubblewrap, else an
    error), "docker", "local", or "unisolated" (no isolation: only for code you trust).

    The 56 problems are split once by `seed`: `num_eval_examples` for eval, the rest for training.
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    if not 0 < per_test_timeout <= 60:
        raise ValueError(f"per_test_timeout must be in (0, 60] seconds, got {per_test_timeout}")
    executor = Executor(backend, per_test_timeout)

    async def tests_passed(completion: list[dict[str, Any]], task: Task, state: State) -> float:
        """Fraction of the hidden tests the submitted code passes (0 without a code block)."""
        code = PARSER.parse_answer(completion)
        tests = _hidden_tests(task.id)
        if code is None:
            outcome = TestOutcome(
                [{"passed": False, "error": "no code block"} for _ in tests], "no_code"
            )
        else:
            outcome = await executor.run(code, tests)  # SandboxError propagates: an error, not 0
        state["test_results"] = outcome.results
        state["test_status"] = outcome.status
        return outcome.fraction_passed

    def all_passed(state: State) -> float:
        results = state.get("test_results") or []
        return 1.0 if results and all(r["passed"] for r in results) else 0.0

    def timed_out(state: State) -> float:
        """1.0 when the candidate's code hit a time limit (a test or the whole run)."""
        results = state.get("test_results") or []
        hit = state.get("test_status") == "timeout" or any(
            "timed out" in (r["error"] or "") for r in results
        )
        return 1.0 if hit else 0.0

    rubric = Rubric(
        [tests_passed], metrics=[all_passed, timed_out, PARSER.format_reward], parser=PARSER
    )
    train, evals = TaskSet(_task(p) for p in problems()).split(
        eval_size=num_eval_examples, seed=seed
    )
    return Environment(
        train,
        SingleTurn(system_prompt=SYSTEM_PROMPT),
        rubric,
        name="python-code",
        eval_tasks=evals,
        reference=Reference(reference_solution, min_reward=1.0),
        correctness="all_passed",
    )
