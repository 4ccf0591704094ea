"""Running a candidate's code against hidden tests in a sandbox, never in the host process.

The outcome separates the two kinds of failure the rubric must never confuse:
- the candidate's own failure (syntax error, wrong answer, exception, crash, timeout, memory
  hog) is a normal `TestOutcome` with tests failed: reward 0 for those tests;
- the sandbox's failure (daemon gone, cannot start, stopped from outside) is a `SandboxError`,
  which propagates so the runner records the rollout as an error instead of scoring it. A
  candidate cannot cause one: killing the sandbox's supervisor, leaving processes behind or
  filling its disk or memory all come back as its own failed run (see docs/sandbox.md).
"""

from __future__ import annotations

import ast
import json
import secrets
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from sandbox import ExecResult, SandboxLimits, open_async_sandbox

RUNNER = resources.files("python_code").joinpath("test_runner.py").read_text(encoding="utf-8")


@dataclass(frozen=True)
class TestOutcome:
    """Per-test results; `status` says how the run as a whole ended (ok, timeout, crashed)."""

    results: list[dict[str, Any]] = field(default_factory=list)
    status: str = "ok"
    detail: str = ""

    @property
    def fraction_passed(self) -> float:
        if not self.results:
            return 0.0
        return sum(r["passed"] for r in self.results) / len(self.results)


class Executor:
    """Runs code + tests in a fresh sandbox per call (`backend`: see `load_environment`)."""

    def __init__(
        self,
        backend: str = "auto",
        per_test_timeout: float = 5.0,
        limits: SandboxLimits | None = None,
    ) -> None:
        self.backend = backend
        self.per_test_timeout = per_test_timeout
        self.limits = limits or SandboxLimits(memory_mb=512, pids=64, timeout_s=60.0)

    async def run(self, source: str, tests: list[str]) -> TestOutcome:
        checks = [HiddenTest.parse(test) for test in tests]
        marker = "@@prime-python-code-" + secrets.token_hex(8) + "@@"
        spec = json.dumps(
            {
                "source": source,
                "expressions": [check.expression for check in checks],
                "timeout": self.per_test_timeout,
                "marker": marker,
            }
        )
        budget = self.per_test_timeout * len(tests) + 15.0
        async with open_async_sandbox(self.backend, limits=self.limits) as sb:
            await sb.write_file("test_runner.py", RUNNER)
            result = await sb.exec(["python3", "-I", "test_runner.py"], stdin=spec, timeout=budget)
        return _outcome(result, marker, checks)


@dataclass(frozen=True)
class HiddenTest:
    """`assert EXPRESSION == EXPECTED` (or `is`), split so that only EXPRESSION is sent to the
    sandbox: the candidate never sees the expected value, and the host does the comparison."""

    expression: str
    operator: str  # "==" | "is"
    expected: Any

    @classmethod
    def parse(cls, test: str) -> HiddenTest:
        body = ast.parse(test).body
        compare = body[0].test if len(body) == 1 and isinstance(body[0], ast.Assert) else None
        if not (
            isinstance(compare, ast.Compare)
            and len(compare.ops) == 1
            and isinstance(compare.ops[0], (ast.Eq, ast.Is))
        ):
            raise ValueError(f"hidden tests must be `assert EXPR == VALUE` or `is`: {test!r}")
        # EXPECTED is the problem author's trusted data (e.g. `10**20 + 1`), never the model's.
        expected = eval(
            compile(ast.Expression(compare.comparators[0]), "<expected>", "eval"),
            {"__builtins__": {}},
        )
        operator = "==" if isinstance(compare.ops[0], ast.Eq) else "is"
        return cls(ast.unparse(compare.left), operator, expected)

    def check(self, report: dict[str, Any]) -> dict[str, Any]:
        """Judge one report from the sandbox: a value's repr, or the candidate's error."""
        if not isinstance(report.get("repr"), str):
            return {"passed": False, "error": str(report.get("error") or "no result")[:300]}
        try:
            value = ast.literal_eval(report["repr"])
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            return {"passed": False, "error": "returned a value that is not a plain literal"}
        passed = value is self.expected if self.operator == "is" else _equal(value, self.expected)
        if passed:
            return {"passed": True, "error": None}
        return {"passed": False, "error": f"{self.expression} gave {report['repr'][:200]}"}


def _equal(value: Any, expected: Any) -> bool:
    try:
        return bool(value == expected)
    except Exception:  # noqa: BLE001 - e.g. comparing deeply nested literals
        return False


def _outcome(result: ExecResult, marker: str, checks: list[HiddenTest]) -> TestOutcome:
    for line in result.stdout_text.splitlines():
        if line.startswith(marker):
            try:
                reports = json.loads(line[len(marker) :])
            except ValueError:
                continue  # a line forged by the candidate; the runner's own line is valid JSON
            if isinstance(reports, list) and len(reports) == len(checks):
                return TestOutcome(
                    results=[
                        check.check(r if isinstance(r, dict) else {})
                        for check, r in zip(checks, reports, strict=True)
                    ]
                )
    # No result line: the whole run was killed (e.g. the candidate's children exhausted the
    # sandbox's memory or pids, or the run outlived its budget). That is the candidate's doing.
    failed = [{"passed": False, "error": "the test run did not finish"} for _ in checks]
    if result.timed_out:
        return TestOutcome(failed, "timeout", "the test run exceeded its time budget")
    return TestOutcome(
        failed, "crashed", f"exit status {result.exit_code}: {result.stderr_text[-300:]}"
    )
