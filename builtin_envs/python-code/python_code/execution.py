"""Running a candidate's code against hidden tests in a sandbox, never in the host process.

The outcome separates the two kinds of failure the rubric must never confuse:
- the candidate's own failure (syntax error, wrong answer, exception, crash, timeout, memory
  hog) is a normal `TestOutcome` with tests failed: reward 0 for those tests;
- the sandbox's failure (daemon gone, container died, cannot start) is a `SandboxError`, which
  propagates so the runner records the rollout as an error instead of scoring it.
"""

from __future__ import annotations

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
    """Runs code + tests in a fresh sandbox per call (`backend`: auto = Docker, else local)."""

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
        marker = "@@prime-python-code-" + secrets.token_hex(8) + "@@"
        spec = json.dumps(
            {"source": source, "tests": tests, "timeout": self.per_test_timeout, "marker": marker}
        )
        budget = self.per_test_timeout * len(tests) + 15.0
        async with open_async_sandbox(self.backend, limits=self.limits) as sb:
            await sb.write_file("test_runner.py", RUNNER)
            result = await sb.exec(["python3", "-I", "test_runner.py"], stdin=spec, timeout=budget)
        return _outcome(result, marker, len(tests))


def _outcome(result: ExecResult, marker: str, count: int) -> TestOutcome:
    for line in result.stdout_text.splitlines():
        if line.startswith(marker):
            return TestOutcome(results=json.loads(line[len(marker) :]))
    # No result line: the whole run was killed (e.g. the candidate's children exhausted the
    # sandbox's memory or pids, or the run outlived its budget). That is the candidate's doing.
    failed = [{"passed": False, "error": "the test run did not finish"} for _ in range(count)]
    if result.timed_out:
        return TestOutcome(failed, "timeout", "the test run exceeded its time budget")
    return TestOutcome(
        failed, "crashed", f"exit status {result.exit_code}: {result.stderr_text[-300:]}"
    )
