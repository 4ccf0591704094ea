"""A message that holds a path stays one line where the output is not a terminal.

rich folds a line at 80 columns in a pipe or a log; `prime train resume` printed
`resuming /tmp/.../out/tra` and the rest of the path on the next line, and a CI test grepping
that line failed or passed by the length of pytest's temp directory name.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.e2e.eval_support import PRIME


def test_a_long_settings_path_is_printed_whole_in_a_pipe(tmp_path: Path) -> None:
    config_home = tmp_path / ("a-settings-directory-whose-name-is-long-" * 3)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PRIME_") and k != "COLUMNS"}
    env["XDG_CONFIG_HOME"] = str(config_home)
    result = subprocess.run(
        [str(PRIME), "config", "set", "hub_url", "http://127.0.0.1:9"],
        env=env, capture_output=True, text=True, check=False, timeout=60,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    path = config_home / "prime" / "config.toml"
    assert len(f"hub_url = http://127.0.0.1:9 (saved to {path})") > 80  # rich would fold it
    assert result.stdout == f"hub_url = http://127.0.0.1:9 (saved to {path})\n"
