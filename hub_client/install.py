"""Installing hub environments into a Python, with dependency confusion impossible by design.

A reference is resolved only by the hub (an unknown name stops there, it never falls through to
another index); the exact wheel the hub names, and the hub's SDK wheel when the target lacks a
version it accepts, are downloaded, hash-checked and validated as uploads are; the installer gets
those local files and no hub index (docs/cli.md, "Installing"). A requirement naming a project
of the environment's own namespace is resolved on the hub the same way (in any spelling), or
the install stops: it never reaches another index (`namespace_dependencies`). `prime env
install` and `ensure_installed` (the install-on-demand of `prime eval run` and `prime train`)
share `install_environments`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urljoin

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from hub_client.client import HubClient, HubError, NotFound
from hub_client.feedback import Feedback
from hub_client.isolated import IsolatedInstallError, clashes, framework, install_isolated
from hub_client.settings import load_settings
from prime_env.uv_binary import find_uv
from registry_index.content_hash import file_sha256
from registry_index.errors import InvalidUpload
from registry_index.resolve import EnvRef, parse_env_ref, select_version
from registry_index.sdk import SDK_DISTRIBUTION, SDK_OWNER, is_sdk_name
from registry_index.user_dirs import cache_home
from registry_index.validation import validate_distribution


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
    return cache_home() / "wheels"


def resolve(client: HubClient, ref: EnvRef) -> ResolvedEnv:
    """Ask the hub which exact version and wheel `ref` means; NotFound for unknown names."""
    try:
        record = client.version(ref.owner, ref.name, ref.spec, what=f"resolve {ref}")
    except NotFound as exc:
        raise NotFound(
            f"{str(exc).rstrip('.')}; nothing was installed (environments are looked up only on "
            "the hub, never on another index)",
            exc.status,
        ) from exc
    if not record.wheel_url or not record.wheel_sha256:
        raise HubError(
            f"{ref.owner}/{ref.name} {record.semantic_version} has no wheel on the hub; "
            "its author must push one (`prime env push`)"
        )
    return ResolvedEnv(
        ref=ref,
        package_name=record.package_name,
        version=record.semantic_version,
        visibility=record.visibility,
        yanked=record.yanked,
        yanked_reason=record.yanked_reason,
        wheel_url=record.wheel_url,
        wheel_sha256=record.wheel_sha256.lower(),
        wheel_filename=record.wheel_filename or record.wheel_url.rsplit("/", 1)[-1],
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


def _check_filename(filename: str) -> None:
    if "/" in filename or "\\" in filename or not filename.endswith(".whl"):
        raise HubError(f"the hub returned an invalid wheel filename {filename!r}")


def fetch_wheel(client: HubClient, env: ResolvedEnv) -> Path:
    """The verified wheel on disk (downloaded once; cached by owner and sha256)."""
    _check_filename(env.wheel_filename)
    dest = cache_dir() / env.ref.owner / env.wheel_sha256[:16] / env.wheel_filename
    if not (dest.is_file() and file_sha256(dest) == env.wheel_sha256):
        client.download(env.wheel_url, dest, sha256=env.wheel_sha256)
    return dest


def check_archive(path: Path, what: str) -> list[str]:
    """Validate a wheel the hub served exactly as the hub validates uploads; its Requires-Dist.

    Caps member count, decompressed size and expansion ratio (a hostile hub may serve a zip
    bomb) and checks RECORD, so nothing is handed to an installer that an upload would fail.
    """
    try:
        return validate_distribution(path, path.name).metadata.requires_dist
    except InvalidUpload as exc:
        path.unlink(missing_ok=True)
        raise InstallError(
            f"the hub served a wheel for {what} that fails validation, nothing was installed: {exc}"
        ) from None


# --------------------------------------------------------------------------- the SDK


@dataclass(frozen=True)
class SdkNeed:
    """What the environments being installed ask of the SDK (all their requirements on it)."""

    requirements: list[Requirement] = field(default_factory=list)
    wanted_by: list[str] = field(default_factory=list)

    def accepts(self, version: str) -> bool:
        try:
            parsed = Version(version)
        except InvalidVersion:
            return False
        return all(r.specifier.contains(parsed, prereleases=True) for r in self.requirements)

    def describe(self) -> str:
        return ", ".join(f"{w} needs {r}" for w, r in zip(self.wanted_by, self.requirements))


def sdk_need(requires: dict[str, list[str]]) -> SdkNeed:
    """Collect `{environment: Requires-Dist}` entries that name the SDK (any spelling)."""
    need = SdkNeed()
    for wanted_by, lines in requires.items():
        for line in lines:
            try:
                requirement = Requirement(line)
            except InvalidRequirement:
                continue
            if is_sdk_name(requirement.name) and (
                requirement.marker is None or requirement.marker.evaluate({"extra": ""})
            ):
                need.requirements.append(requirement)
                need.wanted_by.append(wanted_by)
    return need


def installed_version(python: str, distribution: str) -> str | None:
    """The version of `distribution` installed for `python` (isolated mode: as installers see it)."""
    code = (
        "import importlib.metadata as m, sys\n"
        "try: print(m.version(sys.argv[1]))\n"
        "except m.PackageNotFoundError: print('')"
    )
    try:
        proc = subprocess.run(
            [python, "-I", "-c", code, distribution], capture_output=True, text=True, check=False
        )
    except OSError as exc:
        raise InstallError(f"cannot run {python}: {exc.strerror}") from exc
    return (proc.stdout.strip() or None) if proc.returncode == 0 else None


def fetch_sdk(client: HubClient, need: SdkNeed) -> Path:
    """Download, hash-check and validate the SDK wheel the hub serves; it must satisfy `need`."""
    base = client.base_url.rstrip("/")
    page_url = f"{base}/{SDK_OWNER}/simple/{SDK_DISTRIBUTION}/"
    with tempfile.TemporaryDirectory(prefix="prime-sdk-") as tmp:
        try:
            page_file = client.download(
                page_url + "?format=application/vnd.pypi.simple.v1%2Bjson",
                Path(tmp) / "page.json",
                label="SDK index",
            )
        except NotFound:
            raise InstallError(
                f"the hub at {base} does not serve the environment SDK ({SDK_DISTRIBUTION}), "
                f"which {need.describe()}; upgrade the hub, or install a matching "
                f"{SDK_DISTRIBUTION} into the target Python first"
            ) from None
        try:
            page = json.loads(page_file.read_text("utf-8"))
            # (version, filename, url, sha256) of each wheel listed
            files = [
                (
                    parse_wheel_filename(f["filename"])[1],
                    str(f["filename"]),
                    str(f["url"]),
                    str(f["hashes"]["sha256"]).lower(),
                )
                for f in page["files"]
                if str(f["filename"]).endswith(".whl")
            ]
        except (ValueError, KeyError, TypeError, InvalidWheelFilename) as exc:
            raise HubError(f"the hub's SDK index page at {page_url} is malformed ({exc})") from None
    usable = [f for f in files if need.accepts(str(f[0]))]
    if not usable:
        served = ", ".join(str(f[0]) for f in files) or "nothing"
        raise InstallError(
            f"{need.describe()}, but the hub at {base} serves {SDK_DISTRIBUTION} {served}; "
            "ask the hub's operator to upgrade it, or install a matching SDK into the target "
            "Python first"
        )
    _version, filename, url, sha256 = max(usable, key=lambda f: f[0])
    _check_filename(filename)
    dest = cache_dir() / SDK_OWNER / sha256[:16] / filename
    if not (dest.is_file() and file_sha256(dest) == sha256):
        client.download(urljoin(page_url, url), dest, sha256=sha256)
    check_archive(dest, SDK_DISTRIBUTION)
    return dest


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


def run_installer(
    cmd: list[str],
    requires: dict[str, list[str]] | None = None,
    *,
    on_output: Callable[[str], None] | None = None,
) -> None:
    """Run the installer, handing each line of its output to `on_output` (the CLI: stderr, as
    stdout is for our result, e.g. JSON).

    The output is also kept (its tail), so a failure becomes an InstallError that names the
    requirement that could not be resolved (`requires`: `{environment: Requires-Dist}`).
    """
    echo = on_output or Feedback().installer_output
    pip = "-m" in cmd and "pip" in cmd
    returncode, output = _run(cmd, echo)
    if returncode == 0:
        return
    unreachable = _UNREACHABLE.search(output)
    if unreachable and not pip and "--offline" not in cmd:
        # uv looks every dependency up on its index, even one the target already has: with
        # the index out of reach, what is installed (and uv's cache) may be enough.
        echo(
            f"the package index is unreachable ({unreachable.group('url')}); trying again with "
            "what is installed and uv's cache (uv --offline)\n"
        )
        at = cmd.index("install") + 1
        returncode, output = _run([*cmd[:at], "--offline", *cmd[at:]], echo)
        if returncode == 0:
            return
    explained = explain_failure(output, requires or {}, "pip" if pip else "uv")
    if explained:
        raise InstallError(explained)
    if pip and "No module named pip" in output:
        raise InstallError("the target Python has no pip; install with --with uv instead")
    last = next(
        (
            line.strip()
            for line in reversed(output.splitlines())
            if re.match(r"\s*(error|ERROR|cause)\b", line)
        ),
        "",
    )
    detail = f": {last}" if last else ""
    raise InstallError(f"the installer failed with exit status {returncode}{detail}")


def _run(cmd: list[str], echo: Callable[[str], None]) -> tuple[int, str]:
    """Run the installer, echoing its output; its exit status and output's tail."""
    tail: deque[str] = deque(maxlen=400)
    try:
        proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace"
        )
    except OSError as exc:
        raise InstallError(f"cannot run {cmd[0]}: {exc.strerror}") from exc
    assert proc.stdout is not None
    with proc:
        for line in proc.stdout:
            echo(line)
            tail.append(line)
    return proc.returncode, "".join(tail)


_UNREACHABLE = re.compile(
    r"(?:Failed to fetch|error sending request for url):? \(?(?P<url>\S+?)\)?$", re.MULTILINE
)
"""uv's line for an index it could not reach."""


# Where uv and pip name a project they could not find, or no acceptable version of.
_NAME = r"(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)"
_MISSING = [
    re.compile(
        _NAME + r" was not found in the (?:package registry|provided package locations|cache)"
    ),
    re.compile(r"there (?:is|are) no versions? of " + _NAME),
    re.compile(r"only " + _NAME + r"(?:\[[^\]]*\])?[<>=!~]\S* is available"),
    re.compile(
        r"(?:Could not find a version that satisfies the requirement|No matching "
        r"distribution found for) " + _NAME
    ),
]


def _index_hint(installer: str) -> str:
    if installer == "uv":
        chosen = os.environ.get("UV_DEFAULT_INDEX") or os.environ.get("UV_INDEX_URL")
        where = chosen or "https://pypi.org/simple unless uv.toml says otherwise"
        return f"your package index ({where}; set UV_DEFAULT_INDEX to use another)"
    chosen = os.environ.get("PIP_INDEX_URL")
    where = chosen or "https://pypi.org/simple unless pip.conf says otherwise"
    return f"your package index ({where}; set PIP_INDEX_URL to use another)"


def explain_failure(output: str, requires: dict[str, list[str]], installer: str) -> str | None:
    """One sentence naming the requirement the installer could not satisfy (a declared one,
    or a dependency's, named with the package that needs it), or None."""
    output = re.sub(r"\s+", " ", output)  # uv folds its sentences at 80 columns
    declared: dict[str, tuple[str, str]] = {}
    for wanted_by, lines in requires.items():
        for line in lines:
            try:
                name = canonicalize_name(Requirement(line).name)
            except InvalidRequirement:
                continue
            declared.setdefault(name, (wanted_by, line))
    found = sorted(
        (match.start(), canonicalize_name(match.group("name").rstrip(".")))
        for pattern in _MISSING
        for match in pattern.finditer(output)
    )
    offline = "network was disabled" in output
    where = (
        "uv's cache or the target Python (the package index was unreachable, so uv ran "
        f"--offline; reach {_index_hint(installer)} or install it there first)"
        if offline
        else _index_hint(installer)
    )
    for _position, name in found:
        if name in declared:
            wanted_by, line = declared[name]
            return (
                f"{wanted_by} requires {line!r}, and no version of {name!r} that satisfies it "
                f"was found in {where}. Make {name!r} available there or point the installer "
                f"at an index that has it; if you maintain {wanted_by}, fix the dependency in "
                "its pyproject.toml and push a new version."
            )
        # a dependency of a dependency (the SDK's, say): name it, not the package above it
        needed = re.search(
            r"(?P<by>[A-Za-z0-9][A-Za-z0-9._-]*)(?:==\S+| \d\S*)? depends on (?P<req>"
            + re.escape(name)
            + r"[^\s,]*)",
            output,
            re.IGNORECASE,
        )
        if needed:
            by, req = needed.group("by"), needed.group("req")
            return (
                f"{by} requires {req!r}, and no version of {name!r} that satisfies it was "
                f"found in {where}. Make {name!r} available there or point the installer at an "
                "index that has it."
            )
    return None


@dataclass(frozen=True)
class InstallPlan:
    """Verified local wheels to hand to the installer, and what each environment requires."""

    wheels: dict[str, Path]
    requires: dict[str, list[str]]


def prepare_install(client: HubClient, envs: list[ResolvedEnv], python: str) -> InstallPlan:
    """Fetch and verify each environment's wheel, and those of the projects of its owner's
    namespace it requires (`namespace_dependencies`); add the hub's SDK wheel when `python`
    lacks a version they accept (a version it already has is kept, e.g. an editable
    checkout)."""
    check_distinct_packages(envs)
    wheels: dict[str, Path] = {}
    requires: dict[str, list[str]] = {}
    pending = list(envs)
    while pending:
        env = pending.pop(0)
        if canonicalize_name(env.package_name) in {canonicalize_name(n) for n in wheels}:
            continue
        wheels[env.package_name] = fetch_wheel(client, env)
        label = f"{env.ref.owner}/{env.ref.name} {env.version}"
        requires[label] = check_archive(wheels[env.package_name], label)
        pending += namespace_dependencies(client, env.ref.owner, requires[label], label)
        if len(wheels) > MAX_HUB_DEPENDENCIES:
            raise InstallError(
                f"{envs[0].ref} needs more than {MAX_HUB_DEPENDENCIES} projects of the hub"
            )
    need = sdk_need(requires)
    if need.requirements:
        have = installed_version(python, SDK_DISTRIBUTION)
        if have is None or not need.accepts(have):
            wheels[SDK_DISTRIBUTION] = fetch_sdk(client, need)
    return InstallPlan(wheels, requires)


MAX_HUB_DEPENDENCIES = 32


def namespace_dependencies(
    client: HubClient, owner: str, requires: list[str], wanted_by: str
) -> list[ResolvedEnv]:
    """The requirements in `requires` that name a project of `owner`'s namespace on the hub,
    each resolved there (the version chosen as `OWNER/NAME@SPEC` is:
    `registry_index.resolve.select_version`, the rule the hub's own verification uses).

    The namespace is the first index of the install line the environment's page shows, so a
    name it has comes from the hub or not at all: a requirement no version there satisfies is
    an InstallError, never a look-up on another index. Other names are left to the installer's
    configured index."""
    found = []
    for line in requires:
        try:
            requirement = Requirement(line)
        except InvalidRequirement:
            continue
        if is_sdk_name(requirement.name):
            continue
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
            continue
        try:
            versions = client.versions(owner, requirement.name)
        except NotFound:
            continue  # not a project of this namespace
        available = []
        for info in versions:
            try:
                available.append((Version(info.semantic_version), info.yanked))
            except InvalidVersion:
                continue
        try:
            chosen = select_version(available, str(requirement.specifier) or None)
        except LookupError as exc:
            raise InstallError(
                f"{wanted_by} requires {requirement}, a project of {owner} on the hub, and {exc}; "
                "it is never looked up on another index"
            ) from None
        found.append(resolve(client, parse_env_ref(f"{owner}/{requirement.name}@=={chosen}")))
    return found


def install_environments(
    client: HubClient,
    envs: list[ResolvedEnv],
    python: str,
    installer: str,
    *,
    prerelease: bool = False,
) -> dict[str, str]:
    """The one install routine (`prime env install`, `ensure_installed`): prepare the local
    wheels, then run the installer on those files only (its output to the client's feedback).

    An environment that cannot share `python` (a verifiers or OpenEnv package, or one whose
    dependencies would change what `python` has: hub_client.isolated) goes into a virtualenv
    of its own. Returns `{package_name: the Python it was installed into}`."""
    plan = prepare_install(client, envs, python)
    placed = {env.package_name: python for env in envs}
    uv = find_uv()
    shared = dict(plan.wheels)
    for env in envs:
        label = f"{env.ref.owner}/{env.ref.name} {env.version}"
        kind = framework(plan.requires[label])
        reason = f"it is an environment of {kind}" if kind else None
        if kind is None and uv is not None:
            clash = clashes(
                uv,
                python,
                [
                    w
                    for name, w in plan.wheels.items()
                    if name in (env.package_name, SDK_DISTRIBUTION)
                ],
            )
            reason = f"its dependencies clash with {python}'s ({clash})" if clash else None
        if reason is None:
            continue
        if uv is None:
            raise InstallError(
                f"{label} needs a virtualenv of its own ({reason}), which is made with uv; "
                "install it (pip install uv)"
            )
        wheels = [shared.pop(env.package_name)]
        if kind is None:  # an environment of this SDK: the SDK goes with it
            wheels.append(
                plan.wheels.get(SDK_DISTRIBUTION)
                or fetch_sdk(client, sdk_need({label: plan.requires[label]}))
            )
        client.feedback.note(f"{label}: installing into a virtualenv of its own, as {reason}")

        def run(cmd: list[str]) -> None:
            run_installer(cmd, plan.requires, on_output=client.feedback.installer_output)

        try:
            record = install_isolated(
                env=f"{env.ref.owner}/{env.ref.name}",
                package=env.package_name,
                version=env.version,
                kind=kind or "prime_env",
                wheels=wheels,
                python=python,
                uv=uv,
                run=run,
            )
        except IsolatedInstallError as exc:
            raise InstallError(str(exc)) from None
        placed[env.package_name] = record.python
    if set(shared) - {SDK_DISTRIBUTION}:
        run_installer(
            install_command(shared, python, installer, prerelease=prerelease),
            plan.requires,
            on_output=client.feedback.installer_output,
        )
    return placed


def ensure_installed(spec: str, feedback: Feedback | None = None) -> None:
    """Install `OWNER/NAME[@SPEC]` from the configured hub into this interpreter.

    The install-on-demand of the evaluator and the trainer (`load_env(..., install=...)`): called
    when the environment is missing or at another version, with `prime env install`'s code path.
    """
    feedback = feedback or Feedback()
    settings = load_settings()
    feedback.note(f"{spec} is not installed here; installing it from {settings.hub_url}")
    with HubClient.from_settings(settings, feedback=feedback) as client:
        resolved = resolve(client, parse_env_ref(spec))
        install_environments(client, [resolved], target_python(None), choose_installer("auto"))


__all__ = [
    "InstallError",
    "InstallPlan",
    "NotFound",
    "ResolvedEnv",
    "choose_installer",
    "ensure_installed",
    "fetch_wheel",
    "install_command",
    "install_environments",
    "prepare_install",
    "resolve",
    "run_installer",
    "target_python",
]
