"""What one command run inside a sandbox produced."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ExecResult:
    """The outcome of a program: its own failures (exit status, timeout) are data, not exceptions.

    `exit_code` follows the shell convention: 128 + N when the program was killed by signal N
    (137 for SIGKILL, which is also what a memory-limit kill or a timeout kill gives).
    Output beyond the sandbox's output cap is dropped and flagged as truncated.
    """

    exit_code: int
    stdout: bytes
    stderr: bytes
    stdout_truncated: bool
    stderr_truncated: bool
    timed_out: bool
    wall_ms: float

    @property
    def ok(self) -> bool:
        """The program finished by itself, in time, with status 0."""
        return self.exit_code == 0 and not self.timed_out

    @property
    def stdout_text(self) -> str:
        return self.stdout.decode("utf-8", "replace")

    @property
    def stderr_text(self) -> str:
        return self.stderr.decode("utf-8", "replace")
