"""The real clients against a real hub: twine, uv publish, pip and uv installs."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.hub_server.hubproc import HubProcess
from tests.hub_server.wheels import write_wheel

BIN = Path(sys.executable).parent
CLEAN_ENV = {
    **os.environ,
    "PIP_CONFIG_FILE": os.devnull,
    "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    "UV_NO_CONFIG": "1",
    "NO_COLOR": "1",
}


def run(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        args, capture_output=True, text=True, env=CLEAN_ENV, timeout=300, check=False
    )
    if check and result.returncode != 0:
        raise AssertionError(f"{args} failed:\n{result.stdout}\n{result.stderr}")
    return result


def twine_upload(hub: HubProcess, token: str, *files: Path, url: str | None = None):  # type: ignore[no-untyped-def]
    return run(
        str(BIN / "twine"), "upload", "--disable-progress-bar", "--non-interactive",
        "--repository-url", url or f"{hub.url}/legacy/", "-u", "__token__", "-p", token,
        *map(str, files), check=False,
    )  # fmt: skip


def fresh_venv(path: Path) -> Path:
    run(str(BIN / "uv"), "venv", "--seed", "--python", sys.executable, str(path))
    return path / "bin" / "python"


def test_twine_upload_then_pip_and_uv_install(hub: HubProcess, tmp_path: Path) -> None:
    token = hub.add_user("tina")
    wheel = write_wheel(tmp_path / "dist", "tina-env", "0.1.0", module_source="ANSWER = 42\n")
    first = twine_upload(hub, token, wheel)
    assert first.returncode == 0, first.stdout + first.stderr
    again = twine_upload(hub, token, wheel)  # an identical re-run succeeds (200 no-op)
    assert again.returncode == 0, again.stdout + again.stderr

    index = f"{hub.url}/tina/simple/"
    pip_python = fresh_venv(tmp_path / "pip-venv")
    run(str(pip_python), "-m", "pip", "install", "--no-cache-dir", "--index-url", index, "tina-env")
    out = run(str(pip_python), "-c", "import tina_env; print(tina_env.ANSWER)")
    assert out.stdout.strip() == "42"

    uv_python = fresh_venv(tmp_path / "uv-venv")
    run(str(BIN / "uv"), "pip", "install", "--no-cache", "--python", str(uv_python),
        "--index-url", index, "tina-env==0.1.0")  # fmt: skip
    out = run(str(uv_python), "-c", "import tina_env; print(tina_env.ANSWER)")
    assert out.stdout.strip() == "42"
    # Downloads are written in batches (every second): wait for both to land.
    deadline = time.monotonic() + 60
    while True:
        info = httpx.get(f"{hub.url}/api/v1/environmentshub/tina/tina-env").json()["data"]
        if info["downloads"] >= 2 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert info["downloads"] >= 2


def test_uv_publish_and_reupload_conflict(hub: HubProcess, tmp_path: Path) -> None:
    token = hub.add_user("ursula")
    wheel = write_wheel(tmp_path / "a", "uv-env", "1.0.0")
    published = run(
        str(BIN / "uv"), "publish", "--publish-url", f"{hub.url}/ursula/legacy/",
        "--token", token, str(wheel), check=False,
    )  # fmt: skip
    assert published.returncode == 0, published.stderr
    listing = httpx.get(
        f"{hub.url}/ursula/simple/uv-env/",
        headers={"Accept": "application/vnd.pypi.simple.v1+json"},
    ).json()
    assert [f["filename"] for f in listing["files"]] == [wheel.name]

    other = write_wheel(tmp_path / "b", "uv-env", "1.0.0", module_source="VALUE = 2\n")
    refused = twine_upload(hub, token, other)
    assert refused.returncode != 0
    assert "File already exists" in refused.stdout + refused.stderr
    raw = httpx.post(
        f"{hub.url}/legacy/",
        auth=("__token__", token),
        data={":action": "file_upload", "protocol_version": "1", "filetype": "bdist_wheel",
              "name": "uv-env", "version": "1.0.0",
              "sha256_digest": __import__("hashlib").sha256(other.read_bytes()).hexdigest()},
        files={"content": (other.name, other.read_bytes(), "application/octet-stream")},
    )  # fmt: skip
    assert raw.status_code == 400
    assert raw.reason_phrase.startswith("File already exists")
    assert raw.text.startswith("File already exists")
