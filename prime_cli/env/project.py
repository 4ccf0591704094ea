"""An environment project on disk: its `pyproject.toml` facts, and building its distributions.

`prime env build` and `prime env push` share this so that a push always publishes exactly what
a build produces. Builds use the `build` package (PEP 517); when the project's build backend is
already importable here the build runs in this interpreter (fast, offline), otherwise in an
isolated environment as `python -m build` does.
"""

from __future__ import annotations

import ast
import gzip
import io
import re
import tarfile
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version
from pydantic import ValidationError
from pyproject_hooks import quiet_subprocess_runner

from hub_client.isolated import framework
from registry_index.files import write_atomic
from registry_index.names import module_name
from registry_index.rubric_spec import RubricSpec, rubric_from_pyproject
from registry_index.toml_text import TomlError, parse_toml


class ProjectError(Exception):
    """The project cannot be built or published as it is; the message says how to fix it."""


@dataclass(frozen=True)
class EnvProject:
    """The facts `prime env push` needs from `[project]` in pyproject.toml."""

    root: Path
    name: str
    version: str
    description: str
    tags: list[str]
    license: str | None
    dependencies: list[str]
    requires_python: str | None
    entry_points: dict[str, str] = field(default_factory=dict)
    # `[tool.prime.rubric]`: each reward function's weight and range, sent with the version.
    rubric: RubricSpec | None = None

    @property
    def normalized_name(self) -> str:
        return canonicalize_name(self.name)


def _string_list(value: object, what: str, path: Path) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ProjectError(f"{path}: {what} must be a list of strings")
    return list(value)


def _tags(project: dict[str, object], tool: dict[str, object], path: Path) -> list[str]:
    """Hub tags: `[tool.prime] tags`, else the stock client's `[project] tags`, else keywords.

    setuptools rejects unknown `[project]` keys, so the scaffold uses the standard `keywords`.
    """
    if "tags" in tool:
        return _string_list(tool["tags"], "[tool.prime] tags", path)
    if "tags" in project:
        return _string_list(project["tags"], "[project] tags", path)
    return _string_list(project.get("keywords"), "[project] keywords", path)


def load_project(root: Path) -> EnvProject:
    """Read and check `root/pyproject.toml`; raise ProjectError with a fix on any problem."""
    root = root.resolve()
    path = root / "pyproject.toml"
    if not root.is_dir():
        raise ProjectError(f"{root} is not a directory")
    if not path.is_file():
        raise ProjectError(
            f"no pyproject.toml in {root}; run `prime env init NAME` to create an environment, "
            "or pass the environment's directory"
        )
    try:
        data = parse_toml(path.read_bytes(), str(path))
    except TomlError as exc:
        raise ProjectError(str(exc)) from None
    project = data.get("project")
    if not isinstance(project, dict):
        raise ProjectError(f"{path} has no [project] table (PEP 621)")
    name, version = project.get("name"), project.get("version")
    if not isinstance(name, str) or not name:
        raise ProjectError(f"{path}: [project] name is missing")
    if "version" in project.get("dynamic", []) or not isinstance(version, str):
        raise ProjectError(f'{path}: set a static [project] version (e.g. version = "0.1.0")')
    try:
        parsed = Version(version)
    except InvalidVersion as exc:
        raise ProjectError(f"{path}: version {version!r} is not a valid PEP 440 version") from exc
    if parsed.local:
        raise ProjectError(
            f"{path}: local versions like {version!r} cannot be published; drop the '+…' part"
        )
    dependencies = _string_list(project.get("dependencies"), "[project] dependencies", path)
    for dep in dependencies:
        try:
            Requirement(dep)
        except InvalidRequirement as exc:
            raise ProjectError(f"{path}: invalid dependency {dep!r}: {exc}") from exc
    license_value = project.get("license")
    if isinstance(license_value, dict):
        license_value = license_value.get("text")
    entry_points = project.get("entry-points", {}).get("prime.environments", {})
    tool = data.get("tool", {}).get("prime", {})
    try:
        rubric = rubric_from_pyproject(tool) if isinstance(tool, dict) else None
    except ValueError as exc:
        first = exc.errors()[0] if isinstance(exc, ValidationError) else None
        where = ".".join(str(p) for p in first["loc"]) if first else ""
        why = str(first["msg"]).removeprefix("Value error, ") if first else str(exc)
        raise ProjectError(
            f"{path}: [tool.prime.rubric]{'.' + where if where else ''}: {why}"
        ) from None
    return EnvProject(
        root=root,
        name=name,
        version=str(parsed),
        description=str(project.get("description") or ""),
        tags=_tags(project, data.get("tool", {}).get("prime", {}), path),
        license=license_value if isinstance(license_value, str) else None,
        dependencies=dependencies,
        requires_python=project.get("requires-python"),
        entry_points=dict(entry_points) if isinstance(entry_points, dict) else {},
        rubric=rubric,
    )


@dataclass(frozen=True)
class BuiltDists:
    wheel: Path
    sdist: Path | None


def build_distributions(
    project: EnvProject,
    out_dir: Path,
    *,
    sdist: bool = True,
    isolated: bool | None = None,
    on_step: Callable[[str], None] = lambda step: None,
) -> BuiltDists:
    """Build the wheel (and sdist) of `project` into `out_dir` with the `build` package.

    `isolated=None` builds in this interpreter when the backend's requirements are already
    installed here, else in a fresh isolated environment; True/False force one or the other.
    """
    import build
    import build.env

    out_dir.mkdir(parents=True, exist_ok=True)
    try:
        builder = build.ProjectBuilder(project.root, runner=quiet_subprocess_runner)
    except build.BuildException as exc:
        raise ProjectError(f"cannot build {project.root}: {exc}") from exc
    use_isolation = isolated
    if use_isolation is None:
        use_isolation = bool(builder.check_dependencies("wheel"))
    distributions: list[Literal["wheel", "sdist"]] = ["wheel", "sdist"] if sdist else ["wheel"]
    built: dict[str, Path] = {}
    try:
        for kind in distributions:
            if use_isolation:
                with build.env.DefaultIsolatedEnv() as env:
                    on_step("installing the build backend in an isolated environment")
                    isolated_builder = build.ProjectBuilder.from_isolated_env(
                        env, project.root, runner=quiet_subprocess_runner
                    )
                    env.install(isolated_builder.build_system_requires)
                    env.install(isolated_builder.get_requires_for_build(kind))
                    on_step(f"building the {kind}")
                    built[kind] = Path(isolated_builder.build(kind, out_dir))
            else:
                on_step(f"building the {kind}")
                built[kind] = Path(builder.build(kind, out_dir))
    except build.BuildBackendException as exc:
        raise ProjectError(f"building {project.name} failed: {exc}{_backend_output(exc)}") from exc
    except build.BuildException as exc:
        raise ProjectError(f"building {project.name} failed: {exc}") from exc
    return BuiltDists(wheel=built["wheel"], sdist=built.get("sdist"))


def _backend_output(exc: Exception) -> str:
    """The last lines the build backend printed (captured by the quiet runner)."""
    cause = getattr(exc, "exception", None)
    output = getattr(cause, "output", None)
    if not isinstance(output, bytes) or not output.strip():
        return ""
    lines = output.decode("utf-8", "replace").strip().splitlines()[-15:]
    return "\n  backend output:\n    " + "\n    ".join(lines)


def source_archive(
    project: EnvProject, files: list[Path], content_hash: str, out_dir: Path
) -> Path:
    """Write the source archive that `prime env pull` gives back: `NAME-VERSION-HASH8.tar.gz`.

    Members are the content-hash file set, relative to the project root, with normalised
    owner/mode/mtime so that the same tree always gives the same archive bytes.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    filename = (
        f"{project.normalized_name.replace('-', '_')}-{project.version}-{content_hash[:8]}.tar.gz"
    )
    dest = out_dir / filename
    with tempfile.NamedTemporaryFile(dir=out_dir, prefix=".src-", delete=False) as tmp:
        tmp_path = Path(tmp.name)
        try:
            with (
                gzip.GzipFile(filename="", fileobj=tmp, mode="wb", mtime=0) as gz,
                tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar,
            ):
                for path in sorted(files):
                    rel = path.relative_to(project.root).as_posix()
                    info = tarfile.TarInfo(rel)
                    data = path.read_bytes()
                    info.size, info.mode, info.mtime = len(data), 0o644, 0
                    tar.addfile(info, io.BytesIO(data))
        except BaseException:
            tmp_path.unlink(missing_ok=True)
            raise
    tmp_path.replace(dest)
    return dest


ENTRY_POINT_GROUP = "prime.environments"
FACTORY = "load_environment"


def _module_file(root: Path, module: str) -> Path | None:
    """The source file of `module` inside the project (flat or `src/` layout), if any."""
    parts = module.split(".")
    for base in (root, root / "src"):
        for candidate in (
            base.joinpath(*parts).with_suffix(".py"),
            base.joinpath(*parts) / "__init__.py",
        ):
            if candidate.is_file():
                return candidate
    return None


def _defines(path: Path, name: str) -> bool:
    """Whether the module at `path` binds `name` at top level (def, assignment or import)."""
    try:
        tree = ast.parse(path.read_bytes(), filename=str(path))
    except (SyntaxError, ValueError) as exc:
        raise ProjectError(f"{path} does not parse: {exc}") from exc
    bound: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            bound.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            bound.update(t.id for t in targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.ImportFrom | ast.Import):
            bound.update(alias.asname or alias.name.split(".")[0] for alias in node.names)
    return name in bound


def check_environment(project: EnvProject) -> str:
    """Check, before anything is built or uploaded, that the project provides an environment.

    `prime_env.load` finds an environment by its `prime.environments` entry point, else by the
    module named after the project; either must define the factory. Returns `module:attr`.
    """
    pyproject = project.root / "pyproject.toml"
    for name, target in project.entry_points.items():
        module, _, attr = str(target).partition(":")
        attr = attr.split("[")[0].strip() or FACTORY
        path = _module_file(project.root, module.strip())
        if path is None:
            raise ProjectError(
                f'{pyproject}: entry point {name} = "{target}" names module {module.strip()!r}, '
                "which is not in the project; fix the entry point or add the module"
            )
        if not _defines(path, attr.split(".")[0]):
            raise ProjectError(
                f'{pyproject}: entry point {name} = "{target}" names {attr!r}, which '
                f"{path.relative_to(project.root)} does not define"
            )
        return f"{module.strip()}:{attr}"
    module = module_name(project.normalized_name)
    path = _module_file(project.root, module)
    kind = framework(project.dependencies)
    if kind == "verifiers":  # verifiers' contract: the package exports its Taskset in __all__
        if path is None or not _defines(path, "__all__"):
            raise ProjectError(
                f"{project.root} depends on verifiers but module {module!r} does not define "
                "`__all__`; a verifiers package exports its Taskset subclass (and its Env or "
                "Harness, if any) in `__all__`"
            )
        return f"{module}:__all__"
    hint = (
        f"define `def {FACTORY}(**kwargs) -> prime_env.Environment` in {module}.py, or declare "
        f'[project.entry-points."{ENTRY_POINT_GROUP}"] {project.name} = "MODULE:{FACTORY}" '
        f"in {pyproject}"
    )
    if path is None:
        raise ProjectError(f"{project.root} has no environment: no module {module!r}; {hint}")
    if not _defines(path, FACTORY):
        raise ProjectError(
            f"{path.relative_to(project.root)} does not define {FACTORY}, so the environment "
            f"could not be loaded after install; {hint}"
        )
    return f"{module}:{FACTORY}"


BUMPS = ("patch", "rc", "post")


def bumped_version(version: str, kind: str) -> str:
    """The next version: `patch` 1.2.3 → 1.2.4; `rc` 1.2.3 → 1.2.4rc0, 1.2.4rc0 → 1.2.4rc1;
    `post` 1.2.3 → 1.2.3.post0, 1.2.3.post0 → 1.2.3.post1 (the stock client's --auto-bump,
    --rc and --post)."""
    parsed = Version(version)
    release = list(parsed.release) + [0] * (3 - len(parsed.release))
    base = ".".join(str(part) for part in release)
    if kind == "patch":
        if parsed.pre is not None:  # 1.2.4rc1 → 1.2.4: the release the candidate was for
            return base
        release[-1] += 1
        return ".".join(str(part) for part in release)
    if kind == "rc":
        if parsed.pre is not None and parsed.pre[0] == "rc":
            return f"{base}rc{parsed.pre[1] + 1}"
        release[-1] += 1
        return ".".join(str(part) for part in release) + "rc0"
    if kind == "post":
        stem = base if parsed.pre is None else f"{base}{parsed.pre[0]}{parsed.pre[1]}"
        return f"{stem}.post{0 if parsed.post is None else parsed.post + 1}"
    raise ValueError(f"unknown bump {kind!r}; one of {', '.join(BUMPS)}")


_VERSION_LINE = re.compile(r"""^(\s*version\s*=\s*)(["'])([^"']*)\2""", re.MULTILINE)


def write_version(project: EnvProject, version: str) -> EnvProject:
    """Set `[project] version` in pyproject.toml (only that line changes) and reload."""
    path = project.root / "pyproject.toml"
    text = path.read_text("utf-8")
    start = re.search(r"^\[project\]\s*$", text, re.MULTILINE)
    if start is None:
        raise ProjectError(f"{path} has no [project] table")
    end = re.search(r"^\[", text[start.end() :], re.MULTILINE)
    stop = start.end() + (end.start() if end else len(text) - start.end())
    section = text[start.end() : stop]
    match = _VERSION_LINE.search(section)
    if match is None:
        raise ProjectError(f"{path}: no static version line in [project] to bump")
    section = (
        section[: match.start()]
        + f"{match.group(1)}{match.group(2)}{version}{match.group(2)}"
        + section[match.end() :]
    )
    write_atomic(path, text[: start.end()] + section + text[stop:])
    return load_project(project.root)
