"""Choosing a backend: `open_sandbox(backend="auto")` prefers Docker and falls back to local."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from sandbox.aio import AsyncSandbox
from sandbox.backends.base import Sandbox, SandboxRow
from sandbox.errors import SandboxUnavailable
from sandbox.limits import DEFAULT_IMAGE, SandboxLimits

Backend = Literal["auto", "docker", "local"]
BACKENDS = ("auto", "docker", "local")


def resolve_backend(backend: str, image: str | None = None) -> str:
    """'auto' is Docker when the daemon answers and the image is there, else local.

    An explicit `image` means Docker: falling back to the host would silently ignore it.
    """
    if backend not in BACKENDS:
        raise ValueError(
            f"unknown sandbox backend {backend!r}; choose one of {', '.join(BACKENDS)}"
        )
    if backend != "auto":
        return backend
    from sandbox.backends.docker import docker_available, image_exists

    if image is not None:
        return "docker"
    return "docker" if docker_available() and image_exists(DEFAULT_IMAGE) else "local"


def open_sandbox(
    backend: str = "auto",
    image: str | None = None,
    limits: SandboxLimits | None = None,
    env: Mapping[str, str] | None = None,
    binds: Mapping[str, str] | None = None,
) -> Sandbox:
    """A new, not yet started sandbox: `with open_sandbox() as sb: sb.exec("python3 x.py")`.

    `image` applies to Docker only; the local backend runs the host's /usr. `binds` mounts
    host directories read-only (host path -> sandbox path).
    """
    chosen = resolve_backend(backend, image)
    if chosen == "docker":
        from sandbox.backends.docker import DockerSandbox

        return DockerSandbox(
            image=image, limits=limits, env=dict(env or {}), binds=dict(binds or {})
        )
    if image is not None:
        raise SandboxUnavailable(
            "the local backend cannot use an image; drop --image or use --backend docker"
        )
    from sandbox.backends.local import LocalSandbox

    return LocalSandbox(limits=limits, env=dict(env or {}), binds=dict(binds or {}))


def open_async_sandbox(
    backend: str = "auto",
    image: str | None = None,
    limits: SandboxLimits | None = None,
    env: Mapping[str, str] | None = None,
    binds: Mapping[str, str] | None = None,
) -> AsyncSandbox:
    """`async with open_async_sandbox() as sb: await sb.exec(...)`."""
    return AsyncSandbox(open_sandbox(backend, image, limits, env, binds))


def _backend_classes(backend: str) -> list[type[Sandbox]]:
    """The backends `backend` names: "auto" is local, and Docker when its daemon answers; an
    explicit "docker" without a daemon raises SandboxUnavailable."""
    if backend not in BACKENDS:
        raise ValueError(f"unknown sandbox backend {backend!r}; choose one of {BACKENDS}")
    from sandbox.backends.local import LocalSandbox

    chosen: list[type[Sandbox]] = [LocalSandbox] if backend in ("auto", "local") else []
    if backend in ("auto", "docker"):
        from sandbox.backends.docker import DockerSandbox, docker_available

        if docker_available():
            chosen.append(DockerSandbox)
        elif backend == "docker":
            raise SandboxUnavailable("cannot reach the Docker daemon")
    return chosen


def list_sandboxes(backend: str = "auto") -> list[SandboxRow]:
    """Every sandbox on this machine of `backend` (see `_backend_classes`), running or orphaned."""
    return [row for kind in _backend_classes(backend) for row in kind.list_sandboxes()]


def reap_orphans(backend: str = "auto") -> int:
    """Remove sandboxes whose owning process is gone (or whose TTL passed) on `backend`
    ("auto": local, and Docker when its daemon answers); returns how many.

    WHY callers run it at start: a process killed with SIGKILL cannot stop its sandboxes, and a
    container it had created but not yet started never sees its owner's socket close, so the
    next run (`prime train`, `prime sandbox gc`) removes what the last one left.
    Raises SandboxUnavailable only when `backend` is "docker" and the daemon cannot be reached.
    """
    return sum(kind.reap_orphans() for kind in _backend_classes(backend))
