"""The environment the suite runs in is the one scripts/constraints.txt records.

WHY: CI installs under those constraints so that it runs what was tested; a dependency added
to a pyproject.toml without its version written back there would be resolved afresh on every
machine (the drift the file exists to stop), and a venv that differs from the file means the
file no longer says what was tested.
"""

from __future__ import annotations

from importlib import metadata
from pathlib import Path

from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
OURS = {"prime-envhub", "prime-envhub-sdk"}  # editable, from this tree
NOT_CONSTRAINED = {"torch"}  # scripts/setup.sh pins it: the CPU wheel on this machine's disk


def test_every_installed_package_is_pinned_at_its_installed_version() -> None:
    pinned: dict[str, str] = {}
    for line in (ROOT / "scripts" / "constraints.txt").read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            name, _, version = line.partition("==")
            assert version, f"not a name==version pin: {line!r}"
            pinned[canonicalize_name(name)] = version
    installed = {
        name: dist.version
        for dist in metadata.distributions()
        if (name := canonicalize_name(dist.metadata["Name"])) not in OURS | NOT_CONSTRAINED
    }
    missing = sorted(set(installed) - set(pinned))
    assert not missing, f"installed but not in scripts/constraints.txt (see its header): {missing}"
    differ = {
        name: (installed[name], pinned[name])
        for name in installed
        if installed[name] != pinned[name]
    }
    assert not differ, f"installed vs scripts/constraints.txt (run scripts/setup.sh): {differ}"
