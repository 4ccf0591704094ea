"""Errors that mean the sandbox itself failed, as opposed to the program inside it.

WHY a separate type: a program that exits non-zero, is killed for memory or runs past its
timeout produces a normal `ExecResult` the rubric may score. A daemon that went away, a
container that died or a sandbox that cannot start is infrastructure: callers record it as an
error on the rollout and never score it as reward 0.
"""

from __future__ import annotations


class SandboxError(RuntimeError):
    """The sandbox could not do its job (cannot start, died, daemon unreachable, protocol broken)."""


class SandboxUnavailable(SandboxError):
    """The requested backend cannot run on this machine (no Docker daemon, image missing)."""
