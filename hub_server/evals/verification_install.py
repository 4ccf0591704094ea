"""Installing a run's environment for re-scoring: where each name comes from, and in bounds.

Each name comes from where `prime env install` takes it (docs/sdk.md, "Installing"), so no
upload can shadow a dependency and nothing the hub owns is looked up elsewhere:

- the environment: its exact wheel, from this hub's blob store;
- `prime-envhub-sdk`: this hub's own SDK (the wheel `/_sdk/` serves), never an index; an
  environment whose requirement the hub's SDK does not satisfy is not verifiable;
- a name of the environment's own namespace on this hub (`/OWNER/simple/`, the first index of
  the install line the environment's page shows): that project's wheel from the blob store,
  the version chosen as `OWNER/NAME@SPEC` is (`registry_index.resolve.select_version`), its
  own requirements resolved the same way; a name the namespace has without a version that
  fits stops the install (never a fall-through to another index): dependency confusion is
  impossible, and an environment that depends on another of its owner's is verifiable;
- every other dependency: the hub host's configured index, as for any install.

The SDK and its dependencies are installed once per SDK and Python version (the hub's own
code: `data_dir/verify/`), then copied into each verification's site. The environment's part
is installed with a uv cache of the verification's own, deleted with it, under a disk budget
(`verify_disk_bytes` for what it adds: cache and installed files, watched while uv runs; no
file larger than it): a 21 MiB wheel that unpacks to 1 GiB no longer stays in a shared cache.
Wheels only (`--only-binary :all:`): nothing is built or run on the host.
"""

from __future__ import annotations

import fcntl
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import InvalidVersion, Version
from sqlmodel import Session, col, select

from hub_server.core.blobstore import BlobStorage
from hub_server.core.settings import HubSettings
from hub_server.index.sdk import sdk_wheel
from hub_server.registry.models import DistFile, Environment
from hub_server.registry.models import Version as VersionRow
from registry_index.names import normalize
from registry_index.resolve import select_version
from registry_index.schemas.versions import FileKind
from registry_index.sdk import SDK_DISTRIBUTION, is_sdk_name

MAX_HUB_DEPENDENCIES = 32
_POLL_SECONDS = 0.25
_LIMIT_FILES = (
    "import os, resource, sys; n = int(sys.argv[1]); "
    "resource.setrlimit(resource.RLIMIT_FSIZE, (n, n)); os.execv(sys.argv[2], sys.argv[2:])"
)


class InstallRefused(Exception):
    """The environment cannot be installed for re-scoring; the message says why."""


@dataclass(frozen=True)
class HubWheel:
    """A wheel of this hub to install: which project and version, and its blob."""

    project: str
    version: str
    filename: str
    blob_key: str


def hub_wheels(session: Session, owner_id: str, version_id: str) -> list[HubWheel]:
    """The environment's wheel, then the wheels of every name of its owner's namespace it
    needs (transitively); InstallRefused when a requirement cannot be met from the hub."""
    root = session.get(VersionRow, version_id)
    if root is None:
        raise InstallRefused("its environment version is gone")
    chosen: dict[str, HubWheel] = {}
    pending: list[tuple[VersionRow, str]] = [(root, "")]
    while pending:
        row, wanted_by = pending.pop()
        project = normalize(row.environment.name)
        if project in chosen:
            continue
        wheel = _wheel_of(session, row)
        if wheel is None:
            raise InstallRefused(
                f"{wanted_by or 'the environment'} needs {row.environment.name} {row.version}, "
                "which has no wheel on this hub"
            )
        chosen[project] = HubWheel(project, row.version, wheel.filename, wheel.blob_key)
        if len(chosen) > MAX_HUB_DEPENDENCIES:
            raise InstallRefused(
                f"it needs more than {MAX_HUB_DEPENDENCIES} of this hub's projects"
            )
        label = f"{row.environment.name} {row.version}"
        for requirement in _requirements(row.requires_dist):
            name = normalize(requirement.name)
            if is_sdk_name(name):
                _check_sdk(requirement, label)
                continue
            if name in chosen:
                continue
            dependency = _namespace_project(session, owner_id, name)
            if dependency is None:
                continue  # not this hub's: the configured index
            pending.append((_pick(session, dependency, requirement, label), label))
    return list(chosen.values())


def _requirements(requires_dist: str) -> list[Requirement]:
    """The requirements that apply to an install without extras, here (the sandbox runs the
    hub's Python version)."""
    try:
        lines = json.loads(requires_dist or "[]")
    except ValueError:
        lines = []
    found = []
    for line in lines if isinstance(lines, list) else []:
        try:
            requirement = Requirement(str(line))
        except InvalidRequirement:
            continue
        if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
            found.append(requirement)
    return found


def _check_sdk(requirement: Requirement, wanted_by: str) -> None:
    served = sdk_wheel().version
    try:
        fits = requirement.specifier.contains(Version(served), prereleases=True)
    except InvalidVersion:
        fits = False
    if not fits:
        raise InstallRefused(
            f"{wanted_by} requires {requirement}, and this hub runs {SDK_DISTRIBUTION} {served}"
        )


def _namespace_project(session: Session, owner_id: str, name: str) -> Environment | None:
    return session.exec(
        select(Environment).where(
            Environment.owner_id == owner_id, Environment.normalized_name == name
        )
    ).first()


def _pick(
    session: Session, project: Environment, requirement: Requirement, wanted_by: str
) -> VersionRow:
    rows = session.exec(select(VersionRow).where(VersionRow.environment_id == project.id)).all()
    available: dict[Version, VersionRow] = {}
    for row in rows:
        try:
            available[Version(row.version)] = row
        except InvalidVersion:
            continue
    spec = str(requirement.specifier) or None
    try:
        chosen = select_version([(v, row.yanked) for v, row in available.items()], spec)
    except LookupError as exc:
        raise InstallRefused(
            f"{wanted_by} requires {requirement}, a project of its owner on this hub, and "
            f"{exc}; it is never looked up on another index"
        ) from None
    return available[chosen]


def _wheel_of(session: Session, row: VersionRow) -> DistFile | None:
    return session.exec(
        select(DistFile)
        .where(DistFile.version_id == row.id, DistFile.kind == FileKind.WHEEL)
        .order_by(col(DistFile.uploaded_at))
    ).first()


# -- installing -----------------------------------------------------------------------------


def fetch(store: BlobStorage, wheels: Sequence[HubWheel], directory: Path) -> list[Path]:
    """The wheels as files in `directory` (uv takes local files, never these names)."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for wheel in wheels:
        if "/" in wheel.filename or not wheel.filename.endswith(".whl"):
            raise InstallRefused(f"{wheel.filename!r} is not a wheel filename")
        path = directory / wheel.filename
        with store.open(wheel.blob_key) as source, path.open("wb") as target:
            shutil.copyfileobj(source, target)
        paths.append(path)
    return paths


def install(
    wheels: Sequence[Path], work: Path, site: Path, python: str, settings: HubSettings
) -> None:
    """The SDK's site for `python` copied to `site`, then `wheels` installed into it with a
    uv cache in `work` (gone with it), within `verify_disk_bytes` of `work`."""
    shutil.copytree(sdk_site(settings, python), site, symlinks=True)
    baseline = disk_usage(work)  # the samples and the SDK's site: the hub's, not the budget's
    import uv

    command = [
        uv.find_uv_bin(), "pip", "install", "--quiet", "--target", str(site),
        "--cache-dir", str(work / "uv-cache"), "--python-version", python,
        "--python-platform", f"{platform.machine()}-manylinux_2_28", "--only-binary", ":all:",
        *(str(path) for path in wheels),
    ]  # fmt: skip
    _run_within(command, work, settings, "installing the environment", baseline)


def sdk_site(settings: HubSettings, python: str) -> Path:
    """This hub's SDK and its dependencies installed for `python` (once per SDK build and
    Python version, shared by every verification; built under a lock, in place atomically)."""
    wheel = sdk_wheel()
    root = settings.data_dir / "verify"
    site = root / f"sdk-{wheel.sha256[:16]}-py{python}"
    if site.is_dir():
        return site
    root.mkdir(parents=True, exist_ok=True)
    with (root / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if site.is_dir():
            return site
        building = root / f".building-{os.getpid()}"
        shutil.rmtree(building, ignore_errors=True)
        building.mkdir()
        sdk_path = building / wheel.filename
        sdk_path.write_bytes(wheel.data)
        import uv

        command = [
            uv.find_uv_bin(), "pip", "install", "--quiet", "--target", str(building / "site"),
            "--python-version", python,
            "--python-platform", f"{platform.machine()}-manylinux_2_28",
            "--only-binary", ":all:", str(sdk_path),
        ]  # fmt: skip
        # The hub's own code: not held to one verification's budget, only to a bound.
        bounded = settings.model_copy(
            update={"verify_disk_bytes": max(settings.verify_disk_bytes, 1 << 30)}
        )
        try:
            _run_within(command, building, bounded, f"installing {SDK_DISTRIBUTION}")
            (building / "site").rename(site)
        finally:
            shutil.rmtree(building, ignore_errors=True)
    return site


def _run_within(
    command: list[str], work: Path, settings: HubSettings, what: str, baseline: int = 0
) -> None:
    """Run `command`, killing it past the timeout or once `work` holds more than `baseline`
    plus the disk budget (checked every 0.25 s; no file may be larger than the budget)."""
    budget = settings.verify_disk_bytes
    # The file-size limit is set by a small exec wrapper (a preexec_fn is unsafe in the hub's
    # threaded process).
    limited = [sys.executable, "-I", "-c", _LIMIT_FILES, str(budget), *command]
    deadline = time.monotonic() + settings.verify_timeout_seconds
    with subprocess.Popen(limited, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) as proc:
        stderr = _Tail(proc)
        while proc.poll() is None:
            if disk_usage(work) - baseline > budget:
                proc.kill()
                raise InstallRefused(
                    f"{what} took more than {budget >> 20} MiB of disk (the hub's budget for "
                    "one verification, PRIME_HUB_VERIFY_DISK_BYTES)"
                )
            if time.monotonic() > deadline:
                proc.kill()
                raise InstallRefused(f"{what} took more than {settings.verify_timeout_seconds:g} s")
            time.sleep(_POLL_SECONDS)
        tail = stderr.text()
    if disk_usage(work) - baseline > budget:
        raise InstallRefused(f"{what} took more than {budget >> 20} MiB of disk")
    if proc.returncode != 0:
        if proc.returncode < 0 or "File too large" in tail:
            raise InstallRefused(f"{what} wrote a file larger than {budget >> 20} MiB")
        lines = [line for line in tail.strip().splitlines() if line.strip()][-2:]
        raise InstallRefused(f"{what} failed: " + " | ".join(lines))


class _Tail:
    """The last 8 KiB of a process's stderr, read as it runs (a full pipe would stall it)."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        import threading

        self._data = b""
        self._thread = threading.Thread(target=self._read, args=(proc,), daemon=True)
        self._thread.start()

    def _read(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stderr is not None
        for chunk in iter(lambda: proc.stderr.read(4096), b""):  # type: ignore[union-attr]
            self._data = (self._data + chunk)[-8192:]

    def text(self) -> str:
        self._thread.join(timeout=5)
        return self._data.decode(errors="replace")


def disk_usage(path: Path) -> int:
    """Bytes the files under `path` take on disk (each inode once: uv hard-links its cache)."""
    seen: set[tuple[int, int]] = set()
    total = 0
    stack = [path]
    while stack:
        try:
            entries = list(os.scandir(stack.pop()))
        except OSError:
            continue
        for entry in entries:
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if entry.is_dir(follow_symlinks=False):
                stack.append(Path(entry.path))
            elif (info.st_dev, info.st_ino) not in seen:
                seen.add((info.st_dev, info.st_ino))
                total += info.st_blocks * 512
    return total
