"""Helpers shared by every test layer."""

from __future__ import annotations

import os
import socket
from importlib import metadata

import pytest


def require(available: bool, what: str) -> None:
    """Skip when a component is missing on a developer machine; fail in CI, where .ci/run installs it."""
    if available:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"{what} is required in CI (.ci/run installs and starts it)")
    pytest.skip(f"{what} is not available here")


def free_port() -> int:
    """A free TCP port on the loopback interface."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def distributions_installed(*names: str) -> bool:
    """True when every named distribution is installed (what `require` is usually asked)."""
    try:
        for name in names:
            metadata.version(name)
    except metadata.PackageNotFoundError:
        return False
    return True
