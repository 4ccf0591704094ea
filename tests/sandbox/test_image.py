"""The image builder: debootstrap + docker import, on this machine (Docker never pulls)."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

from registry_index.user_dirs import cache_home
from sandbox import open_sandbox
from sandbox.image import DEFAULT_SUITE, _package_cache

pytestmark = pytest.mark.xdist_group("docker")  # starts Docker sandboxes (tests/conftest.py)

TAG = "prime-sandbox/build-test:latest"


@pytest.mark.slow
@pytest.mark.usefixtures("docker_ready")
def test_build_image_from_a_root_filesystem_runs_sandboxes() -> None:
    import docker.errors

    from sandbox.backends.docker import docker_client
    from sandbox.image import build_image

    messages: list[str] = []
    try:
        assert build_image(TAG, force=True, say=messages.append) == "built"
        assert any("debootstrap" in message for message in messages)
        # Its packages are kept: a rebuild (this one, after scripts/start_services.sh's build)
        # checks them against the suite's index instead of downloading them again.
        assert list((cache_home() / "debootstrap" / DEFAULT_SUITE).glob("*.deb"))
        assert build_image(TAG) == "present"
        with open_sandbox("docker", image=TAG) as box:
            result = box.exec(
                ["python3", "-c", "import json, sqlite3, ssl; print(json.dumps([1]))"]
            )
            assert result.stdout == b"[1]\n", result
    finally:
        with contextlib.suppress(docker.errors.ImageNotFound):
            docker_client().images.remove(TAG, force=True)


def test_an_unwritable_cache_builds_without_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    assert _package_cache("bookworm") is None  # debootstrap then downloads, as without one
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert _package_cache("bookworm") == tmp_path / "cache" / "prime" / "debootstrap" / "bookworm"
