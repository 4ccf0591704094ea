"""`prime env status` and `prime env uninstall`: the environments installed in a Python.

An installed environment is a distribution that declares a `prime.environments` entry point
(the contract in docs/architecture.md), or one installed from a hub (found by module name). The list is read inside the target interpreter (it may
be another virtualenv than the one running `prime`), with the distribution's `direct_url.json`
(PEP 610) telling where it came from: a wheel verified from a hub (our wheel cache), an
editable checkout, another file or URL, or a package index.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from packaging.utils import canonicalize_name

from hub_client.install import InstallError, cache_dir
from prime_env.uv_binary import find_uv
from registry_index.resolve import parse_env_id

_PROBE = r"""
import json, sys, importlib.metadata as md
hub_cache = "file://" + sys.argv[1]
found = []
for dist in md.distributions():
    eps = {ep.name: ep.value for ep in dist.entry_points if ep.group == "prime.environments"}
    direct = dist.read_text("direct_url.json")
    if not eps and not (direct and json.loads(direct).get("url", "").startswith(hub_cache)):
        continue
    found.append({
        "package": dist.metadata["Name"],
        "version": dist.version,
        "entry_points": eps,
        "direct_url": json.loads(direct) if direct else None,
    })
print(json.dumps(found))
"""


@dataclass(frozen=True)
class InstalledEnv:
    """One installed environment package."""

    package: str
    version: str
    environments: list[str]  # entry point names (what `prime eval run NAME` loads)
    source: str  # "hub OWNER", "editable PATH", "file PATH", "url URL" or "index"

    def as_json(self) -> dict[str, Any]:
        return {
            "package": self.package,
            "version": self.version,
            "environments": self.environments,
            "source": self.source,
        }


def _source(direct_url: dict[str, Any] | None) -> str:
    if not direct_url:
        return "index"
    url = str(direct_url.get("url", ""))
    parts = urlsplit(url)
    if parts.scheme != "file":
        return f"url {url}"
    path = Path(unquote(parts.path))
    if (direct_url.get("dir_info") or {}).get("editable"):
        return f"editable {path}"
    try:
        owner = path.relative_to(cache_dir()).parts[0]
    except (ValueError, IndexError):
        return f"file {path}"
    return f"hub {owner}"


def installed_environments(python: str) -> list[InstalledEnv]:
    """The environment packages installed in the interpreter `python`, by package name."""
    try:
        proc = subprocess.run(
            [python, "-c", _PROBE, str(cache_dir())],
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise InstallError(f"cannot inspect {python}: {exc}") from exc
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise InstallError(f"cannot inspect {python}: {last}")
    found = [
        InstalledEnv(
            package=str(item["package"]),
            version=str(item["version"]),
            environments=sorted(item["entry_points"]) or [str(item["package"])],
            source=_source(item.get("direct_url")),
        )
        for item in json.loads(proc.stdout)
    ]
    return sorted(found, key=lambda env: canonicalize_name(env.package))


def match_installed(names: list[str], installed: list[InstalledEnv]) -> list[InstalledEnv]:
    """The installed packages meant by `names` (NAME, OWNER/NAME[@VERSION] or package name)."""
    chosen: list[InstalledEnv] = []
    for raw in names:
        try:
            _owner, written, _spec = parse_env_id(raw)
        except ValueError as exc:
            raise InstallError(str(exc)) from None
        name = canonicalize_name(written)
        hits = [
            env
            for env in installed
            if canonicalize_name(env.package) == name
            or name in (canonicalize_name(e) for e in env.environments)
        ]
        if not hits:
            known = ", ".join(env.package for env in installed) or "none"
            raise InstallError(
                f"{raw!r} is not installed here (installed environments: {known}); "
                "see `prime env status`"
            )
        chosen.extend(env for env in hits if env not in chosen)
    return chosen


def uninstall_command(packages: list[str], python: str, installer: str) -> list[str]:
    """`uv pip uninstall` or `pip uninstall -y` of `packages` from `python`."""
    if installer == "uv":
        uv = find_uv()
        if uv is None:
            raise InstallError("uv is not installed; install it (pip install uv) or use --with pip")
        return [uv, "pip", "uninstall", "--python", python, *packages]
    return [python, "-m", "pip", "uninstall", "--yes", "--disable-pip-version-check", *packages]
