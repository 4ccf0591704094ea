"""Finding an environment by name: `prime_env.load("owner/name@1.2", **env_args)`.

First the `prime.environments` entry-point group (what `prime env init` scaffolds), then a
module named after the environment (`owner/` and `@version` stripped, `-` → `_`, as
verifiers does), so plain verifiers-style packages load too. Nothing is installed here:
installing is `prime env install`'s job.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import re
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

from registry_index.names import module_name as import_name
from registry_index.resolve import parse_env_id
from registry_index.toml_text import TomlError, parse_toml

from .environment import Environment
from .errors import EnvironmentNotFound
from .remote.isolated import find as find_isolated
from .remote.isolated import load_isolated

GROUP = "prime.environments"


def installed_environments() -> dict[str, metadata.EntryPoint]:
    """Entry points registered under `prime.environments`, by name."""
    return {ep.name: ep for ep in metadata.entry_points(group=GROUP)}


def is_local_path(env_id: str) -> bool:
    """True when `env_id` names a local environment (file, package or project directory)."""
    if env_id.startswith((".", "/", "~")) or env_id.endswith(".py"):
        return True
    path = Path(env_id)
    return path.is_dir() and ((path / "pyproject.toml").exists() or (path / "__init__.py").exists())


def load(env_id: str, **env_args: Any) -> Environment:
    """Import the environment and call its `load_environment(**env_args)`.

    `env_id` is `[owner/]name[@version]` of an installed environment, or a local path: a
    `.py` file, a package directory, or a project directory with a pyproject.toml (as
    `prime env init` creates), imported in place without installing it.
    """
    if is_local_path(env_id):
        return _load_path(Path(env_id).expanduser(), env_args)
    owner, name, _spec = parse_env_id(env_id)
    wanted = import_name(name)
    entry = _entry_point(name)
    version: str | None = None
    if entry is not None:
        factory = entry.load()
        if entry.dist is not None:
            version = entry.dist.version
        module_name = entry.module
    elif (isolated := find_isolated(name)) is not None:
        env = load_isolated(isolated, dict(env_args), f"{owner}/{name}" if owner else name)
        env.env_args = dict(env_args)
        return env
    else:
        module_name = wanted
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name != module_name:
                raise  # the environment exists but one of ITS imports is missing
            installed = sorted(installed_environments())
            how = (
                f"Install it with `prime env install {env_id}`."
                if owner
                else f"Find its owner with `prime env list -s {name}`, then install it with "
                f"`prime env install OWNER/{name}` (or give a path to its directory)."
            )
            raise EnvironmentNotFound(
                f"environment {env_id!r} is not installed (no entry point {name!r} in group "
                f"{GROUP!r} and no module {module_name!r}). Installed environments: "
                f"{', '.join(installed) if installed else 'none'}. {how}"
            ) from None
        factory = getattr(module, "load_environment", None)
        if factory is None:
            raise EnvironmentNotFound(
                f"module {module_name!r} has no load_environment(**kwargs) function"
            )
        version = _dist_version(module_name)
    env = call_factory(env_id, factory, env_args)
    env.name = env.name or (f"{owner}/{name}" if owner else name)
    env.version = env.version or version
    env.env_args = dict(env_args)
    return env


def _entry_point(name: str) -> metadata.EntryPoint | None:
    """The installed `prime.environments` entry point of environment `name` (`-`/`_` alike)."""
    wanted = import_name(name)
    found = [
        ep for ep_name, ep in installed_environments().items() if import_name(ep_name) == wanted
    ]
    return found[0] if found else None


def package_dir(env_id: str) -> Path | None:
    """The directory of the package an environment's loader lives in, where its wheel ships
    data beside the code (training recipes: `<package>/train/`), found without importing or
    calling anything. None for a single-file environment; EnvironmentNotFound when it is not
    installed."""
    if is_local_path(env_id):
        path = Path(env_id).expanduser().resolve()
        if not path.exists():
            return None
        root, module_name, _attr, _name, _version = _path_target(path)
        top = root / module_name.split(".")[0]
        return top if top.is_dir() else None
    _owner, name, _spec = parse_env_id(env_id)
    entry = _entry_point(name)
    if entry is None and (isolated := find_isolated(name)) is not None:
        return Path(isolated.package_dir) if isolated.package_dir else None
    module_name = entry.module if entry is not None else import_name(name)
    spec = importlib.util.find_spec(module_name.split(".")[0])
    if spec is None:
        raise EnvironmentNotFound(f"environment {env_id!r} is not installed")
    if not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def _dist_version(module_name: str) -> str | None:
    top = module_name.split(".")[0]
    for dist_name in metadata.packages_distributions().get(top, []):
        try:
            return metadata.version(dist_name)
        except metadata.PackageNotFoundError:
            continue
    return None


def call_factory(env_id: str, factory: Any, env_args: dict[str, Any]) -> Environment:
    """Call a `load_environment` with `env_args`, turning a signature mismatch into a clear error
    that lists the arguments the environment accepts (shared by name, path and eval loading)."""
    try:
        bound = inspect.signature(factory).bind(**env_args)
    except TypeError as exc:
        params = [
            p
            for p in inspect.signature(factory).parameters.values()
            if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
        ]
        accepted = ", ".join(p.name for p in params) or "no arguments"
        raise TypeError(
            f"environment {env_id!r}: {exc}; load_environment accepts: {accepted}"
        ) from None
    env = factory(*bound.args, **bound.kwargs)
    if not isinstance(env, Environment):
        raise TypeError(
            f"environment {env_id!r}: load_environment returned {type(env).__name__}, "
            "expected a prime_env.Environment"
        )
    return env


def _path_target(path: Path) -> tuple[Path, str, str, str, str | None]:
    """(import root, module, loader function, name, version) of a working copy: a `.py` file,
    a project with a pyproject.toml (its entry point, else `<name>:load_environment`) or a
    package directory."""
    attr = "load_environment"
    if path.is_file():
        return path.parent, path.stem, attr, path.stem, None
    if (path / "pyproject.toml").exists():
        pyproject = path / "pyproject.toml"
        try:
            project = parse_toml(pyproject.read_bytes(), str(pyproject)).get("project", {})
        except TomlError as exc:
            raise EnvironmentNotFound(str(exc)) from None
        name = str(project.get("name") or path.name)
        version = project.get("version")
        entry = project.get("entry-points", {}).get(GROUP, {})
        target = next(iter(entry.values()), None) if entry else None
        module_name, _, attr = (target or f"{import_name(name)}:load_environment").partition(":")
        root = path / "src" if (path / "src" / module_name.split(".")[0]).exists() else path
        return root, module_name, attr, name, version
    if (path / "__init__.py").exists():
        return path.parent, path.name, attr, path.name, None
    raise EnvironmentNotFound(
        f"{path} is neither a .py file, a package (with __init__.py) nor a project (with pyproject.toml)"
    )


def _foreign_framework(path: Path) -> str | None:
    """The framework the project at `path` depends on ("verifiers"), or None."""
    pyproject = path / "pyproject.toml"
    if not pyproject.is_file():
        return None
    try:
        project = parse_toml(pyproject.read_bytes(), str(pyproject)).get("project", {})
    except TomlError:
        return None
    for line in project.get("dependencies") or []:
        name = re.split(r"[\s\[<>=!~;(@]", str(line), maxsplit=1)[0].lower().replace("_", "-")
        if name == "verifiers":
            return name
    return None


def _load_path(path: Path, env_args: dict[str, Any]) -> Environment:
    """Import an environment from a working copy: the author's edit-run loop needs no install."""
    path = path.resolve()
    if not path.exists():
        raise EnvironmentNotFound(f"{path}: no such file or directory")
    root, module_name, attr, name, version = _path_target(path)
    foreign = _foreign_framework(path)
    if foreign is not None:
        raise EnvironmentNotFound(
            f"{path} is a {foreign} package, which runs in a virtualenv of its own: push it "
            f"(`prime env push {path}`) and install it (`prime env install OWNER/{name}`), then "
            f"evaluate OWNER/{name}"
        )
    top = module_name.split(".")[0]
    existing = sys.modules.get(top)
    if existing is not None and not str(getattr(existing, "__file__", "") or "").startswith(
        str(root)
    ):
        raise EnvironmentNotFound(
            f"module {top!r} is already imported from {existing.__file__}; cannot also load it from {path}"
        )
    sys.path.insert(0, str(root))
    importlib.invalidate_caches()
    module = importlib.import_module(module_name)
    factory = getattr(module, attr or "load_environment", None)
    if factory is None:
        raise EnvironmentNotFound(
            f"{path}: module {module_name!r} has no {attr or 'load_environment'}()"
        )
    env = call_factory(str(path), factory, env_args)
    env.name = env.name or name
    env.version = env.version or version
    env.env_args = dict(env_args)
    return env
