"""Put the built-in environment packages on sys.path, as an editable install would.

The packages live in builtin_envs/<name>/ with their own pyproject.toml; the install-from-hub
test installs them for real into a fresh virtualenv, the other tests import them in place.
"""

from __future__ import annotations

import sys
from pathlib import Path

BUILTINS = Path(__file__).resolve().parents[2] / "builtin_envs"

for _package_dir in sorted(p for p in BUILTINS.iterdir() if (p / "pyproject.toml").is_file()):
    if str(_package_dir) not in sys.path:
        sys.path.insert(0, str(_package_dir))
