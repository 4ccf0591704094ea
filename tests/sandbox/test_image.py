"""The image builder: debootstrap + docker import, as on a machine without a registry."""

from __future__ import annotations

import contextlib

import pytest

from sandbox import open_sandbox

pytestmark = pytest.mark.xdist_group("docker")  # starts Docker sandboxes (tests/conftest.py)

TAG = "prime-sandbox/build-test:latest"


@pytest.mark.slow
@pytest.mark.usefixtures("docker_ready")
def test_build_image_from_a_root_filesystem_runs_sandboxes() -> None:
    import docker.errors

    from sandbox.docker_backend import docker_client
    from sandbox.image import build_image

    messages: list[str] = []
    try:
        # pull=None: exercise the no-registry path even where a registry answers.
        assert build_image(TAG, force=True, pull=None, say=messages.append) == "built"
        assert any("debootstrap" in message for message in messages)
        assert build_image(TAG, pull=None) == "present"
        with open_sandbox("docker", image=TAG) as box:
            result = box.exec(
                ["python3", "-c", "import json, sqlite3, ssl; print(json.dumps([1]))"]
            )
            assert result.stdout == b"[1]\n", result
    finally:
        with contextlib.suppress(docker.errors.ImageNotFound):
            docker_client().images.remove(TAG, force=True)
