"""LoRA adapters on the hub (`/api/v1/adapters/…`), in-process: push and download byte for
byte, immutable versions, private is 404 to everyone else on every route (as an unknown
name), who may push, bad adapters refused with nothing stored, the quota, and a Lab
checkpoint published by its own account only."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlmodel import Session, select

from hub_server.accounts.models import User
from hub_server.admin import create_org, open_database
from hub_server.core.blobstore import BlobStore
from hub_server.lab.checkpoints import CheckpointStore, TinkerPath
from registry_index.peft_adapter import CONFIG, FILES, WEIGHTS, tar_files
from tests.hub_server.inproc import InProcessHub, start_inproc_hub
from tests.registry_index.adaptermaker import adapter_config, safetensors_bytes, write_adapter

API = "/api/v1/adapters"
MODEL = "0123456789abcdef0123:train:0"


@pytest.fixture(scope="module")
def tokens(inproc_hub: InProcessHub) -> dict[str, str]:
    """alice (all), bob (all), alice's read-only and name-scoped tokens."""
    made = {"alice": inproc_hub.add_user("alice"), "bob": inproc_hub.add_user("bob")}
    made["alice-read"] = inproc_hub.token_for("alice", ["read"])
    made["alice-env"] = inproc_hub.token_for("alice", ["upload:alice/solo"])
    made["alice-upload"] = inproc_hub.token_for("alice", ["upload:alice"])
    return made


def adapter_files(tmp_path: Path, seed: int = 0, **options: Any) -> dict[str, tuple[str, bytes]]:
    directory = write_adapter(tmp_path / f"adapter-{seed}", seed=seed, **options)
    return {name: (name, (directory / name).read_bytes()) for name in FILES}


def push(api: Any, name: str, files: dict[str, tuple[str, bytes]], **params: str) -> httpx.Response:
    response: httpx.Response = api.post(f"{API}/{name}/versions", files=files, params=params)
    return response


def stored_blobs(inproc_hub: InProcessHub) -> set[str]:
    return {p.name for p in (inproc_hub.data_dir / "blobs" / "sha256").rglob("*") if p.is_file()}


def test_a_push_downloads_byte_for_byte_and_versions_are_immutable(
    inproc_hub: InProcessHub, tokens: dict[str, str], tmp_path: Path
) -> None:
    api = inproc_hub.client(tokens["alice"])
    files = adapter_files(tmp_path)
    first = push(api, "alice/round-trip", files)
    assert first.status_code == 200, first.text
    version = first.json()["data"]
    assert (version["version"], version["base_model"], version["rank"]) == (
        "1",
        "local/smollm2-135m",
        4,
    )
    for file in version["files"]:
        got = api.get(file["url"])
        assert got.status_code == 200 and got.content == files[file["filename"]][1]
    summary = api.get(f"{API}/alice/round-trip").json()["data"]
    assert summary["visibility"] == "private" and summary["latest_version"] == "1"

    again = push(api, "alice/round-trip", files, version="1.0")  # 1.0 is 1 (PEP 440)
    assert again.status_code == 409 and "immutable" in again.json()["detail"]
    second = push(api, "alice/Round_Trip", adapter_files(tmp_path, seed=1), base_model="other/m")
    assert second.status_code == 200 and second.json()["data"]["version"] == "2"
    assert second.json()["data"]["base_model"] == "other/m"
    third = push(api, "alice/round-trip", files, version="2.5rc1")
    assert third.json()["data"]["version"] == "2.5rc1"
    versions = api.get(f"{API}/alice/round-trip/versions").json()["data"]
    assert [v["version"] for v in versions] == ["2.5rc1", "2", "1"]
    assert api.get(f"{API}/alice/round-trip/@latest").json()["data"]["version"] == "2"
    assert api.get(f"{API}/alice/round-trip/@%3C2").json()["data"]["version"] == "1"
    missing = api.get(f"{API}/alice/round-trip/@9")
    assert missing.status_code == 404 and "available versions: 1, 2, 2.5rc1" in missing.text


def test_private_is_404_to_everyone_else_on_every_route(
    inproc_hub: InProcessHub, tokens: dict[str, str], tmp_path: Path
) -> None:
    alice = inproc_hub.client(tokens["alice"])
    assert push(alice, "alice/secret", adapter_files(tmp_path)).status_code == 200
    file_url = f"{API}/alice/secret/@1/files/{WEIGHTS}"
    reads = [f"{API}/alice/secret", f"{API}/alice/secret/versions", f"{API}/alice/secret/@1"]
    reads += [f"{API}/alice/secret/@latest", file_url]
    for outsider in (
        inproc_hub.http,
        inproc_hub.client(tokens["bob"]),
        inproc_hub.client(tokens["alice-env"]),
    ):
        for path in reads:
            hidden = outsider.get(path)
            unknown = outsider.get(path.replace("secret", "never-pushed"))
            assert hidden.status_code == unknown.status_code == 404, path
            assert hidden.json() == {
                "detail": unknown.json()["detail"].replace("never-pushed", "secret")
            }
        assert "alice/secret" not in outsider.get(f"{API}/?owner=alice").text
        patched = outsider.patch(f"{API}/alice/secret", json={"visibility": "public"})
        assert patched.status_code in (401, 404)
    bob = inproc_hub.client(tokens["bob"])
    assert push(bob, "alice/secret", adapter_files(tmp_path)).status_code == 404
    assert push(bob, "alice/brand-new", adapter_files(tmp_path)).status_code == 404
    reader = inproc_hub.client(tokens["alice-read"])
    assert reader.get(file_url).status_code == 200
    assert reader.get(f"{API}/", params={"owner": "alice"}).json()["total_count"] >= 1

    made_public = alice.patch(f"{API}/alice/secret", json={"visibility": "public"})
    assert made_public.json()["data"]["visibility"] == "public"
    assert inproc_hub.http.get(file_url).status_code == 200
    listed = inproc_hub.http.get(f"{API}/", params={"owner": "alice"}).json()["data"]
    assert [a["name"] for a in listed] == ["secret"]


def test_who_may_push(inproc_hub: InProcessHub, tokens: dict[str, str], tmp_path: Path) -> None:
    files = adapter_files(tmp_path)
    # a scope naming one environment reaches no adapter: not even to know a name is free
    for token, status in (("alice-read", 403), ("alice-env", 404), ("alice-upload", 200)):
        answer = push(inproc_hub.client(tokens[token]), "alice/solo", files)
        assert answer.status_code == status, (token, answer.text)
    assert "upload:alice" in push(inproc_hub.client(tokens["alice-read"]), "alice/solo", files).text
    assert push(inproc_hub.http, "alice/solo", files).status_code == 401
    engine = open_database(inproc_hub.settings)
    try:
        create_org(engine, "labs", ["bob"])
    finally:
        engine.dispose()
    assert push(
        inproc_hub.client(tokens["bob"]), "labs/shared", files, visibility="public"
    ).is_success
    assert inproc_hub.http.get(f"{API}/labs/shared").json()["data"]["visibility"] == "public"
    assert push(inproc_hub.client(tokens["alice"]), "labs/shared", files).status_code == 403
    # a push never changes an existing adapter's visibility: it says how to
    clash = push(inproc_hub.client(tokens["bob"]), "labs/shared", files, visibility="private")
    assert clash.status_code == 409 and "prime adapter edit labs/shared --private" in clash.text


def _garbage_weights() -> bytes:
    return b"\x10\x00\x00\x00\x00\x00\x00\x00" + b"not a safetensors header at all"


@pytest.mark.parametrize(
    ("case", "status", "message"),
    [
        ("missing config", 400, "exactly adapter_config.json and adapter_model.safetensors"),
        ("garbage weights", 400, "Not a PEFT LoRA adapter: adapter_model.safetensors"),
        ("not lora", 400, "only LoRA adapters"),
        ("no base model", 400, "--base-model"),
        ("extra file", 400, "Maximum number of files is 2: an adapter push sends"),
        ("other name", 400, "Unexpected form part 'model.safetensors'"),
        ("bad version", 400, "is not a version"),
    ],
)
def test_a_bad_adapter_is_refused_and_nothing_is_stored(
    inproc_hub: InProcessHub, tokens: dict[str, str], tmp_path: Path, case: str, status: int,
    message: str,
) -> None:  # fmt: skip
    files, params = adapter_files(tmp_path), {}
    if case == "missing config":
        del files[CONFIG]
    elif case == "garbage weights":
        files[WEIGHTS] = (WEIGHTS, _garbage_weights())
    elif case == "not lora":
        files[CONFIG] = (CONFIG, json.dumps(adapter_config(peft_type="PREFIX_TUNING")).encode())
    elif case == "no base model":
        files[CONFIG] = (CONFIG, json.dumps(adapter_config(base_model=None)).encode())
    elif case == "extra file":
        files["README.md"] = ("README.md", b"hello")
    elif case == "other name":
        files["model.safetensors"] = files.pop(WEIGHTS)
    else:
        params["version"] = "one"
    before = stored_blobs(inproc_hub)
    answer = push(inproc_hub.client(tokens["alice"]), "alice/refused", files, **params)
    assert answer.status_code == status and message in answer.json()["detail"], answer.text
    assert stored_blobs(inproc_hub) == before
    assert inproc_hub.client(tokens["alice"]).get(f"{API}/alice/refused").status_code == 404


def test_too_big_and_over_quota_are_413_with_nothing_stored(tmp_path: Path) -> None:
    files = adapter_files(tmp_path)  # weights: 5 KiB
    limits = {"PRIME_HUB_MAX_UPLOAD_BYTES": "4096", "PRIME_HUB_MAX_ADAPTER_BYTES_PER_OWNER": "9000"}
    with start_inproc_hub(tmp_path / "hub", env=limits) as hub:
        alice = hub.client(hub.add_user("alice"))
        before = stored_blobs(hub)
        big = push(alice, "alice/big", files)
        assert big.status_code == 413 and "PRIME_HUB_MAX_UPLOAD_BYTES" in big.text
        small = adapter_files(tmp_path, seed=1, width=16)  # ~2.6 KiB of weights
        assert push(alice, "alice/small", small).status_code == 200
        assert push(alice, "alice/small", adapter_files(tmp_path, seed=2, width=16)).is_success
        over = push(alice, "alice/small", adapter_files(tmp_path, seed=3, width=16))
        assert over.status_code == 413 and "quota" in over.json()["detail"]
        # two versions: two weights, and one config (the same bytes: one content-addressed blob)
        assert len(stored_blobs(hub)) == len(before) + 3
        versions = alice.get(f"{API}/alice/small/versions").json()["data"]
        assert [v["version"] for v in versions] == ["2", "1"]


def lab_checkpoint(inproc_hub: InProcessHub, user: str, name: str, files: dict[str, bytes]) -> str:
    """Save `files` (plus an optimizer state) as `user`'s Lab checkpoint; its tinker path."""
    engine = open_database(inproc_hub.settings)
    try:
        with Session(engine) as session:
            account = session.exec(select(User).where(User.username == user)).one().id
        store = CheckpointStore(engine, BlobStore(inproc_hub.settings.resolved_storage_url), 10**9)
        path = TinkerPath.new(MODEL, "weights", name)
        store.put(account, path, tar_files({**files, "optimizer.pt": b"optimizer"}))
    finally:
        engine.dispose()
    return str(path)


def test_a_lab_checkpoint_is_published_by_its_own_account_only(
    inproc_hub: InProcessHub, tokens: dict[str, str]
) -> None:
    files = {
        CONFIG: json.dumps(adapter_config(rank=4)).encode(),
        WEIGHTS: safetensors_bytes({"m.lora_A.weight": [4, 8], "m.lora_B.weight": [8, 4]}),
    }
    path = lab_checkpoint(inproc_hub, "alice", "step-3", files)
    alice = inproc_hub.client(tokens["alice"])
    answer = alice.post(f"{API}/alice/from-lab/versions/from-lab", json={"checkpoint": path})
    assert answer.status_code == 200, answer.text
    published = answer.json()["data"]
    assert sorted(f["filename"] for f in published["files"]) == sorted(FILES)
    for file in published["files"]:
        assert alice.get(file["url"]).content == files[file["filename"]]
    assert alice.get(f"{API}/alice/from-lab").json()["data"]["visibility"] == "private"

    # bob may push to his own adapters, but alice's checkpoint is not his: 404, as a path never saved
    bob = inproc_hub.client(tokens["bob"])
    foreign = bob.post(f"{API}/bob/stolen/versions/from-lab", json={"checkpoint": path})
    never = bob.post(
        f"{API}/bob/stolen/versions/from-lab", json={"checkpoint": path.replace("step-3", "x")}
    )
    assert foreign.status_code == never.status_code == 404
    assert foreign.json()["detail"] == never.json()["detail"].replace("/x ", "/step-3 ")
    assert bob.get(f"{API}/bob/stolen").status_code == 404
    # reading a checkpoint is the trainer's: an upload-only token may not
    upload_only = inproc_hub.client(tokens["alice-upload"])
    refused = upload_only.post(f"{API}/alice/from-lab/versions/from-lab", json={"checkpoint": path})
    assert refused.status_code == 403 and "train scope" in refused.text
    bad = alice.post(f"{API}/alice/from-lab/versions/from-lab", json={"checkpoint": "s3://x"})
    assert bad.status_code == 400 and "tinker://" in bad.text


def test_the_owner_page_lists_the_adapters_its_reader_may_see(
    inproc_hub: InProcessHub, tokens: dict[str, str], tmp_path: Path
) -> None:
    alice = inproc_hub.client(tokens["alice"])
    files = adapter_files(tmp_path)
    assert push(alice, "alice/shown-lora", files, visibility="public").is_success
    assert push(alice, "alice/hidden-lora", files).is_success
    page = inproc_hub.http.get("/alice")
    assert page.status_code == 200
    assert "alice/shown-lora" in page.text and "hidden-lora" not in page.text
