"""Building the default sandbox image on this machine, from Debian packages only.

WHY: what runs model-written code must be what this machine built from a Debian mirror, never
whatever a registry serves under a tag (and the hub is self-hostable, often on machines that
reach a Debian mirror but no registry), so Docker is never asked to pull. `build_image` makes
the image from a root filesystem: `debootstrap --variant=minbase --include=python3` (the full
stdlib, as model-written code expects) and `docker import`. The tag is checked first, so CI
builds it once per machine. The packages debootstrap fetches are kept in the user's cache
(`--cache-dir`), so a rebuild (`--force`, the builder's own test) checks them against the
suite's index instead of downloading them again.

`build_dockerfile` builds a task's own image (a Harbor task's environment/Dockerfile) the same
way: the network off, nothing pulled, every base image checked to be here first.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

from registry_index.user_dirs import cache_home
from sandbox.backends.docker import docker_client, image_exists
from sandbox.errors import SandboxError, SandboxUnavailable
from sandbox.limits import DEFAULT_IMAGE

DEFAULT_SUITE = "bookworm"
_IMPORT_CHANGES = [
    "ENV LANG=C.UTF-8",
    "ENV PATH=/usr/local/bin:/usr/bin:/bin",
    "WORKDIR /work",
    'CMD ["python3"]',
]


def _debootstrap(tag: str, suite: str, mirror: str | None, say: Callable[[str], None]) -> None:
    debootstrap = shutil.which("debootstrap")
    if debootstrap is None:
        raise SandboxUnavailable(
            "debootstrap is not installed: `apt-get install debootstrap`, then build the "
            "sandbox image again"
        )
    if os.geteuid() != 0:
        raise SandboxUnavailable(
            "building the image from a root filesystem needs root (debootstrap)"
        )
    with tempfile.TemporaryDirectory(prefix="prime-sandbox-image-") as scratch:
        root = Path(scratch) / "rootfs"
        argv = [debootstrap, "--variant=minbase", "--include=python3", suite, str(root)]
        packages = _package_cache(suite)
        if packages is not None:
            argv.insert(1, f"--cache-dir={packages}")
        if mirror:
            argv.append(mirror)
        say(f"debootstrap {suite} (a minute or two)...")
        try:
            run = subprocess.run(argv, capture_output=True, text=True, check=False)
        finally:
            _unmount_below(root)
        if run.returncode != 0:
            tail = (run.stdout + run.stderr).strip().splitlines()[-5:]
            raise SandboxError("debootstrap failed:\n" + "\n".join(tail))
        # Nothing of the build host's apt caches goes into the image.
        for cache in ("var/cache/apt/archives", "var/lib/apt/lists"):
            for entry in (root / cache).glob("*"):
                if entry.is_file():
                    entry.unlink()
        archive = Path(scratch) / "rootfs.tar"
        say("packing the root filesystem...")
        subprocess.run(
            ["tar", "-C", str(root), "--numeric-owner", "-cf", str(archive), "."], check=True
        )
        say(f"docker import as {tag}...")
        repository, _, version = tag.rpartition(":")
        docker_client().api.import_image_from_file(
            str(archive),
            repository=repository or tag,
            tag=version or "latest",
            changes=_IMPORT_CHANGES,
        )
    if not image_exists(tag):
        raise SandboxError(f"docker import did not produce {tag}")


def _package_cache(suite: str) -> Path | None:
    """debootstrap's package cache for `suite`, or None where it cannot be made (a read-only
    home): the build then downloads as it would without one."""
    cache = cache_home() / "debootstrap" / suite
    try:
        cache.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return cache


def _unmount_below(root: Path) -> None:
    """Undo mounts debootstrap may leave (/proc, /sys) so cleanup never walks into the host's."""
    prefix = str(root.resolve()) + "/"
    with open("/proc/mounts") as handle:
        points = [line.split()[1] for line in handle if line.split()[1].startswith(prefix)]
    for point in sorted(points, key=len, reverse=True):
        subprocess.run(["umount", "-l", point], capture_output=True, check=False)


def build_image(
    tag: str = DEFAULT_IMAGE,
    *,
    force: bool = False,
    suite: str = DEFAULT_SUITE,
    mirror: str | None = None,
    say: Callable[[str], None] = lambda _message: None,
) -> str:
    """Make `tag` available in the Docker daemon; returns how: 'present' or 'built'."""
    if not force and image_exists(tag):
        return "present"
    _debootstrap(tag, suite, mirror, say)
    return "built"


class ImageUnavailable(SandboxUnavailable):
    """An image a Dockerfile starts from is not on this machine (and is never pulled)."""


def base_images(dockerfile: str) -> list[str]:
    """The images a Dockerfile's stages start from (`FROM image [AS name]`), in order, without
    `scratch` and earlier stages; an ARG in a name is replaced by its default, and one that has
    none is refused (ValueError), since what would be built is then unknown."""
    args: dict[str, str] = {}
    stages: set[str] = set()
    found: list[str] = []
    text = re.sub(r"\\\r?\n", " ", dockerfile)
    for line in text.splitlines():
        words = line.split()
        if not words or words[0].startswith("#"):
            continue
        keyword = words[0].upper()
        if keyword == "ARG" and not found and len(words) > 1:
            name, _, default = words[1].partition("=")
            args[name] = default.strip("\"'")
        if keyword != "FROM":
            continue
        rest = [w for w in words[1:] if not w.startswith("--")]
        if not rest:
            raise ValueError(f"a FROM line names no image: {line.strip()!r}")
        image = re.sub(r"\$\{?(\w+)\}?", lambda m: args.get(m.group(1), m.group(0)), rest[0])
        if "$" in image:
            raise ValueError(f"FROM {rest[0]}: the build argument has no default here")
        if len(rest) >= 3 and rest[1].upper() == "AS":
            stages.add(rest[2].lower())
        if image.lower() != "scratch" and image.lower() not in stages and image not in found:
            found.append(image)
    if not found and "FROM" not in text.upper():
        raise ValueError("the Dockerfile has no FROM line")
    return found


def build_dockerfile(
    context: Path,
    tag: str,
    *,
    say: Callable[[str], None] = lambda _message: None,
) -> str:
    """Build `context/Dockerfile` as `tag` with the network off and nothing pulled; returns
    'present' (the tag exists: tags name their content, the caller's job) or 'built'.

    Every image it starts from must already be here: ImageUnavailable names the first that is
    not (this machine's own is `prime-sandbox/python:bookworm`, `prime sandbox build-image`).
    A failing step is a SandboxError with the build's last lines."""
    import docker.errors

    if image_exists(tag):
        return "present"
    dockerfile = context / "Dockerfile"
    try:
        bases = base_images(dockerfile.read_text("utf-8"))
    except (OSError, ValueError) as exc:
        raise SandboxError(f"cannot read {dockerfile}: {exc}") from exc
    for base in bases:
        if not image_exists(base):
            raise ImageUnavailable(
                f"{dockerfile} starts from {base}, which is not on this machine, and images are "
                f"never pulled: build or load {base} here first (this machine's own image is "
                f"{DEFAULT_IMAGE}, built by `prime sandbox build-image`), or start the "
                f"Dockerfile FROM {DEFAULT_IMAGE}"
            )
    say(f"building image {tag} from {context} (never pulled)...")
    log: list[str] = []
    try:
        for chunk in docker_client().api.build(
            path=str(context), tag=tag, pull=False, network_mode="none", rm=True, forcerm=True,
            decode=True,
        ):  # fmt: skip
            if "stream" in chunk:
                log.extend(line for line in str(chunk["stream"]).splitlines() if line.strip())
            if "error" in chunk:
                raise SandboxError(
                    f"building {dockerfile} failed: {chunk['error'].strip()}\n"
                    + "\n".join(log[-8:])
                )
    except docker.errors.DockerException as exc:
        raise SandboxError(f"building {dockerfile} failed: {exc}") from exc
    if not image_exists(tag):
        raise SandboxError(f"building {dockerfile} did not produce image {tag}")
    return "built"


def image_workdir(tag: str) -> str:
    """The WORKDIR an image's commands start in ("" when it sets none)."""
    return str(docker_client().images.get(tag).attrs.get("Config", {}).get("WorkingDir") or "")
