"""A command cannot make later `python3` runs in the same sandbox load code it planted.

Per-user startup hooks live under HOME (Python's user site with `usercustomize.py`,
`sitecustomize.py` and `.pth` files, and every tool's dotfiles): HOME is a place no program can
create, and every command runs with `PYTHONNOUSERSITE=1`, so a caller that points HOME at a
writable place still gets no user site.
"""

from __future__ import annotations

import pytest

from sandbox import SandboxLimits, open_sandbox
from tests.sandbox import probes

# no_leaks; Docker sandboxes: one worker for them all (tests/conftest.py)
pytestmark = [pytest.mark.usefixtures("no_leaks"), pytest.mark.xdist_group("docker")]

PLANT = r"""
import json, os, site, sys
version = f"python{sys.version_info[0]}.{sys.version_info[1]}"
planted = []
for home in {os.environ.get("HOME", "/"), "/work", "/tmp", os.getcwd()}:
    for folder in {home, os.path.join(home, ".local", "lib", version, "site-packages"),
                   site.getusersitepackages()}:
        try:
            os.makedirs(folder, exist_ok=True)
            for name, text in (("usercustomize.py", "print('HIJACKED by usercustomize')"),
                               ("sitecustomize.py", "print('HIJACKED by sitecustomize')"),
                               ("zz-hook.pth", "import sys; print('HIJACKED by a .pth file')")):
                with open(os.path.join(folder, name), "w") as handle:
                    handle.write(text + "\n")
            planted.append(folder)
        except OSError:
            pass
print(json.dumps(sorted(set(planted))))
"""


def test_a_planted_user_site_does_not_run_in_later_python3(
    backend: str, limits: SandboxLimits
) -> None:
    with open_sandbox(backend, limits=limits) as box:
        planted = box.exec(["python3", "-c", PLANT])
        assert planted.exit_code == 0 and probes.parse(planted.stdout), planted
        for env in ({}, {"HOME": "/work"}):  # also when a caller points HOME somewhere writable
            for command in (["python3", "-c", "print('clean')"], "python3 -c \"print('clean')\""):
                run = box.exec(command, env=env)
                assert (run.exit_code, run.stdout) == (0, b"clean\n"), (env, command, run)
        box.write_file("main.py", "import json\nprint(json.dumps('clean'))\n")
        assert box.exec(["python3", "main.py"]).stdout == b'"clean"\n'


def test_home_cannot_be_created_so_no_dotfile_can_be_planted(
    backend: str, limits: SandboxLimits
) -> None:
    with open_sandbox(backend, limits=limits) as box:
        home = box.exec('mkdir -p "$HOME/.config" && echo "$HOME is writable"')
        assert home.exit_code != 0 and b"writable" not in home.stdout, home
