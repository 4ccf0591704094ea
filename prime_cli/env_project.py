"""An environment project on disk: its `pyproject.toml` facts, and building its distributions.

`prime env build` and `prime env push` share this so that a push always publishes exactly what
a build produces. Builds use the `build` package (PEP 517); when the project's build backend is
already importable here the build runs in this interpreter (fast, offline), otherwise in an
isolated environment as `python -m build` does.
"""

from __future__ import annotations

import gzip
import io
import tarfile
import tempfile
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version
from pyproject_hooks import quiet_subprocess_runner


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
        data = tomllib.loads(path.read_text("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ProjectError(f"{path} is not valid TOML: {exc}") from exc
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
    )


@dataclass(frozen=True)
class BuiltDists:
    wheel: Path
    sdist: Path | None


def build_distributions(
    project: EnvProject, out_dir: Path, *, sdist: bool = True, isolated: bool | None = None
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
                    isolated_builder = build.ProjectBuilder.from_isolated_env(
                        env, project.root, runner=quiet_subprocess_runner
                    )
                    env.install(isolated_builder.build_system_requires)
                    env.install(isolated_builder.get_requires_for_build(kind))
                    built[kind] = Path(isolated_builder.build(kind, out_dir))
            else:
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
