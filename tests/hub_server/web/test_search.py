"""Search, tags, sort and paging on the home and owner pages and the REST listing (in-process,
on SQLite FTS5 and PostgreSQL full text): one SQL query serves both, one page at a time."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from hub_server.admin import create_token, create_user, open_database
from hub_server.app import create_app
from hub_server.core.settings import HubSettings
from tests.hub_server.services import postgres_bin, postgres_cluster
from tests.hub_server.wheels import twine_upload_form, wheel_bytes
from tests.support import require

ENVS = [
    # name, description, tags
    ("word-count", "Count the words of a paragraph", ["text", "counting"]),
    ("wordle", "Guess the five-letter word in six tries", ["game", "multi-turn"]),
    ("reverse-text", "Reverse a string of text", ["text"]),
    ("chess-puzzles", "Find the best move in a chess position", ["game"]),
    ("sudoku", "Solve a sudoku grid", ["game", "logic"]),
]


def _upload(client: TestClient, token: str, owner: str, name: str, summary: str) -> None:
    fields, files = twine_upload_form(name, "1.0.0", wheel_bytes(name, "1.0.0", summary=summary))
    response = client.post(f"/{owner}/legacy/", auth=("__token__", token), data=fields, files=files)
    assert response.status_code == 200, response.text


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def client(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[TestClient]:
    with ExitStack() as stack:
        database_url = None
        if request.param == "postgres":
            require(postgres_bin() is not None, "PostgreSQL (Debian package postgresql)")
            database_url = stack.enter_context(postgres_cluster())
        yield stack.enter_context(_seeded_hub(tmp_path_factory.mktemp("search"), database_url))


@contextmanager
def _seeded_hub(data_dir: Path, database_url: str | None) -> Iterator[TestClient]:
    settings = HubSettings(data_dir=data_dir, database_url=database_url, uploads_per_minute=10_000)
    engine = open_database(settings)
    create_user(engine, "alice")
    create_user(engine, "bob")
    alice = create_token(engine, "alice", "cli")[0]
    bob = create_token(engine, "bob", "cli")[0]
    engine.dispose()
    with TestClient(create_app(settings)) as test_client:
        for name, description, tags in ENVS:
            _upload(test_client, alice, "alice", name, description)
            response = test_client.patch(
                f"/api/v1/environmentshub/alice/{name}",
                headers={"Authorization": f"Bearer {alice}"},
                json={"tags": tags, "description": description},
            )
            assert response.status_code == 200, response.text
        for i in range(30):
            _upload(test_client, bob, "bob", f"filler-{i:02d}", "Nothing to see here")
        test_client.patch(
            "/api/v1/environmentshub/alice/sudoku",
            headers={"Authorization": f"Bearer {alice}"},
            json={"visibility": "private"},
        )
        yield test_client


def shown(html: str) -> list[str]:
    return re.findall(r'class="card-title" href="/([^"]+)"', html)


def test_text_search_matches_word_prefixes_in_names_and_descriptions(client: TestClient) -> None:
    assert set(shown(client.get("/", params={"q": "word"}).text)) == {
        "alice/word-count",
        "alice/wordle",
    }
    # A description word; every word must match.
    assert shown(client.get("/", params={"q": "chess move"}).text) == ["alice/chess-puzzles"]
    assert shown(client.get("/", params={"q": "chess sudoku"}).text) == []
    # An owner's name counts as a word; punctuation never reaches FTS syntax.
    assert shown(client.get("/", params={"q": 'alice "text*'}).text) == ["alice/reverse-text"]
    assert len(shown(client.get("/", params={"q": "alice"}).text)) == 4


def test_tags_combine_with_text_and_with_each_other(client: TestClient) -> None:
    assert set(shown(client.get("/", params={"tag": "game"}).text)) == {
        "alice/wordle",
        "alice/chess-puzzles",
    }  # sudoku is private
    both = client.get("/", params=[("tag", "game"), ("tag", "multi-turn")]).text
    assert shown(both) == ["alice/wordle"]
    assert shown(client.get("/", params={"tag": "text", "q": "reverse"}).text) == [
        "alice/reverse-text"
    ]
    page = client.get("/", params={"tag": "game", "q": "guess"}).text
    assert "Clear all" in page and 'aria-label="Remove tag game"' in page


def test_empty_search_says_so_and_offers_to_clear(client: TestClient) -> None:
    page = client.get("/", params={"q": "zzzz"}).text
    assert "No environments match “zzzz”" in page and "No environments yet" not in page


def test_sort_and_server_side_paging(client: TestClient) -> None:
    first = client.get("/", params={"sort": "name"}).text
    names = shown(first)
    assert len(names) == 24 and "Page 1 of 2" in first
    assert names == sorted(names, key=lambda n: n.split("/")[1])
    second = shown(client.get("/", params={"sort": "name", "page": 2}).text)
    assert len(second) == 34 - 24 and not set(second) & set(names)


def test_owner_page_lists_only_that_owner_with_the_same_filters(client: TestClient) -> None:
    page = client.get("/alice", params={"tag": "text"}).text
    assert set(shown(page)) == {"alice/word-count", "alice/reverse-text"}
    assert "user" in page


def test_rest_listing_uses_the_same_search(client: TestClient) -> None:
    body = client.get("/api/v1/environmentshub/", params={"search": "word", "sort": "name"}).json()
    assert [e["name"] for e in body["data"]] == ["word-count", "wordle"]
    assert body["total_count"] == 2
