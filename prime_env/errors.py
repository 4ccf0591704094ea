"""Exceptions environment authors raise or catch.

The split matters for scoring: an `InfraError` (or the clients' `ModelError`) makes the
rollout an error record that is excluded from means and training, while anything a tool
raises otherwise is shown to the model as a tool message, because it is part of the task.
"""

from __future__ import annotations

from sandbox.errors import SandboxError


class InfraError(Exception):
    """Infrastructure failed (sandbox crashed, a service the env needs is down): not the model's fault.

    Raise it (or a subclass) from tools, setup hooks or env_response; the runner records
    `error = {type: error_type, message}` and never scores the rollout.
    """

    def __init__(self, error_type: str, message: str) -> None:
        super().__init__(f"{error_type}: {message}")
        self.error_type = error_type
        self.message = message


class EnvironmentNotFound(LookupError):
    """`prime_env.load` found neither an entry point nor an importable module for the name."""


class RubricError(ValueError):
    """A rubric is mis-declared (unknown argument name, duplicate function name, bad weights)."""


class JudgeError(InfraError):
    """The judge model's reply could not be read as yes/no; the rollout becomes an error, not a 0."""

    def __init__(self, message: str) -> None:
        super().__init__("judge_unparseable", message)


def infra_error_type(exc: BaseException) -> str | None:
    """The recorded error type if `exc` is an infrastructure failure, else None.

    Besides InfraError and the clients' ModelError, the sandbox's SandboxError counts (the
    sandbox ships with the SDK and `sandbox.errors` imports nothing), so a sandbox crash inside
    a tool is never shown to the model as an ordinary tool error and scored 0.
    """
    from .clients.base import ModelError  # clients.base imports nothing from here

    if isinstance(exc, (InfraError, ModelError, SandboxError)):
        return exc.error_type
    return None
