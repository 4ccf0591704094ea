"""`prime env install`: install hub environments into a Python environment without confusion.

Design (dependency confusion is impossible by construction):
1. Each `OWNER/NAME[@SPEC]` is resolved through the hub's REST API first. An unknown or
   invisible name is a 404 and the install stops there: the name is never looked up anywhere
   else, so a same-named package on PyPI (or any other index) can never be installed instead.
2. The exact wheel the hub reported is downloaded from the hub (with the token, so private
   environments work) and its sha256 is checked against the hub's record.
3. The installer (uv when present, else pip) is given the *local wheel file*, never the
   environment's name, and no hub index: the environment can only come from that file, and its
   dependencies come only from the user's normal index configuration (pip.conf, uv.toml,
   PIP_INDEX_URL, UV_INDEX_URL, …), so a hub upload can never shadow a dependency either.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from packaging.utils import canonicalize_name

from prime_cli.hub_client import HubClient, HubError, NotFound, env_path
from registry_index.resolve import EnvRef


class InstallError(Exception):
    """The install cannot proceed; the message says why and how to fix it."""


@dataclass(frozen=True)
class ResolvedEnv:
    """The hub's install record for one reference, plus the verified local wheel."""

    ref: EnvRef
    package_name: str
    version: str
    visibility: str
    yanked: bool
    yanked_reason: str | None
    wheel_url: str
    wheel_sha256: str
    wheel_filename: str


def cache_dir() -> Path:
    """Where verified wheels are kept (`$XDG_CACHE_HOME/prime/wheels`)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "prime" / "wheels"


def resolve(client: HubClient, ref: EnvRef) -> ResolvedEnv:
    """Ask the hub which exact version and wheel `ref` means; NotFound for unknown names."""
    spec = ref.spec or "latest"
    what = f"resolve {ref}"
    try:
        data: dict[str, Any] = client.data(
            "GET", f"{env_path(ref.owner, ref.name)}/@{quote(spec, safe='')}", what
        )
    except NotFound as exc:
        raise NotFound(
            f"{str(exc).rstrip('.')}; nothing was installed (environments are looked up only on "
            "the hub, never on another index)",
            exc.status,
        ) from exc
    if not data.get("wheel_url") or not data.get("wheel_sha256"):
        raise HubError(
            f"{ref.owner}/{ref.name} {data.get('semantic_version')} has no wheel on the hub; "
            "its author must push one (`prime env push`)"
        )
    return ResolvedEnv(
        ref=ref,
        package_name=str(data["package_name"]),
        version=str(data["semantic_version"]),
        visibility=str(data.get("visibility", "public")),
        yanked=bool(data.get("yanked")),
        yanked_reason=data.get("yanked_reason"),
        wheel_url=str(data["wheel_url"]),
        wheel_sha256=str(data["wheel_sha256"]).lower(),
        wheel_filename=str(data.get("wheel_filename") or data["wheel_url"].rsplit("/", 1)[-1]),
    )


def check_distinct_packages(envs: list[ResolvedEnv]) -> None:
    """Two references that are the same Python package (e.g. alice/x and bob/x) cannot both be
    installed in one environment; say so instead of silently installing one of them."""
    seen: dict[str, ResolvedEnv] = {}
    for env in envs:
        key = canonicalize_name(env.package_name)
        other = seen.setdefault(key, env)
        if other is not env and (other.ref.owner, other.version) != (env.ref.owner, env.version):
            raise InstallError(
                f"{other.ref.owner}/{other.ref.name}@{other.version} and "
                f"{env.ref.owner}/{env.ref.name}@{env.version} are the same Python package "
                f"{env.package_name!r}; install only one of them"
            )


def fetch_wheel(client: HubClient, env: ResolvedEnv) -> Path:
    """The verified wheel on disk (downloaded once; cached by owner and sha256)."""
    if (
        "/" in env.wheel_filename
        or "\\" in env.wheel_filename
        or not env.wheel_filename.endswith(".whl")
    ):
        raise HubError(f"the hub returned an invalid wheel filename {env.wheel_filename!r}")
    dest = cache_dir() / env.ref.owner / env.wheel_sha256[:16] / env.wheel_filename
    if dest.is_file() and _sha256(dest) == env.wheel_sha256:
        return dest
    return client.download(env.wheel_url, dest, sha256=env.wheel_sha256)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def find_uv() -> str | None:
    """The uv binary: the one shipped in the `uv` wheel next to us, else one on PATH."""
    try:
        import uv

        return str(uv.find_uv_bin())
    except (ImportError, FileNotFoundError):
        return shutil.which("uv")


def target_python(python: str | None) -> str:
    """The interpreter to install into: `--python`, else the one running `prime`."""
    path = python or sys.executable
    resolved = shutil.which(path) if os.sep not in path else path
    if not resolved or not os.access(resolved, os.X_OK):
        raise InstallError(f"--python {path!r} is not an executable Python interpreter")
    return resolved


def install_command(
    wheels: dict[str, Path], python: str, installer: str, *, prerelease: bool = False
) -> list[str]:
    """The installer invocation for `{package_name: wheel}`: local files only, no hub index.

    uv is told to reinstall these packages, so a same-named, same-version package that came
    from elsewhere is replaced by the hub's wheel instead of being kept as "already satisfied".
    """
    files = [str(path) for path in wheels.values()]
    if installer == "uv":
        uv = find_uv()
        if uv is None:
            raise InstallError("uv is not installed; install it (pip install uv) or use --with pip")
        cmd = [uv, "pip", "install", "--python", python]
        for package in wheels:
            cmd += ["--reinstall-package", package]
        if prerelease:
            cmd.append("--prerelease=allow")
        return cmd + files
    cmd = [python, "-m", "pip", "install", "--disable-pip-version-check"]
    if prerelease:
        cmd.append("--pre")
    return cmd + files


def choose_installer(requested: str) -> str:
    """`auto` means uv when present, else pip (which must be importable by the target)."""
    if requested != "auto":
        return requested
    return "uv" if find_uv() else "pip"


def run_installer(cmd: list[str]) -> None:
    """Run the installer with its output on stderr (stdout is for our result, e.g. JSON).

    A failure becomes an InstallError.
    """
    try:
        proc = subprocess.run(cmd, check=False, stdout=sys.stderr)
    except OSError as exc:
        raise InstallError(f"cannot run {cmd[0]}: {exc.strerror}") from exc
    if proc.returncode != 0:
        if "-m" in cmd and "pip" in cmd:
            hint = " (does the target Python have pip? try --with uv)"
        else:
            hint = ""
        raise InstallError(f"the installer failed with exit status {proc.returncode}{hint}")


__all__ = [
    "InstallError",
    "NotFound",
    "ResolvedEnv",
    "choose_installer",
    "fetch_wheel",
    "install_command",
    "resolve",
    "run_installer",
    "target_python",
]
