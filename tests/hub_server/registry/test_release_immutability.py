"""Issue 26, class 2: a released version's code never changes. Once `wordle 1.2.0` has a
wheel, no second wheel is accepted for it (another build tag, tag set, platform, name case or
spelling of the version), and no second source archive, on either upload path; under
concurrency too. In-process hub, real SQLite and blob store."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
from sqlmodel import Session, select

from hub_server.accounts.models import Owner
from hub_server.core.errors import BadRequest
from hub_server.registry.publishing import EnvTarget, NewFile, publish_file
from tests.hub_server.inproc import InProcessHub
from tests.hub_server.races import after_first_select
from tests.hub_server.registry.test_rest_api import API
from tests.hub_server.wheels import source_archive_bytes, twine_upload_form, wheel_bytes

ORIGINAL = "VALUE = 'original'\n"
CHANGED = "VALUE = 'changed'\n"

# Filenames of another wheel of 1.2.0, and the version its dist-info and METADATA spell.
ALIASES = [
    ("wordle-1.2.0-1-py3-none-any.whl", "1.2.0"),  # a build tag
    ("wordle-1.2.0-py2.py3-none-any.whl", "1.2.0"),  # another tag set
    ("wordle-1.2.0-cp312-cp312-manylinux_2_17_x86_64.whl", "1.2.0"),  # a platform
    ("Wordle-1.2.0-py3-none-any.whl", "1.2.0"),  # upper-case name
    ("wordle-1.2-py3-none-any.whl", "1.2"),
    ("wordle-1.2.0.0-py3-none-any.whl", "1.2.0.0"),
    ("wordle-v1.2.0-py3-none-any.whl", "v1.2.0"),
    ("wordle-01.2.0-py3-none-any.whl", "01.2.0"),
]


@pytest.fixture
def hub(fresh_inproc_hub: InProcessHub) -> InProcessHub:
    return fresh_inproc_hub


def wheel(version: str, module: str) -> bytes:
    return wheel_bytes("wordle", version, module_source=module)


def twine(hub: InProcessHub, token: str, filename: str, data: bytes, version: str,
          filetype: str = "bdist_wheel") -> Any:  # fmt: skip
    fields, _ = twine_upload_form("wordle", version, data)
    fields["filetype"] = filetype
    return hub.client().post(
        f"{hub.url}/{'sam'}/legacy/",
        auth=("__token__", token),
        data=fields,
        files={"content": (filename, data, "application/octet-stream")},
    )


def published(hub: InProcessHub, token: str, version: str, module: str) -> None:
    """Upload wordle `version` (with `module` as its code) through twine, which must take it."""
    answer = twine(
        hub, token, f"wordle-{version}-py3-none-any.whl", wheel(version, module), version
    )
    assert answer.status_code == 200, answer.text


def rest_push(hub: InProcessHub, token: str, filename: str, data: bytes, version: str) -> Any:
    """`prime env push`'s wheel upload: reserve, PUT, finalize; the first refusal's answer."""
    api = hub.client(token)
    env = api.post(f"{API}/resolve", json={"name": "wordle"})
    env_id = env.json()["data"]["id"]
    reserved = api.post(
        f"{API}/{env_id}/wheels",
        json={"filename": filename, "semantic_version": version, "size": len(data),
              "sha256": hashlib.sha256(data).hexdigest()},
    )  # fmt: skip
    if reserved.status_code != 200:
        return reserved
    put = api.put(reserved.json()["data"]["upload_url"], content=data)
    assert put.status_code == 200, put.text
    return api.post(f"{API}/{env_id}/wheels/{reserved.json()['data']['wheel_id']}/finalize")


def served_wheels(hub: InProcessHub) -> list[str]:
    page = hub.http.get(
        f"{hub.url}/sam/simple/wordle/", headers={"Accept": "application/vnd.pypi.simple.v1+json"}
    )
    return [f["filename"] for f in page.json()["files"]]


@pytest.mark.parametrize("path", ["twine", "rest"])
@pytest.mark.parametrize(("filename", "spelled"), ALIASES, ids=[a[0] for a in ALIASES])
def test_a_second_wheel_of_a_released_version_is_refused(
    hub: InProcessHub, path: str, filename: str, spelled: str
) -> None:
    token = hub.add_user("sam")
    published(hub, token, "1.2.0", ORIGINAL)
    other = wheel(spelled, CHANGED)
    answer = (twine if path == "twine" else rest_push)(hub, token, filename, other, spelled)
    assert answer.status_code == 400, answer.text
    assert "wordle-1.2.0-py3-none-any.whl" in answer.text and "never changes" in answer.text
    assert served_wheels(hub) == ["wordle-1.2.0-py3-none-any.whl"]
    record = hub.http.get(f"{hub.url}{API}/sam/wordle/@1.2").json()["data"]
    downloaded = hub.http.get(record["wheel_url"]).content
    assert (
        b"original" in downloaded
        or hashlib.sha256(downloaded).hexdigest()
        == hashlib.sha256(wheel("1.2.0", ORIGINAL)).hexdigest()
    )


def test_a_second_source_archive_is_refused_and_one_of_each_is_allowed(hub: InProcessHub) -> None:
    token = hub.add_user("sam")
    published(hub, token, "1.2.0", ORIGINAL)
    api = hub.client(token)
    env_id = api.post(f"{API}/resolve", json={"name": "wordle"}).json()["data"]["id"]

    def source(filename: str, body: bytes) -> Any:
        reserved = api.post(f"{API}/{env_id}/versions", json={
            "filename": filename, "semantic_version": "1.2.0",
            "sha256": hashlib.sha256(body).hexdigest()})  # fmt: skip
        if reserved.status_code != 200:
            return reserved
        api.put(reserved.json()["data"]["upload_url"], content=body)
        return api.post(f"{API}/{env_id}/versions/{reserved.json()['data']['version_id']}/finalize")

    original = source_archive_bytes({"wordle.py": ORIGINAL.encode()})
    first = source("wordle-1.2.0-aaaa.tar.gz", original)
    assert first.status_code == 200, first.text  # the wheel and one source archive
    second = source(
        "wordle-1.2.0-bbbb.tar.gz", source_archive_bytes({"wordle.py": CHANGED.encode()})
    )
    assert second.status_code == 400 and "never changes" in second.text
    # The identical file again is still a no-op; a new version is welcome.
    again = source("wordle-1.2.0-aaaa.tar.gz", original)
    assert again.status_code == 200, again.text
    published(hub, token, "1.2.0", ORIGINAL)
    published(hub, token, "1.3.0", CHANGED)


@pytest.mark.parametrize(
    "after", ["distfile", "JOIN version"], ids=["file-lookup", "release-check"]
)
def test_two_different_wheels_of_one_version_racing_cannot_both_land(
    hub: InProcessHub, after: str
) -> None:
    """The other wheel commits right after this upload first looked at the files (or at the
    release, before its transaction): the check under the environment's write lock still
    refuses this one."""
    token = hub.add_user("sam")
    published(hub, token, "1.0.0", ORIGINAL)
    state = hub.client().app.state.hub
    engine, store = state.engine, state.store
    with Session(engine) as session:
        owner = session.exec(select(Owner).where(Owner.name == "sam")).one()
    target = EnvTarget(owner=owner, name="wordle")

    def new_file(filename: str, data: bytes) -> NewFile:
        return NewFile(filename=filename, kind="wheel", sha256=hashlib.sha256(data).hexdigest(),
                       size=len(data), version="1.2.0")  # fmt: skip

    ours, theirs = wheel("1.2.0", ORIGINAL), wheel("1.2.0", CHANGED)

    def theirs_lands() -> None:
        publish_file(engine, store, target, new_file("wordle-1.2.0-1-py3-none-any.whl", theirs),
                     theirs, owner.user_id or "")  # fmt: skip

    with (
        after_first_select(engine, after, theirs_lands) as fired,
        pytest.raises(BadRequest, match="never changes"),
    ):
        publish_file(engine, store, target, new_file("wordle-1.2.0-py3-none-any.whl", ours),
                     ours, owner.user_id or "")  # fmt: skip
    assert fired
    assert "wordle-1.2.0-1-py3-none-any.whl" in served_wheels(hub)
    assert "wordle-1.2.0-py3-none-any.whl" not in served_wheels(hub)
