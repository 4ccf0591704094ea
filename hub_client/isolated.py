"""Installing an environment into a virtualenv of its own, when it cannot share this Python.

Three cases get one (prime_env.remote.isolated says where, and how they are then run):
- a verifiers package (it requires `verifiers`): verifiers pins `openai<3` and `mcp==2.0.0`,
  the SDK needs `openai>=3.57` and `mcp>=2.3`, and its rollouts run in verifiers' own machinery;
- an environment of this SDK whose dependencies would change a package the target Python
  already has (a dry run of the install with everything installed there pinned fails).
The virtualenv uses the target's interpreter version, is built under a temporary name and
renamed into place once complete, so a failed install leaves the previous one as it was.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import uuid
import zipfile
from collections.abc import Callable
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from prime_env.remote.isolated import RECORD, IsolatedEnv, envs_home

FRAMEWORKS = {"verifiers": "verifiers"}
"""A requirement on one of these makes an environment of that kind (its worker's adapter)."""


class IsolatedInstallError(Exception):
    """The environment's own virtualenv could not be made; the message says why."""


def framework(requires: list[str]) -> str | None:
    """The framework the wheel's Requires-Dist names ("verifiers"), or None."""
    for line in requires:
        try:
            requirement = Requirement(line)
        except InvalidRequirement:
            continue
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
            continue
        kind = FRAMEWORKS.get(canonicalize_name(requirement.name))
        if kind:
            return kind
    return None


def clashes(uv: str, python: str, wheels: list[Path]) -> str | None:
    """Why installing `wheels` into `python` would change what is installed there (uv's own
    words), or None when it would only add packages. A dry run with every distribution
    installed there pinned must fail where one without the pins succeeds: a requirement no
    index satisfies is not a clash (the real install names it)."""
    frozen = subprocess.run(
        [uv, "pip", "freeze", "--python", python], capture_output=True, text=True, check=False
    )
    pins = [line for line in frozen.stdout.splitlines() if "==" in line and "@" not in line]
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as handle:
        handle.write("\n".join(pins) + "\n")
        constraints = handle.name
    dry = [uv, "pip", "install", "--dry-run", "--python", python, *map(str, wheels)]
    try:
        pinned = subprocess.run(
            [*dry, "--constraints", constraints], capture_output=True, text=True, check=False
        )
    finally:
        Path(constraints).unlink(missing_ok=True)
    if pinned.returncode == 0:
        return None
    if subprocess.run(dry, capture_output=True, text=True, check=False).returncode != 0:
        return None
    lines = [ln.strip() for ln in pinned.stderr.splitlines() if ln.strip()]
    reason = next((ln for ln in lines if "because" in ln.lower()), lines[-1] if lines else "")
    return reason.removeprefix("╰─▶ ").strip() or f"uv exited with status {pinned.returncode}"


def top_module(wheel: Path) -> str:
    """The import name a wheel installs (its first top-level package or module)."""
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    packages = sorted(
        {n.split("/")[0] for n in names if n.count("/") == 1 and n.endswith("/__init__.py")}
    )
    modules = sorted(n[:-3] for n in names if "/" not in n and n.endswith(".py"))
    found = packages or modules
    if not found:
        raise IsolatedInstallError(f"{wheel.name} installs no importable module")
    return found[0]


def install_isolated(
    *,
    env: str,
    package: str,
    version: str,
    kind: str,
    wheels: list[Path],
    python: str,
    uv: str,
    run: Callable[[list[str]], None],
) -> IsolatedEnv:
    """Build `<home>/<package>/venv` with `wheels` (the environment's first) and record it.
    `run` runs an installer command (the caller's, with its output and error explanations)."""
    home = envs_home()
    home.mkdir(parents=True, exist_ok=True)
    name = canonicalize_name(package)
    final = home / name
    staging = home / f".{name}.{uuid.uuid4().hex[:8]}"
    module = top_module(wheels[0])
    try:
        made = subprocess.run(
            [uv, "venv", "--quiet", "--python", python, str(staging / "venv")],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        if made.returncode != 0:
            raise IsolatedInstallError(
                f"cannot create a virtualenv for {env}: {made.stderr.strip() or made.returncode}"
            )
        venv_python = staging / "venv" / "bin" / "python"
        run([uv, "pip", "install", "--python", str(venv_python), *map(str, wheels)])
        site = subprocess.run(
            [str(venv_python), "-I", "-c",
             ("import importlib.util, sys; s = importlib.util.find_spec(sys.argv[1]); "
             "print(next(iter(s.submodule_search_locations or []), ''))"), module],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        located = site.stdout.strip()
        package_dir = (
            str(final / Path(located).relative_to(staging))
            if located.startswith(str(staging))
            else None
        )
        record = IsolatedEnv(
            env=env,
            package=package,
            version=version,
            kind=kind,
            module=module,
            python=str(final / "venv" / "bin" / "python"),
            package_dir=package_dir,
        )
        (staging / RECORD).write_text(_json(record), "utf-8")
        old = home / f".{name}.old.{uuid.uuid4().hex[:8]}"
        if final.exists():
            final.rename(old)
        staging.rename(final)
        shutil.rmtree(old, ignore_errors=True)
        return record
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _json(record: IsolatedEnv) -> str:
    import json

    return json.dumps(record.to_json(), indent=2) + "\n"
