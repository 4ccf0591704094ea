"""Acceptance 7: `prime hub serve` + `prime hub seed`, then `prime train prime/arithmetic@V`
in a fresh venv installs the environment with `prime env install`'s code and trains; an
unknown name exits 2 before anything loads."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from prime_cli.env_install import find_uv
from tests.e2e.eval_support import ROOT, prime_env
from tests.e2e.test_eval_hub import fresh_python
from tests.e2e.train_support import FAST, metrics
from tests.hub_server.hubproc import HubProcess, start_hub
from tests.trainer_bridge.conftest import smollm2_tokenizer_dir, tiny_model_dir  # noqa: F401

pytestmark = pytest.mark.timeout(1500)


@pytest.fixture(scope="module")
def seeded_hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HubProcess]:
    with start_hub(tmp_path_factory.mktemp("hub")) as hub:
        seeded = subprocess.run(
            [str(Path(__import__("sys").executable).with_name("prime")), "hub", "seed",
             "--url", hub.url, "--data-dir", str(hub.data_dir)],
            env=hub.env, text=True, capture_output=True, timeout=900, check=False,
        )  # fmt: skip
        assert seeded.returncode == 0, seeded.stderr
        yield hub


@pytest.mark.slow  # seeds five environments with uv, then installs and trains
def test_train_installs_from_the_hub_and_trains(
    seeded_hub: HubProcess,
    tmp_path: Path,
    tiny_model_dir: Path,  # noqa: F811
) -> None:
    version = httpx.get(
        f"{seeded_hub.url}/api/v1/environmentshub/prime/arithmetic/@latest", timeout=30
    ).json()["data"]["semantic_version"]
    python = fresh_python(tmp_path / "venv")
    # The SDK the checkout runs with, installed into the venv itself (not only visible through
    # fresh_python's .pth), so the installer resolves the environment's SDK requirement there.
    subprocess.run(
        [str(find_uv()), "pip", "install", "-q", "--python", str(python), "--no-deps",
         "-e", str(ROOT / "sdk")],
        check=True,
    )  # fmt: skip
    token = seeded_hub.add_user("alice")
    env = prime_env(PRIME_HUB_URL=seeded_hub.url, PRIME_API_KEY=token, HOME=str(tmp_path))

    def prime(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(python), "-m", "prime_cli.main", *args],
            cwd=tmp_path, env=env, text=True, capture_output=True, timeout=900, check=False,
        )  # fmt: skip

    started = time.monotonic()
    unknown = prime("train", "prime/no-such-env", "--max-steps", "2")
    unknown_s = time.monotonic() - started
    assert unknown.returncode == 2, unknown.stderr
    assert "no-such-env" in unknown.stderr and "Traceback" not in unknown.stderr
    assert not (tmp_path / "outputs").exists()
    print(f"unknown name: exit 2 after {unknown_s:.1f} s")

    # the random-init model never answers correctly, so every group has equal rewards:
    # train on them anyway (zero-advantage filter off) to exercise the whole path
    result = prime(
        "train", f"prime/arithmetic@{version}", "-m", str(tiny_model_dir), "--max-steps", "2",
        "--no-orchestrator.filter-zero-advantages", "--push", "--public", "--output", "json",
        *FAST,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert "is not installed here; installing it from" in result.stderr
    summary = json.loads(result.stdout)
    run = Path(summary["run_dir"])
    assert [p["step"] for p in summary["pushes"]] == ["0", "2"]  # before and after
    board = httpx.get(
        f"{seeded_hub.url}/api/v1/evaluations/", params={"environment": "prime/arithmetic"},
        timeout=30,
    )  # fmt: skip
    assert board.status_code == 200, board.text
    assert [r["step"] for r in metrics(run)] == [0, 1]
    installed = subprocess.run(
        [str(python), "-c", "import importlib.metadata as m; print(m.version('arithmetic'))"],
        text=True, capture_output=True, check=True,
    )  # fmt: skip
    assert installed.stdout.strip() == version
    meta = json.loads((run / "evals" / "step_2" / "metadata.json").read_text())
    assert meta["hub_env"] == "prime/arithmetic" and meta["training"]["step"] == 2
