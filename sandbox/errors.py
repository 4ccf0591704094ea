"""Errors that mean the sandbox itself failed, as opposed to the program inside it.

WHY a separate type: a program that exits non-zero, is killed for memory, runs past its timeout
or brings its sandbox down mid-command produces a normal `ExecResult` the rubric may score. A
daemon that went away, a sandbox that cannot start or one stopped from outside is
infrastructure: callers record it as an error on the rollout and never score it as reward 0.

Each class names its `error_type` (the string a rollout's error record carries), the same
attribute the SDK's own infrastructure errors have, so the SDK can recognise a sandbox failure
by that attribute without importing this package.
"""

from __future__ import annotations


class SandboxError(RuntimeError):
    """The sandbox could not do its job (cannot start, stopped from outside, daemon unreachable,
    protocol broken)."""

    error_type = "sandbox_error"


class SandboxUnavailable(SandboxError):
    """The requested backend cannot run on this machine (no Docker daemon, image missing)."""

    error_type = "sandbox_unavailable"
