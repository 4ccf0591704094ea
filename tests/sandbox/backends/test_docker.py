"""A sandbox stopped from another thread mid-command is described, not an AttributeError.

CI caught `test_a_sandbox_stopped_by_the_host_mid_command_is_a_sandbox_error[docker]` with
`AttributeError: 'NoneType' object has no attribute 'attrs'`: the exec thread read
`self.container` twice while describing the death, and `stop()` on the test's thread cleared
it in between. The interleaving is forced here: reading the container's state is where the
other thread's `stop` lands (no daemon needed; the containment test covers the real one).
"""

from __future__ import annotations

from typing import Any

from sandbox.backends.docker import DockerSandbox


class _StoppedWhileReading:
    """The container as `_describe_death` sees it while `stop()` runs on another thread."""

    def __init__(self, box: DockerSandbox) -> None:
        self.box = box
        self.attrs: dict[str, Any] = {"State": {"Status": "exited", "ExitCode": 137}}

    def reload(self) -> None:
        self.box.container = None  # what `_destroy` does, from the stopping thread


def test_describing_a_death_survives_a_concurrent_stop() -> None:
    box = DockerSandbox()
    box.container = _StoppedWhileReading(box)
    assert box._describe_death() == "container exited, exit code 137."
