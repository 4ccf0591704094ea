"""Checkpoints: per-account paths, the quota, names taken once, archives as PEFT directories."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from hub_server.admin import create_user, open_database
from hub_server.core.blobstore import BlobStore
from hub_server.core.errors import BadRequest, NotFound
from hub_server.core.settings import HubSettings
from hub_server.lab.checkpoints import CheckpointStore, TinkerPath
from registry_index.peft_adapter import tar_files

MODEL = "0123456789abcdef0123:train:0"


def archive(size: int) -> bytes:
    files = {
        "adapter_config.json": b'{"r": 8}',
        "adapter_model.safetensors": b"w" * size,
        "optimizer.pt": b"o" * 10,
    }
    return tar_files(files)


@pytest.fixture
def store(tmp_path: Path) -> tuple[CheckpointStore, str, str]:
    settings = HubSettings.from_env(tmp_path)
    engine = open_database(settings)
    alice, bob = create_user(engine, "alice").id, create_user(engine, "bob").id
    return CheckpointStore(engine, BlobStore(settings.resolved_storage_url), 40_000), alice, bob


def test_paths_are_per_account_and_names_taken_once(
    store: tuple[CheckpointStore, str, str],
) -> None:
    checkpoints, alice, bob = store
    path = TinkerPath.new(MODEL, "weights", "step-1")
    checkpoints.put(alice, path, archive(100))
    assert checkpoints.read(checkpoints.find(alice, path)) == archive(100)
    with pytest.raises(NotFound):
        checkpoints.find(bob, path)
    with pytest.raises(ValueError, match="exists already"):
        checkpoints.put(alice, path, archive(200))
    checkpoints.put(bob, path, archive(300))  # bob's own path of the same name
    assert checkpoints.read(checkpoints.find(bob, path)) == archive(300)
    assert [str(c.sha256) for c in checkpoints.listing(alice)] != [
        str(c.sha256) for c in checkpoints.listing(bob)
    ]
    peft = checkpoints.peft_archive(checkpoints.find(alice, path))
    with tarfile.open(fileobj=io.BytesIO(peft)) as tar:
        assert sorted(tar.getnames()) == ["adapter_config.json", "adapter_model.safetensors"]


def test_the_quota_counts_an_accounts_archives(store: tuple[CheckpointStore, str, str]) -> None:
    checkpoints, alice, bob = store
    checkpoints.put(alice, TinkerPath.new(MODEL, "weights", "a"), archive(25_000))
    with pytest.raises(ValueError, match="quota exceeded"):
        checkpoints.put(alice, TinkerPath.new(MODEL, "weights", "b"), archive(25_000))
    checkpoints.put(bob, TinkerPath.new(MODEL, "weights", "b"), archive(25_000))
    assert checkpoints.usage(alice) == checkpoints.usage(bob) > 25_000


@pytest.mark.parametrize(
    "text",
    [
        "tinker://x/weights/a",
        f"tinker://{MODEL}/other/a",
        f"tinker://{MODEL}/weights/../a",
        f"{MODEL}/weights/a",
        f"tinker://{MODEL}/weights",
    ],
)
def test_a_path_not_of_this_lab_is_a_clear_400(text: str) -> None:
    with pytest.raises(BadRequest, match="tinker://MODEL_ID/weights/NAME"):
        TinkerPath.parse(text)


def test_overwrite_replaces_and_delete_frees_the_quota(
    store: tuple[CheckpointStore, str, str],
) -> None:
    checkpoints, alice, bob = store
    path = TinkerPath.new(MODEL, "weights", "latest")
    checkpoints.put(alice, path, archive(25_000))
    checkpoints.put(alice, path, archive(26_000), overwrite=True)  # within the quota: replaced
    assert checkpoints.read(checkpoints.find(alice, path)) == archive(26_000)
    with pytest.raises(ValueError, match="quota exceeded"):
        checkpoints.put(alice, path, archive(45_000), overwrite=True)
    assert checkpoints.read(checkpoints.find(alice, path)) == archive(26_000)  # kept
    with pytest.raises(NotFound):
        checkpoints.delete(bob, path)
    key = checkpoints.find(alice, path)
    checkpoints.delete(alice, path)
    assert checkpoints.usage(alice) == 0 and not checkpoints.store.exists(key)
    with pytest.raises(NotFound):
        checkpoints.find(alice, path)
    checkpoints.put(alice, TinkerPath.new(MODEL, "weights", "again"), archive(25_000))
