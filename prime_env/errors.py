"""The SDK's errors, one class per boundary it reports across.

- a model string, endpoints file or key: `ModelConfigError`; a model call that failed after
  the client's retries: `ModelError`;
- the environment's infrastructure (a tool's service, a sandbox, a judge): `InfraError`,
  `JudgeError` (and the sandbox's own `SandboxError`);
- a tool call the model got wrong: `ToolCallError`;
- finding an environment: `EnvironmentNotFound`; declaring a rubric: `RubricError`;
  starting or resuming a run: `EvalError`.

The split matters for scoring: `ModelError` and the infrastructure errors make the rollout an
error record that is excluded from means and training, while anything else a tool raises is
shown to the model as a tool message, because it is part of the task.
"""

from __future__ import annotations

from sandbox.errors import SandboxError


class ModelConfigError(ValueError):
    """A model string, endpoint file or API key setting is wrong; the message says how to fix it."""


class ModelError(Exception):
    """A provider failure that survived the client's retries.

    It is infrastructure, never the model's fault: the runner records it as the rollout's
    `error` ({type, message}) and excludes the rollout from means and training batches.
    """

    def __init__(self, error_type: str, message: str) -> None:
        super().__init__(f"{error_type}: {message}")
        self.error_type = error_type
        self.message = message


class InfraError(Exception):
    """Infrastructure failed (sandbox crashed, a service the env needs is down): not the model's fault.

    Raise it (or a subclass) from tools, setup hooks or env_response; the runner records
    `error = {type: error_type, message}` and never scores the rollout.
    """

    def __init__(self, error_type: str, message: str) -> None:
        super().__init__(f"{error_type}: {message}")
        self.error_type = error_type
        self.message = message


class ToolCallError(Exception):
    """The model's tool call could not be executed; the message goes back to the model."""


class EnvironmentNotFound(LookupError):
    """`prime_env.load` found neither an entry point nor an importable module for the name."""


class RubricError(ValueError):
    """A rubric is mis-declared (unknown argument name, duplicate function name, bad weights)."""


class DatasetError(ValueError):
    """A dataset a task set is read from cannot be used (not in the local Hugging Face cache, no
    such split or column); the message says what to do."""


class EvalError(Exception):
    """A run cannot start or resume; the message says what is wrong and how to fix it."""


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
    if isinstance(exc, (InfraError, ModelError, SandboxError)):
        return exc.error_type
    return None
