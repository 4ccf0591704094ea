"""What one verification may take of the hub (issue 37): a run's samples are streamed with a
count and byte limit before anything is held, a run holds a bounded number of batches, the
environment's code cannot make the hub read a huge `out.json`, and the install has a uv cache
of its own under a disk budget. The real paths run on bubblewrap (a hub without Docker)."""

from __future__ import annotations

import base64
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from hub_client.client import HubClient
from hub_server.evals import service
from hub_server.evals.verification import NotVerifiable, _collect_samples, parse_out_json
from prime_cli.env.project import load_project
from prime_cli.env.publish import push_environment
from prime_cli.env.scaffold import create_scaffold
from tests.hub_server.evals.test_verification import (
    finished_run,
    hub_verifying_in,
    push_scaffold,
    settled,
)
from tests.hub_server.hardening_hub import HardenedHub

EVALS = "/api/v1/evaluations"


# -- the samples, streamed ------------------------------------------------------------------


def _run_with_batches(hub: HardenedHub, batches: list[list[dict[str, Any]]]) -> list[str]:
    """The blob keys of a run of alice's pushed in `batches`."""
    token = {"Authorization": f"Bearer {hub.tokens['alice']}"}
    with hub.client() as client:
        run = client.post(f"{EVALS}/", headers=token, json={
            "name": "m", "environments": [{"slug": "alice/wordle"}], "model_name": "m"}
        ).json()["data"]["id"]  # fmt: skip
        for batch in batches:
            answer = client.post(f"{EVALS}/{run}/samples", headers=token, json={"samples": batch})
            assert answer.status_code == 200, answer.text
    from sqlmodel import Session

    from hub_server.evals.models import Evaluation

    with Session(hub.engine) as session:
        evaluation = session.get(Evaluation, run)
        assert evaluation is not None
        return [batch.blob_key for batch in evaluation.batches]


def sample(i: int, text: str = "x") -> dict[str, Any]:
    return {"example_index": i, "rollout_index": 0, "reward": 1.0,
            "completion": [{"role": "assistant", "content": text}]}  # fmt: skip


def test_samples_past_the_count_or_byte_limit_stop_the_read(tmp_path: Path) -> None:
    hub = HardenedHub(tmp_path / "hub")
    keys = _run_with_batches(hub, [[sample(i) for i in range(b * 4, b * 4 + 4)] for b in range(3)])
    settings = hub.settings.model_copy(update={"verify_max_samples": 12})
    pushed = _collect_samples(hub.app.state.hub.store, keys, settings, tmp_path / "s.jsonl")
    assert len(pushed.records) == 12 and set(pushed.records[0]) == {
        "example_index", "rollout_index", "reward", "rewards", "metrics"}  # fmt: skip
    assert (tmp_path / "s.jsonl").read_text().count("\n") == 12
    fewer = settings.model_copy(update={"verify_max_samples": 10})
    with pytest.raises(NotVerifiable, match="more than 10 scored samples"):
        _collect_samples(hub.app.state.hub.store, keys, fewer, tmp_path / "s.jsonl")
    big = _run_with_batches(hub, [[sample(0, "y" * (3 << 20))]])
    small = settings.model_copy(update={"verify_max_sample_bytes": 2 << 20})
    with pytest.raises(NotVerifiable, match=f"more than {2 << 20} bytes"):
        _collect_samples(hub.app.state.hub.store, big, small, tmp_path / "s.jsonl")


def test_a_run_holds_a_bounded_number_of_batches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(service, "MAX_BATCHES_PER_RUN", 3)
    hub = HardenedHub(tmp_path / "hub")
    _run_with_batches(hub, [[sample(i)] for i in range(3)])
    with pytest.raises(AssertionError, match="already holds 3 batches"):
        _run_with_batches(hub, [[sample(i)] for i in range(4)])


def test_out_json_is_parsed_with_bounds() -> None:
    good = b'{"weights": {"a": 1.0}, "scores": [{"reward": 1.0, "rewards": {"a": 1.0}}]}'
    assert parse_out_json(good)["scores"][0]["reward"] == 1.0
    for bad, said in (
        (b"[" * 100_000, "not JSON"),
        (b'{"weights": {}, "scores": [{"reward": "lots"}]}', "not scores"),
        (b'{"weights": {}, "scores": [], "extra": ' + b"[" * 20 + b"]" * 20 + b"}", "nested"),
    ):
        with pytest.raises(NotVerifiable, match=said):
            parse_out_json(bad)


# -- the real path --------------------------------------------------------------------------


_FLOOD = """
import atexit as _atexit, os as _os


def _rewrite_out():  # after prime_env.rescore wrote its scores: 48 MB of them
    if _os.path.isdir("/work/rescore"):
        with open("/work/rescore/out.json", "w") as handle:
            handle.write('{"weights": {}, "scores": [' + '{"reward": 1.0},' * 3_000_000 + '{}]}')


_atexit.register(_rewrite_out)
"""


@pytest.fixture
def scratch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The temp directory the hub's verifications use, to see what they leave behind."""
    where = tmp_path / "tmp"
    where.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(where))
    yield where


def test_an_environment_that_rewrites_out_json_is_read_no_further_than_its_scores(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, scratch: Path
) -> None:
    with hub_verifying_in("local", tmp_path, monkeypatch, "floodsums") as hub:
        push_scaffold(hub, tmp_path, "outflood", edit=lambda module: module + _FLOOD)
        run = finished_run(hub, "flood", [("It is 42", 1.0)], env_name="outflood")
        state = settled(hub, [run])[run]
    assert state["verification"] == "failed", state
    assert "wrote no out.json of at most" in state["verification_detail"], state
    assert list(scratch.glob("hub-verify-*")) == []


def _bulky_project(root: Path) -> Path:
    """A `prime env init` environment whose wheel carries 96 MiB in 24 files, which compress
    ~30 to 1 (under the hub's upload ratio limit): a small wheel that installs big."""
    directory = create_scaffold("bulky", root)
    block = base64.b64encode(os.urandom(24 << 10)).decode()
    filler = "a" * ((1 << 20) - len(block) - 2)
    modules = [f"bulky_data{i}" for i in range(24)]
    for name in modules:
        with (directory / f"{name}.py").open("w") as handle:
            for _ in range(4):
                handle.write("#" + block + filler + "\n")
    pyproject = directory / "pyproject.toml"
    listed = ", ".join(f'"{m}"' for m in ["bulky", *modules])
    pyproject.write_text(pyproject.read_text().replace('py-modules = ["bulky"]',
                                                        f"py-modules = [{listed}]"))  # fmt: skip
    return directory


def test_an_install_past_the_disk_budget_is_stopped_and_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, scratch: Path
) -> None:
    """Before: the hub's shared uv cache kept the unpacked wheel (998 MiB for a 21 MiB one)
    after the run failed."""
    with hub_verifying_in("local", tmp_path, monkeypatch, "budgetsums",
                          PRIME_HUB_VERIFY_DISK_BYTES=str(48 << 20)) as hub:  # fmt: skip
        directory = _bulky_project(tmp_path)
        with HubClient(hub.url, hub.admin_token, transport=hub.transport) as client:
            push_environment(client, load_project(directory), "admin", visibility=None,
                             console=Console(stderr=True))  # fmt: skip
        run = finished_run(hub, "bulky", [("It is 42", 1.0)], env_name="bulky")
        state = settled(hub, [run])[run]
    assert state["verification"] == "failed", state
    assert "took more than 48 MiB of disk" in state["verification_detail"], state
    assert list(scratch.glob("hub-verify-*")) == []
    # The operator's uv cache never saw the wheel (it holds only the SDK's dependencies).
    assert list(_uv_cache().glob("archive-v0/*/bulky_data*.py")) == []


def _uv_cache() -> Path:
    import subprocess

    import uv

    found = subprocess.run([uv.find_uv_bin(), "cache", "dir"], capture_output=True, text=True,
                           check=True)  # fmt: skip
    return Path(found.stdout.strip())
