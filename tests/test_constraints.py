"""The environment the suite runs in is the one scripts/constraints.txt records.

WHY: CI installs under those constraints so that it runs what was tested; a dependency added
to a pyproject.toml without its version written back there would be resolved afresh on every
machine (the drift the file exists to stop), and a venv that differs from the file means the
file no longer says what was tested.

Only what scripts/setup.sh installs is checked: the dependency closure of the two editable
distributions with the extras it asks for, plus the venv's own pip. Environments a user
installed into the same venv (`prime env install`, `prime train`) and what only they need are
the user's, not the suite's.
"""

from __future__ import annotations

from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
OURS = {"prime-envhub", "prime-envhub-sdk"}  # editable, from this tree
NOT_CONSTRAINED = {"torch"}  # scripts/setup.sh pins it: the CPU wheel on this machine's disk
SETUP_INSTALLS = [  # what scripts/setup.sh asks for (with the venv's own pip)
    "prime-envhub-sdk[sandbox,local,datasets]",
    "prime-envhub[all,dev]",
    "torch",
    "uv",
    "pip",
]


def _installed() -> dict[str, metadata.Distribution]:
    return {canonicalize_name(d.metadata["Name"]): d for d in metadata.distributions()}


def closure(installed: dict[str, metadata.Distribution], roots: list[str]) -> set[str]:
    """Every installed distribution that `roots` pull in, markers and extras evaluated."""
    seen: set[tuple[str, frozenset[str]]] = set()
    todo = [Requirement(text) for text in roots]
    while todo:
        req = todo.pop()
        name, extras = canonicalize_name(req.name), frozenset(req.extras)
        if (name, extras) in seen or name not in installed:
            continue
        seen.add((name, extras))
        for line in installed[name].requires or []:
            dep = Requirement(line)
            wanted = dep.marker is None or any(
                dep.marker.evaluate({"extra": extra}) for extra in extras | {""}
            )
            if wanted:
                todo.append(dep)
    return {name for name, _ in seen}


def test_every_installed_package_is_pinned_at_its_installed_version() -> None:
    pinned: dict[str, str] = {}
    for line in (ROOT / "scripts" / "constraints.txt").read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            name, _, version = line.partition("==")
            assert version, f"not a name==version pin: {line!r}"
            pinned[canonicalize_name(name)] = version
    dists = _installed()
    installed = {
        name: dists[name].version
        for name in closure(dists, SETUP_INSTALLS)
        if name not in OURS | NOT_CONSTRAINED
    }
    missing = sorted(set(installed) - set(pinned))
    assert not missing, f"installed but not in scripts/constraints.txt (see its header): {missing}"
    differ = {
        name: (installed[name], pinned[name])
        for name in installed
        if installed[name] != pinned[name]
    }
    assert not differ, f"installed vs scripts/constraints.txt (run scripts/setup.sh): {differ}"


def test_what_setup_did_not_install_belongs_to_user_environments() -> None:
    """The closure misses nothing setup.sh put there: whatever lies outside it is an
    environment installed into the venv since, or one of its dependencies."""
    dists = _installed()
    suite = closure(dists, SETUP_INSTALLS)
    assert OURS | {"torch", "pytest", "transformers", "fastapi", "pip"} <= suite
    user_envs = [
        name
        for name, dist in dists.items()
        if name not in OURS and any(ep.group == "prime.environments" for ep in dist.entry_points)
    ]
    assert not set(user_envs) & suite, "an environment counted as the suite's"
    assert set(dists) - suite <= closure(dists, user_envs)
