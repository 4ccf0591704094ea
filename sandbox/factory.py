"""Choosing a backend: `auto` is Docker, else bubblewrap, and never one that shows the host.

WHY refuse instead of falling back further: model-written code hunts for reward hacks, and code
that can read the host finds the environment's reference solutions and the user's tokens. The
backend that hides nothing (`unisolated`) runs only when named, or when the user allows `auto`
to fall back to it with PRIME_SANDBOX_ALLOW_UNISOLATED=1, for code they trust.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from functools import cache
from typing import Literal

from sandbox.aio import AsyncSandbox
from sandbox.backends.base import Sandbox, SandboxRow
from sandbox.errors import SandboxUnavailable
from sandbox.limits import DEFAULT_IMAGE, SandboxLimits

Backend = Literal["auto", "docker", "local", "unisolated"]
BACKENDS = ("auto", "docker", "local", "unisolated")
ALLOW_UNISOLATED = "PRIME_SANDBOX_ALLOW_UNISOLATED"
_log = logging.getLogger(__name__)


def resolve_backend(backend: str, image: str | None = None) -> str:
    """'auto' is Docker when the daemon answers and the image is there, else local (bubblewrap);
    without either it raises `SandboxUnavailable` saying how to install one, unless
    PRIME_SANDBOX_ALLOW_UNISOLATED=1 lets it fall back to "unisolated".

    An explicit `image` means Docker: falling back to the host would silently ignore it.
    """
    if backend not in BACKENDS:
        raise ValueError(
            f"unknown sandbox backend {backend!r}; choose one of {', '.join(BACKENDS)}"
        )
    if backend != "auto":
        return backend
    if image is not None:
        return "docker"
    from sandbox.backends.local import INSTALL_BWRAP, bwrap_problem

    docker_problem = _docker_problem()
    if docker_problem is None:
        return "docker"
    local_problem = bwrap_problem()
    if local_problem is None:
        return "local"
    if os.environ.get(ALLOW_UNISOLATED) == "1":
        _warn_unisolated()
        return "unisolated"
    raise SandboxUnavailable(
        f"no sandbox that isolates model-written code can run here: {docker_problem}, and "
        f"{local_problem}. Install either Docker (`apt-get install docker.io`, start the daemon, "
        f"then `prime sandbox build-image`) or bubblewrap ({INSTALL_BWRAP}). Only for code you "
        'trust: backend "unisolated" (`--backend unisolated`), or '
        f"{ALLOW_UNISOLATED}=1 for `auto`, runs it unisolated, able to read and write this "
        "machine's files"
    )


def _docker_problem() -> str | None:
    """Why `auto` cannot use Docker, or None when the daemon answers and the image is built."""
    from sandbox.backends.docker import docker_available, image_exists

    if not docker_available():
        return "the Docker daemon does not answer"
    if not image_exists(DEFAULT_IMAGE):
        return f"the sandbox image {DEFAULT_IMAGE} is not built"
    return None


@cache
def _warn_unisolated() -> None:
    """Once per process: the user allowed it, but should see that it happens."""
    _log.warning(
        "sandbox: neither Docker (with its image) nor bubblewrap is available, and %s=1 is set: "
        "running sandboxes unisolated, which hides nothing of this machine from the code",
        ALLOW_UNISOLATED,
    )


def open_sandbox(
    backend: str = "auto",
    image: str | None = None,
    limits: SandboxLimits | None = None,
    env: Mapping[str, str] | None = None,
    binds: Mapping[str, str] | None = None,
    writable_dirs: Sequence[str] | None = None,
) -> Sandbox:
    """A new, not yet started sandbox: `with open_sandbox() as sb: sb.exec("python3 x.py")`.

    `image` applies to Docker only; the local backends run the host's /usr. `binds` mounts
    host directories read-only (host path -> sandbox path; not on the unisolated backend).
    `writable_dirs` are more places programs may write besides /work and /tmp (e.g. /logs),
    size-limited tmpfs mounts that start with the image's files there (not unisolated).
    """
    chosen = resolve_backend(backend, image)
    if chosen == "docker":
        from sandbox.backends.docker import DockerSandbox

        return DockerSandbox(
            image=image,
            limits=limits,
            env=dict(env or {}),
            binds=dict(binds or {}),
            writable_dirs=writable_dirs,
        )
    if image is not None:
        raise SandboxUnavailable(
            f"the {chosen} backend cannot use an image; drop --image or use --backend docker"
        )
    if chosen == "unisolated":
        from sandbox.backends.unisolated import UnisolatedSandbox

        return UnisolatedSandbox(
            limits=limits, env=dict(env or {}), binds=dict(binds or {}), writable_dirs=writable_dirs
        )
    from sandbox.backends.local import LocalSandbox

    return LocalSandbox(
        limits=limits, env=dict(env or {}), binds=dict(binds or {}), writable_dirs=writable_dirs
    )


def open_async_sandbox(
    backend: str = "auto",
    image: str | None = None,
    limits: SandboxLimits | None = None,
    env: Mapping[str, str] | None = None,
    binds: Mapping[str, str] | None = None,
    writable_dirs: Sequence[str] | None = None,
) -> AsyncSandbox:
    """`async with open_async_sandbox() as sb: await sb.exec(...)`."""
    return AsyncSandbox(open_sandbox(backend, image, limits, env, binds, writable_dirs))


def _backend_classes(backend: str) -> list[type[Sandbox]]:
    """The backends `backend` names: "auto" is local (whose class methods also cover the
    unisolated sandboxes), and Docker when its daemon answers; an explicit "docker" without a
    daemon raises SandboxUnavailable."""
    if backend not in BACKENDS:
        raise ValueError(f"unknown sandbox backend {backend!r}; choose one of {BACKENDS}")
    from sandbox.backends.local import LocalSandbox

    chosen: list[type[Sandbox]] = [LocalSandbox] if backend != "docker" else []
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
