"""Publish the built-in environments to a hub under the owner `prime`.

    from builtin_envs.publish import publish_builtins
    publish_builtins("http://127.0.0.1:8000", token)   # a token of user `prime`

Each environment is built into a wheel and an sdist with `python -m build` and uploaded with
`twine upload` to the hub's standard upload endpoint (`/prime/legacy/`), exactly what an author
would do by hand. The environments depend on the SDK (`prime-envhub-sdk`), which every hub
serves by itself (`HUB/_sdk/simple/`), so nothing else is uploaded. Re-running is safe: files
already on the hub are skipped, since published versions are immutable.

To install one, use the commands `install_lines` prints (from `registry_index.install_commands`,
the one home of the commands we show): `prime env install prime/wordle`, or uv with the hub's
indexes first. Never `--extra-index-url <public index>`: pip and uv would then take a same-named
project with a higher version from the public index (PyPI's unrelated `wordle` did exactly that).

This runs from a source checkout (the environment sources live beside this file).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import httpx

from registry_index.install_commands import install_commands

BUILTINS_DIR = Path(__file__).resolve().parent
OWNER = "prime"
BUILTIN_NAMES: tuple[str, ...] = (
    "wordle",
    "wiki-search",
    "reverse-text",
    "arithmetic",
    "python-code",
    "twenty-questions",
)
_SKIP = shutil.ignore_patterns(
    ".git",
    ".venv",
    "__pycache__",
    "*.pyc",
    "build",
    "dist",
    "*.egg-info",
    "node_modules",
    ".pytest_cache",
    ".mypy_cache",
    ".ruff_cache",
    "outputs",
    ".prime-data",
    ".cache",
)


class PublishError(RuntimeError):
    """Building or uploading failed; the message carries the tool's own output."""


def _run(cmd: Sequence[str], what: str, env: dict[str, str] | None = None) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if proc.returncode != 0:
        tail = (proc.stdout + proc.stderr).strip()[-2000:]
        raise PublishError(f"{what} failed (exit {proc.returncode}):\n{tail}")


def build_distributions(source: Path, out_dir: Path) -> list[Path]:
    """Build `source` (a project directory) in a scratch copy so the checkout stays clean."""
    with tempfile.TemporaryDirectory(prefix="prime-build-") as scratch:
        copy = Path(scratch) / source.name
        shutil.copytree(source, copy, ignore=_SKIP)
        before = set(out_dir.glob("*"))
        # --no-isolation: build with the setuptools installed here (no index needed); setuptools
        # >= 70.1 builds wheels itself, so the `wheel` package some pyprojects list is not required.
        # A fixed SOURCE_DATE_EPOCH makes the archives byte-identical across builds, so seeding a
        # hub again re-uploads identical files (accepted) rather than new bytes under an old name.
        env = {**os.environ, "SOURCE_DATE_EPOCH": os.environ.get("SOURCE_DATE_EPOCH", "315532800")}
        _run(
            [
                sys.executable,
                "-m",
                "build",
                "--no-isolation",
                "--skip-dependency-check",
                "--wheel",
                "--sdist",
                "--outdir",
                str(out_dir),
                str(copy),
            ],
            f"building {source.name}",
            env=env,
        )
        return sorted(set(out_dir.glob("*")) - before)


def published_files(hub_url: str, token: str, project: str, owner: str = OWNER) -> set[str]:
    """File names the hub already has for `owner/project` (PEP 691 JSON simple index)."""
    response = httpx.get(
        f"{hub_url.rstrip('/')}/{owner}/simple/{project}/",
        headers={"Accept": "application/vnd.pypi.simple.v1+json"},
        auth=("__token__", token),
        timeout=30,
    )
    if response.status_code == 404:
        return set()
    if response.status_code != 200:
        raise PublishError(
            f"the hub answered {response.status_code} for {owner}/{project}: {response.text[:300]} "
            "(is the token one of user prime's?)"
        )
    return {entry["filename"] for entry in response.json().get("files", [])}


def upload(hub_url: str, token: str, files: Iterable[Path], owner: str = OWNER) -> None:
    env = {**os.environ, "TWINE_USERNAME": "__token__", "TWINE_PASSWORD": token}
    _run(
        [
            sys.executable,
            "-m",
            "twine",
            "upload",
            "--non-interactive",
            "--disable-progress-bar",
            "--repository-url",
            f"{hub_url.rstrip('/')}/{owner}/legacy/",
            *(str(f) for f in files),
        ],
        "twine upload",
        env=env,
    )


def publish_builtins(
    hub_url: str,
    token: str,
    names: Sequence[str] = BUILTIN_NAMES,
    on_step: Callable[[str], None] = lambda line: None,
) -> list[str]:
    """Build and upload the named built-ins (default: all five) as `prime`; returns the file
    names uploaded (files the hub already has are skipped). `on_step` hears each package as it
    is built and uploaded (a build takes seconds each)."""
    unknown = [n for n in names if n not in BUILTIN_NAMES]
    if unknown:
        raise ValueError(
            f"unknown built-in environment(s) {unknown}; choose from {list(BUILTIN_NAMES)}"
        )
    missing_sources = [n for n in names if not (BUILTINS_DIR / n / "pyproject.toml").is_file()]
    if missing_sources:
        raise PublishError(
            f"the built-in environment sources are not beside {BUILTINS_DIR} "
            "(publishing needs a source checkout of prime-envhub)"
        )
    with tempfile.TemporaryDirectory(prefix="prime-builtins-") as out:
        out_dir = Path(out)
        files: list[Path] = []
        uploaded: list[str] = []
        for name in names:
            on_step(f"{name}: building")
            files = build_distributions(BUILTINS_DIR / name, out_dir)
            # Published versions are immutable: files the hub already has are kept, not re-sent
            # (sdists are not byte-reproducible, so a re-upload would be refused as a conflict).
            present: set[str] = set()
            for project in {_project(f.name) for f in files}:
                present |= published_files(hub_url, token, project)
            missing = [f for f in files if f.name not in present]
            if missing:
                upload(hub_url, token, missing)
                on_step(f"{name}: uploaded {', '.join(f.name for f in missing)}")
            else:
                on_step(f"{name}: already on the hub")
            uploaded += [f.name for f in missing]
        return uploaded


def install_lines(hub_url: str, names: Sequence[str] = BUILTIN_NAMES) -> list[str]:
    """How to install each published built-in: `prime env install`, and uv pinned to the hub."""
    lines = []
    for name in names:
        for command in install_commands(hub_url, OWNER, name):
            if command.tool in ("prime", "uv"):
                lines.append(command.command)
    return lines


def _project(filename: str) -> str:
    """'wiki_search-0.1.0-py3-none-any.whl' / 'wiki_search-0.1.0.tar.gz' -> 'wiki-search'."""
    return filename.split("-", 1)[0].replace("_", "-").lower()


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m builtin_envs.publish HUB_URL` with the token in $PRIME_HUB_TOKEN."""
    args = list(sys.argv[1:] if argv is None else argv)
    token = os.environ.get("PRIME_HUB_TOKEN", "")
    if len(args) != 1 or not token:
        print(
            "usage: PRIME_HUB_TOKEN=<token of user prime> python -m builtin_envs.publish HUB_URL",
            file=sys.stderr,
        )
        return 2
    try:
        uploaded = publish_builtins(args[0], token)
    except (PublishError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print("\n".join(f"uploaded {name}" for name in uploaded))
    print("install with one of:")
    print("\n".join(f"  {line}" for line in install_lines(args[0])))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
